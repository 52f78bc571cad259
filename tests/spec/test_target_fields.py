"""Target files read as the command line reads the same words (issue: fuzzing found a bare
"past": 5 read as 1..5 while --past 5 is 0..5, and a PackedAttention v_head_size range without
qkv_hidden_sizes reaching the solver, where it raised a Z3 error)."""

from __future__ import annotations

import re

import pytest

from attnws.spec.errors import InvalidArgument
from attnws.spec.target import DimRange, target_from_dict

MHA = {"op": "mha", "batch": 2, "seq": 4, "heads": "2..2", "head_size": "8..8"}


def test_a_bare_past_is_zero_to_n_as_on_the_command_line():
    assert target_from_dict({**MHA, "past": 5}).past == DimRange(0, 5)
    assert target_from_dict({**MHA, "past": "5"}).past == DimRange(0, 5)
    assert target_from_dict({**MHA, "seq": 5}).seq == DimRange(1, 5)


def test_a_past_range_implies_the_past_inputs_and_present_outputs():
    target = target_from_dict({**MHA, "past": "0..5"})
    assert target.with_past and target.with_present
    with pytest.raises(InvalidArgument, match="a past range needs with_past"):
        target_from_dict({**MHA, "past": "0..5", "with_past": False})


def test_packed_attention_head_sizes_differ_only_with_qkv_hidden_sizes():
    with pytest.raises(InvalidArgument, match="without qkv_hidden_sizes PackedAttention's head sizes are equal"):
        target_from_dict({"op": "pa", "batch": 2, "seq": 4, "heads": "2..2", "head_size": "8..8",
                          "v_head_size": "8..16"})


def test_a_target_without_kv_seq_or_past_holds_only_l_equal_s_and_no_past():
    from attnws.spec.hints import Geometry
    from attnws.spec.problem import Op

    target = target_from_dict(MHA)
    shape = dict(batch=2, seq=4, heads=2, head_size=8)
    assert target.contains(Geometry(Op.MHA, 2, **shape))
    assert not target.contains(Geometry(Op.MHA, 2, **shape, kv_seq=3))
    assert not target.contains(Geometry(Op.MHA, 2, **shape, past=1, with_past=True))


PMHA = {"op": "pmha", "batch": 2, "seq": 4, "heads": "2..2", "head_size": "8..8"}


@pytest.mark.parametrize("data, message", [
    ({**PMHA, "kv_seq": 3, "mask": "2d_key_padding"}, "kv_seq, mask: MultiHeadAttention (op mha) only"),
    ({**PMHA, "unidirectional": True}, "unidirectional: MultiHeadAttention (op mha) only"),
    ({**MHA, "tokens": 6}, "tokens: PackedAttention (op pa) and PackedMultiHeadAttention (op pmha) and PagedAttention (op paged) only"),
    ({**PMHA, "qkv_hidden_sizes": True}, "qkv_hidden_sizes: PackedAttention (op pa) only"),
], ids=["mha fields on pmha", "mha flag on pmha", "packed dimension on mha", "pa attribute on pmha"])
def test_a_field_only_other_operators_have_is_refused_naming_them(data, message):
    """Each family declares the target fields only its operators have (`OWN_FIELDS`); a target of
    another operator that sets one is refused, naming the field and the operators that have it."""
    with pytest.raises(InvalidArgument, match=f"^{re.escape(message)}$"):
        target_from_dict(data)


def test_a_shape_record_with_another_familys_field_is_refused():
    from attnws.spec.documents import DocumentError
    from attnws.spec.shapes_file import read_shape_record

    record = {"op": "pa", "batch": 2, "seq": 4, "heads": 2, "head_size": 8, "past": 3}
    with pytest.raises(DocumentError, match="field past is MultiHeadAttention's \\(op mha\\), not op pa's"):
        read_shape_record(record)
    mha = {"op": "mha", "batch": 2, "seq": 4, "heads": 2, "head_size": 8, "tokens": 6}
    with pytest.raises(DocumentError, match="field tokens is PackedAttention's \\(op pa\\), not op mha's"):
        read_shape_record(mha)
    geometry, _, _ = read_shape_record({**mha, "tokens": None, "past": 3, "with_past": True})
    assert geometry.past == 3 and geometry.with_past
