"""MultiHeadAttention's AOT estimate: read as ORT reads a node, sound over every committed target's
shapes (every drawn runtime shape needs at most the bound), and unavailable, never a guess, where
attnws does not model the input or the option."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from attnws.spec import Backend, Classification, RuntimeConfig
from attnws.spec.errors import InvalidArgument, WorkspaceError
from attnws.spec.estimate import estimate_exact, estimate_for_node, estimate_geometry
from attnws.spec.hints import MISSING
from attnws.spec.target import load_target, target_from_dict
from attnws.spec.command_line import TARGETS_DIR

from ..strategies import geometries_in

MHA_TARGETS = {p.stem: load_target(p) for p in sorted(TARGETS_DIR.glob("mha-*.json"))}
SELF = [(2, 8, 32), (2, 8, 32), (2, 8, 32)]


@pytest.mark.parametrize("name", sorted(MHA_TARGETS))
@settings(max_examples=40)
@given(data=st.data())
def test_every_runtime_shape_of_a_committed_target_needs_at_most_the_bound(name, data):
    target = MHA_TARGETS[name]
    bound = estimate_geometry(target.max_geometry(), target.config)
    assert bound.ok and bound.classification is Classification.SAFE_BOUND
    exact = estimate_exact(data.draw(geometries_in(target)), target.config)
    if exact.ok:
        assert exact.total_workspace_bytes <= bound.total_workspace_bytes
        assert set(exact.backends) <= set(bound.backends)


def test_the_bound_is_the_largest_route_never_the_sum():
    target = MHA_TARGETS["mha-decoder-past-fp32-sm80"]
    bound = estimate_geometry(target.max_geometry(), target.config)
    sizes = [r.attention_workspace_bytes for r in bound.routes]
    assert set(bound.backends) == {Backend.MEA, Backend.UNFUSED} and len(sizes) == 2
    assert bound.total_workspace_bytes == max(sizes) < sum(sizes)


@pytest.mark.parametrize("value, causal", [(1, True), (0, False), (2, False)])
def test_a_node_is_unidirectional_only_when_the_attribute_is_1(value, causal):
    est = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4, "unidirectional": value}, SELF)
    assert est.ok and est.problem.is_unidirectional is causal


def test_a_node_needs_its_present_outputs_for_a_past():
    hints = [*SELF, MISSING, MISSING, MISSING, (2, 4, 5, 8), (2, 4, 5, 8)]
    assert estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, hints, has_present=True).ok
    refused = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, hints)
    assert not refused.ok and refused.error == "invalid_argument" and "present" in refused.message


@pytest.mark.parametrize("index, what", [(8, "past_sequence_length"), (9, "cache_indirection")])
def test_inputs_attnws_does_not_model_make_the_estimate_unavailable(index, what):
    hints = [*SELF, MISSING, MISSING, MISSING, (2, 4, 5, 8), (2, 4, 5, 8), MISSING, MISSING]
    hints[index] = (1,)
    est = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, hints, has_present=True)
    assert not est.ok and est.error == "unsupported" and what in est.message


def test_past_sequence_length_without_a_past_is_not_a_shared_buffer():
    # multihead_attention.cc: past_present_share_buffer = past_key != nullptr && past_sequence_length != nullptr.
    hints = [*SELF, *[MISSING] * 7]
    hints[8] = (1,)
    assert estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, hints).ok


def test_lean_attention_is_not_in_the_released_build_and_changes_nothing():
    # USE_LEAN_ATTENTION is off in ORT 1.31.1's wheels: the variable and bit 256 are never read.
    plain = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, SELF, RuntimeConfig.make())
    for config in (RuntimeConfig.make(env={"ORT_ENABLE_LEAN_ATTENTION": "not even a boolean"}),
                   RuntimeConfig.make(sdpa_kernel=1 | 2 | 4 | 16 | 32 | 64 | 256)):
        est = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, SELF, config)
        assert est.ok and est.total_workspace_bytes == plain.total_workspace_bytes
    target_from_dict({"op": "mha", "batch": 2, "seq": 8, "heads": "4..4", "head_size": "8..8",
                      "env": {"ORT_ENABLE_LEAN_ATTENTION": "1"}})


def test_errors_are_typed_workspace_errors():
    est = estimate_for_node("MultiHeadAttention", 10, {"num_heads": 4}, [(2, 8, 30), *SELF[1:]])
    assert not est.ok and est.error == "invalid_argument"
    assert issubclass(InvalidArgument, WorkspaceError)


def test_a_shapes_document_record_keeps_every_mha_field():
    from attnws.spec.hints import Geometry
    from attnws.spec.mha.problem import MaskType, MhaFormat
    from attnws.spec.problem import Op
    from attnws.spec.shapes_file import read_shape_record, shape_record
    from attnws.spec.documents import DocumentError

    g = Geometry(Op.MHA, 4, batch=2, seq=1, heads=4, head_size=8, v_head_size=16, kv_seq=1, past=37,
                 mha_format=MhaFormat.SEPARATE, mask=MaskType.KEY_PADDING, with_past=True, with_present=True,
                 unidirectional=True, qkv_bias=True)
    config = RuntimeConfig.make(sm=86)
    back, back_config, labels = read_shape_record(shape_record(g, config, role="smaller"))
    assert (back, back_config, labels) == (g, config, {"role": "smaller"})
    packed = shape_record(Geometry(Op.PMHA, 2, batch=1, seq=4, heads=1, head_size=8), config)
    with pytest.raises(DocumentError, match="past is MultiHeadAttention's"):
        read_shape_record({**packed, "past": 3})
