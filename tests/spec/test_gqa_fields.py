"""GroupQueryAttention's description in the shared target files (`attnws.spec.gqa.fields`): what a
target must state and what it may not, each refusal naming the field; and its recipe as the shared
entry points read it (`recipe.GqaRecipe`), whose containment fires on a view past the workspace."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.inputs import runtime_problem, target_geometry
from attnws.spec.gqa.recipe import GqaRecipe, complete, validate_views
from attnws.spec.target import target_from_dict

NODE = {"op": "gqa", "heads": 4, "kv_heads": 2, "head_size": 64, "past": 64, "batch": 2, "seq": 4, "total_seq": 64}


def test_a_node_file_reads_its_model_fixed_dimensions_as_exact():
    t = target_from_dict(NODE)
    assert (t.heads.lo, t.kv_heads.lo, t.head_size.lo, t.past.lo) == (4, 2, 64, 64)
    assert (t.batch.lo, t.seq.lo, t.total_seq.lo) == (1, 1, 1)


@pytest.mark.parametrize("change, says", [
    ({"kv_heads": None}, "GroupQueryAttention needs kv_heads"),
    ({"past": None}, "GroupQueryAttention needs past"),
    ({"dtype": "fp32"}, "runs fp16 and bf16 only"),
    ({"heads": "2..4"}, "heads 2..4: GroupQueryAttention's heads is fixed by the model"),
    ({"v_head_size": "32..32"}, "GroupQueryAttention has one head size"),
    ({"sliding_window_cache": True}, "sliding_window_cache needs a window"),
    ({"patterns": {"small": {"past": "1..8"}}}, "a GroupQueryAttention pattern narrows batch, seq or total_seq"),
    ({"kv_heads": 3}, "the node at its maxima is not valid"),
    ({"op": "mha", "kv_heads": 2, "heads": "4..4", "head_size": "64..64", "past": None},
     "kv_heads, total_seq: GroupQueryAttention (op gqa) only"),
])
def test_a_target_file_is_refused_by_name(change, says):
    with pytest.raises(InvalidArgument, match=says.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        target_from_dict({k: v for k, v in {**NODE, **change}.items() if v is not None})


def test_the_recipe_s_containment_fires_on_a_view_past_the_workspace():
    config = target_from_dict(NODE).config
    p = runtime_problem(target_geometry(target_from_dict(NODE), 2, 1, 40))
    route = select(p, config).route
    run = complete(p.workspace_problem(CONCRETE), route)
    validate_views(CONCRETE, GqaRecipe(route, run))
    with pytest.raises(InvalidArgument, match="exceeds the workspace"):
        validate_views(CONCRETE, GqaRecipe(route, replace(run, total_workspace_bytes=run.total_workspace_bytes - 1)))
