"""GroupQueryAttention's description in the shared target files (`attnws.spec.gqa.fields`): what a
target must state and what it may not, each refusal naming the field; and its recipe as the shared
entry points read it (`recipe.GqaRecipe`), whose containment fires on a view past the workspace."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnws.spec.domain import CONCRETE
from attnws.spec.documents import DocumentError
from attnws.spec.errors import InvalidArgument, NodeRejected
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.estimate import own_estimate
from attnws.spec.gqa.inputs import runtime_problem
from attnws.spec.gqa.problem import HeadSinkStorage, head_sink_kind
from attnws.spec.gqa.recipe import GqaRecipe, complete, recipe, validate_views
from attnws.spec.problem import Backend
from attnws.spec.shapes_file import read_shape_record, shape_record
from attnws.spec.target import target_from_dict

def target_geometry(t, batch, seq, total):
    """The target's geometry (its model-fixed dimensions) at B, S and T."""
    return replace(t.max_geometry(), batch=batch, seq=seq, total_seq=total)


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
    ({"kv_heads": 3}, "the node at its maxima fails ORT's check: GroupQueryAttention constructor"),
    ({"op": "mha", "kv_heads": 2, "heads": "4..4", "head_size": "64..64", "past": None},
     "kv_heads: GroupQueryAttention (op gqa) and PagedAttention (op paged) only"),
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


# -- the head sink's kind: a constant initializer (prepacked) or a graph input (converted) ----------

DECODE = {"op": "gqa", "heads": 64, "kv_heads": 4, "head_size": 64, "past": 4160, "batch": 3, "seq": 1,
          "total_seq": 64, "rotary": True, "sm": 89, "max_total_seq": 4160}


@pytest.mark.parametrize("given, kind", [(None, None), (False, None), (True, "initializer"),
                                         ("initializer", "initializer"), ("input", "input")])
def test_a_target_file_s_head_sink_is_none_an_initializer_or_an_input(given, kind):
    t = target_from_dict({**NODE, **({} if given is None else {"head_sink": given})})
    assert head_sink_kind(t.head_sink) == kind
    assert target_from_dict(t.as_dict()).head_sink == t.head_sink  # written back as read


@pytest.mark.parametrize("given, says", [("constant", 'field head_sink = "constant"; expected one of the strings'),
                                         (1, "field head_sink = 1 is an integer; expected true, false, null")])
def test_an_unknown_head_sink_is_refused_by_name(given, says):
    with pytest.raises(InvalidArgument, match=says):
        target_from_dict({**NODE, "head_sink": given})


@pytest.mark.parametrize("kind", ["initializer", "input"])
def test_a_shape_record_keeps_the_head_sink_s_kind(kind):
    t = target_from_dict({**NODE, "head_sink": kind})
    g = target_geometry(t, 2, 1, 40)
    record = shape_record(g, t.config)
    assert record["head_sink"] == (True if kind == "initializer" else "input")
    assert head_sink_kind(read_shape_record(record)[0].head_sink) == kind


@pytest.mark.parametrize("kind, storage, scratch, prepack", [
    (None, HeadSinkStorage.NONE, 0, 0),
    ("initializer", HeadSinkStorage.PREPACKED_FP32, 0, 256),
    ("input", HeadSinkStorage.DYNAMIC_CONVERSION, 256, 0),
])
def test_the_run_and_ort_s_estimate_take_the_head_sink_alike(kind, storage, scratch, prepack):
    """initializer: PrepackedFp32 at run time and in ORT's estimate (head_sink_is_constant_initializer);
    input: DynamicConversion in both; the conversion's align256(4 N) in XQA's recipe and envelope."""
    t = target_from_dict({**DECODE, "head_sink": kind or False})
    plain = target_from_dict(DECODE)
    p = runtime_problem(target_geometry(t, 3, 1, 64))
    assert p.head_sink_storage is storage and p.head_sink_is_input == (kind == "input")
    xqa = {name: recipe(runtime_problem(target_geometry(box, 3, 1, 64)), Backend.XQA, config=box.config)
           for name, box in (("sink", t), ("plain", plain))}
    assert xqa["sink"].run.backend.total_backend_bytes - xqa["plain"].run.backend.total_backend_bytes == scratch
    _, ort = own_estimate(t.max_geometry(), t.config)
    _, ort_plain = own_estimate(plain.max_geometry(), plain.config)
    assert ort.sized[Backend.XQA] - ort_plain.sized[Backend.XQA] == scratch
    assert ort.persistent_prepack_bytes == prepack


@pytest.mark.parametrize("value", ["constant", 1, "Input"])
def test_head_sink_kind_refuses_what_is_not_a_kind(value):
    with pytest.raises(InvalidArgument, match=f"head_sink {value!r}: expected 'initializer' or 'input'"):
        head_sink_kind(value)


# -- the cache layout: shared (one buffer), separate (present its own tensor), or from T and P ------

def test_a_range_of_past_lengths_needs_a_separate_present():
    with pytest.raises(InvalidArgument, match="a range of past lengths needs a separate present"):
        target_from_dict({**NODE, "past": "0..64"})
    t = target_from_dict({**NODE, "past": "0..64", "cache_layout": "separate"})
    assert (t.past.lo, t.past.hi, t.cache_layout) == (0, 64, "separate")


def test_a_windowed_cache_cannot_be_separate():
    windowed = {**NODE, "window": 64, "sliding_window_cache": True}
    target_from_dict(windowed)
    with pytest.raises(NodeRejected, match="a windowed cache's layout is shared"):
        target_from_dict({**windowed, "cache_layout": "separate"})


def test_one_windowed_shape_with_a_separate_present_is_ort_s_refusal():
    """dispatch, recipe and validate size one shape: a windowed cache read as separate must meet the
    builder's check (ORT's D7 text), not run as if shared."""
    windowed = target_from_dict({**NODE, "window": 64, "sliding_window_cache": True})
    shared = target_geometry(windowed, 1, 1, 7)
    assert runtime_problem(shared).kv_share_buffer
    with pytest.raises(InvalidArgument, match="sliding_window_cache=1 requires past_key/present_key and past_value/"
                                              "present_value to share the same buffer"):
        runtime_problem(replace(shared, cache_layout="separate"))


def test_an_unknown_layout_is_refused_by_name():
    with pytest.raises(DocumentError, match="cache_layout = \"paged\""):
        target_from_dict({**NODE, "cache_layout": "paged"})


@pytest.mark.parametrize("total, past, layout", [("1..64", "64", "shared"), ("65..80", "64", "separate"),
                                                 ("1..80", "64", None)])
def test_a_box_left_to_t_and_p_takes_the_layout_every_shape_of_it_has(total, past, layout):
    """Wholly T <= P: shared; wholly T > P: separate; across P: left to each shape (the solver's term)."""
    t = target_from_dict({**NODE, "total_seq": total, "past": past})
    assert t.max_geometry().cache_layout == layout


@pytest.mark.parametrize("layout", ["shared", "separate"])
def test_a_shape_record_keeps_the_cache_layout(layout):
    t = target_from_dict({**NODE, "cache_layout": layout})
    g = target_geometry(t, 1, 1, 40)
    assert read_shape_record(shape_record(g, t.config))[0].cache_layout == layout
    assert target_from_dict(t.as_dict()).cache_layout == layout
