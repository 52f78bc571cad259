"""MultiHeadAttention validation, one row per check of `build_mha_problem`: the input shapes, the
typed error ORT's check raises, a fragment of the message naming the offending value, and the
upstream file the check restates. Then ORDER (where two checks fail, ORT's first one is
reported), shapes ORT accepts without a check (floor-divided head size, unchecked dims), and a
meta-test that every `raise` / `d.require` site of builder.py is hit by some row.

Upstream (microsoft/onnxruntime), read for these rows:
- HELPER: onnxruntime/contrib_ops/cpu/bert/multihead_attention_helper.h, CheckInputs and the
  Check_QKV / Check_Q_KV / Check_Q_K_V / CheckPast / GetMaskType / CheckAttentionBias helpers
  (index id 5853403545, the newest stored version; docs/research/multihead-attention.md, F).
- CC: onnxruntime/contrib_ops/cuda/bert/multihead_attention.cc, registration, constructor and the
  past/present arity and format checks after CheckInputs (index id 7446068643; research doc, A).
- ABI: attnws's own bounds (int32 CUDA ABI, fp16 / fp32 element types); no ORT check.
"""

from __future__ import annotations

import ast
import traceback
from pathlib import Path

import pytest

from attnws.spec import InvalidArgument, WorkspaceError
from attnws.spec.errors import Unsupported
from attnws.spec.mha import builder as builder_module
from attnws.spec.mha.builder import build_mha_problem
from attnws.spec.mha.problem import MaskType, MhaFormat

HELPER = "onnxruntime/contrib_ops/cpu/bert/multihead_attention_helper.h"
CC = "onnxruntime/contrib_ops/cuda/bert/multihead_attention.cc"
ABI = "attnws (int32 CUDA ABI / element types)"

I32 = 2**31 - 1

# B = 2, S = 3, L = 5, N = 2, H = Hv = 4 (D = Dv = 8): a valid separate-format node.
BASE = dict(query=[2, 3, 8], key=[2, 5, 8], value=[2, 5, 8], bias=None, key_padding_mask=None,
            attention_bias=None, past_key=None, past_value=None, past_sequence_length=None,
            cache_indirection=None, element_size=2, num_heads=2, has_present=False, unidirectional=False)
PAST = dict(past_key=[2, 2, 4, 4], past_value=[2, 2, 4, 4], has_present=True)  # P = 4, so T = 9
PACKED_KV = dict(key=[2, 5, 2, 2, 4], value=None)
CROSS = dict(key=[2, 2, 5, 4], value=[2, 2, 5, 4])
PACKED_QKV = dict(query=[2, 3, 2, 3, 4], key=None, value=None)


def build(**changes):
    args = {**BASE, **changes}
    return lambda: build_mha_problem(**args)


# (id, call, error, message fragment (regex), upstream file)
ROWS = [
    # Registration and constructor (CC), the num_heads bound of the CheckInputs wrapper (HELPER).
    ("element_size=3", build(element_size=3), InvalidArgument, "element_size = 3", CC),
    ("num_heads=0", build(num_heads=0), InvalidArgument, "num_heads = 0", CC),
    ("num_heads=1025 > maxThreadsPerBlock", build(num_heads=1025), InvalidArgument, "num_heads = 1025", HELPER),
    # CheckInputs: query rank.
    ("query rank 4", build(query=[2, 3, 2, 4]), InvalidArgument, r"\[2, 3, 2, 4\] \(rank 4\)", HELPER),
    ("query rank 2", build(query=[2, 3]), InvalidArgument, r"\[2, 3\] \(rank 2\)", HELPER),
    ("query absent", build(query=None), InvalidArgument, "got none", CC),
    ("query[0] = -1", build(query=[-1, 3, 8]), InvalidArgument, r"query.shape\[0\] = -1", ABI),
    ("query[1] > int32", build(query=[2, 2**31, 8]), InvalidArgument, r"query.shape\[1\] = 2147483648 exceeds", ABI),
    # Check_Q_KV (packed KV: key [B, L, N, 2, H], no value).
    ("packed kv, query rank 5", build(query=[2, 3, 2, 3, 4], **PACKED_KV), InvalidArgument,
     r"'query' must have 3 .*\[2, 3, 2, 3, 4\]", HELPER),
    ("packed kv, key rank 4", build(key=[2, 5, 2, 8], value=None), InvalidArgument, r"'key' .*\[2, 5, 2, 8\]", HELPER),
    ("packed kv, key dim 3 = 3", build(key=[2, 5, 2, 3, 4], value=None), InvalidArgument,
     r"packed key/value shape \[2, 5, 2, 3, 4\]", HELPER),
    ("packed kv, key dim 0 = 3", build(key=[3, 5, 2, 2, 4], value=None), InvalidArgument,
     r"shape \[3, 5, 2, 2, 4\] must be \[B = 2", HELPER),
    ("packed kv, key dim 2 = 3 != N", build(key=[2, 5, 3, 2, 4], value=None), InvalidArgument,
     r"shape \[2, 5, 3, 2, 4\] .*N = 2", HELPER),
    ("packed kv, key dim 4 = 8 != H", build(key=[2, 5, 2, 2, 8], value=None), InvalidArgument,
     r"shape \[2, 5, 2, 2, 8\] .*H = 4", HELPER),
    ("packed kv, key[1] > int32", build(key=[2, 2**31, 2, 2, 4], value=None), InvalidArgument,
     r"key.shape\[1\] = 2147483648", ABI),
    # Check_Q_K_V (separate: key/value rank 3 BSNH or rank 4 BNSH).
    ("separate, query rank 5", build(query=[2, 3, 2, 1, 4]), InvalidArgument,
     r"'query' must have 3 when key and value are separate.*\[2, 3, 2, 1, 4\]", HELPER),
    ("separate, key rank 3 / value rank 4", build(value=[2, 2, 5, 4]), InvalidArgument,
     r"key \[2, 5, 8\] and value \[2, 2, 5, 4\]", HELPER),
    ("separate, key and value rank 2", build(key=[2, 5], value=[2, 5]), InvalidArgument,
     r"key \[2, 5\] and value \[2, 5\]", HELPER),
    ("separate, key dim 0 = 3", build(key=[3, 5, 8], value=[3, 5, 8]), InvalidArgument, r"\(batch\): 2, 3, 3", HELPER),
    ("separate, value dim 0 = 1", build(value=[1, 5, 8]), InvalidArgument, r"\(batch\): 2, 2, 1", HELPER),
    ("separate, key dim 2 = 6", build(key=[2, 5, 6]), InvalidArgument, "key dim 2 = 6", HELPER),
    ("separate, value dim 1 = 4", build(value=[2, 4, 8]), InvalidArgument, "5 != 4", HELPER),
    ("cross, value dim 3 = 8", build(key=[2, 2, 5, 4], value=[2, 2, 5, 8]), InvalidArgument,
     r"key \[2, 2, 5, 4\] and value \[2, 2, 5, 8\]", HELPER),
    ("cross, key dim 1 = 3 != N", build(key=[2, 3, 5, 4], value=[2, 3, 5, 4]), InvalidArgument,
     r"key \[2, 3, 5, 4\] .*N = 2", HELPER),
    ("cross, key dim 3 = 8 != H", build(key=[2, 2, 5, 8], value=[2, 2, 5, 8]), InvalidArgument,
     r"key \[2, 2, 5, 8\] .*H = 4", HELPER),
    ("cross, value dim 2 = 6", build(key=[2, 2, 5, 4], value=[2, 2, 6, 4]), InvalidArgument,
     r"value \[2, 2, 6, 4\]", HELPER),
    # Check_QKV (packed QKV), and value without key.
    ("value without key", build(key=None), InvalidArgument, "'value' must be absent", HELPER),
    ("packed qkv, query dim 3 = 2", build(query=[2, 3, 2, 2, 4], key=None, value=None), InvalidArgument,
     "dim 3 = 2", HELPER),
    # Past: both or neither, then CheckPast in ORT's order.
    ("past_key only", build(past_key=[2, 2, 4, 4], has_present=True), InvalidArgument, "both present or both absent",
     HELPER),
    ("past_value only", build(past_value=[2, 2, 4, 4], has_present=True), InvalidArgument,
     "both present or both absent", HELPER),
    ("past_key rank 3", build(**{**PAST, "past_key": [2, 2, 4]}), InvalidArgument, r"'past_key' .*\[2, 2, 4\]", HELPER),
    ("past_value rank 5", build(**{**PAST, "past_value": [2, 2, 4, 4, 1]}), InvalidArgument,
     r"'past_value' .*\[2, 2, 4, 4, 1\]", HELPER),
    ("past_key dim 0 = 3", build(**{**PAST, "past_key": [3, 2, 4, 4]}), InvalidArgument, "past_key dim 0 = 3", HELPER),
    ("past_value dim 0 = 1", build(**{**PAST, "past_value": [1, 2, 4, 4]}), InvalidArgument,
     "past_value dim 0 = 1", HELPER),
    ("past_key dim 1 = 3", build(**{**PAST, "past_key": [2, 3, 4, 4]}), InvalidArgument, "past_key dim 1 = 3", HELPER),
    ("past_value dim 1 = 1", build(**{**PAST, "past_value": [2, 1, 4, 4]}), InvalidArgument,
     "past_value dim 1 = 1", HELPER),
    ("past dim 2 differs", build(**{**PAST, "past_value": [2, 2, 6, 4]}), InvalidArgument, "4 != 6", HELPER),
    ("past_key dim 3 = 8", build(**{**PAST, "past_key": [2, 2, 4, 8]}), InvalidArgument, "past_key dim 3 = 8", HELPER),
    # past_value's dim 3 is checked against H, not Hv: H = 4, Hv = 8 here, past_value [.., 8] fails.
    ("past_value dim 3 = Hv != H", build(value=[2, 5, 16], **{**PAST, "past_value": [2, 2, 4, 8]}),
     InvalidArgument, "past_value dim 3 = 8 must be the head size H = 4", HELPER),
    ("past_key[2] > int32", build(**{**PAST, "past_key": [2, 2, 2**31, 4], "past_value": [2, 2, 2**31, 4]}),
     InvalidArgument, r"past_key.shape\[2\] = 2147483648", ABI),
    # Inputs 8 and 9: ORT accepts them; attnws does not model them.
    ("past_sequence_length", build(**PAST, past_sequence_length=[1]), Unsupported, "past_sequence_length", CC),
    ("cache_indirection", build(cache_indirection=[2, 1, 8]), Unsupported, "cache_indirection", CC),
    # MultiHeadAttention-only format checks.
    ("packed qkv 3D [B, S, 3D]", build(query=[2, 3, 24], key=None, value=None), InvalidArgument,
     r"3D \[B, S, 3\*N\*H\] shape \[2, 3, 24\]", HELPER),
    ("packed kv with bias", build(**PACKED_KV, bias=[24]), InvalidArgument, "'bias' must be absent", HELPER),
    # bias: rank 1, length 2D + Dv.
    ("bias rank 2", build(bias=[24, 1]), InvalidArgument, r"'bias' .*\[24, 1\]", HELPER),
    ("bias length 23", build(bias=[23]), InvalidArgument, "bias length 23 must be 2 \\* hidden \\+ v_hidden = 24", HELPER),
    ("bias length, Dv != D", build(value=[2, 5, 16], bias=[24]), InvalidArgument, "bias length 24 .* = 32", HELPER),
    ("bias length, cross Dv = N * Hv", build(**CROSS, bias=[23]), InvalidArgument, "bias length 23 .* = 24", HELPER),
    ("bias[0] = -1", build(bias=[-1]), InvalidArgument, r"bias.shape\[0\] = -1", ABI),
    # key_padding_mask kinds (GetMaskType): [B], [3B + 2], [B, T], [B, S, T]; T = P + L.
    ("mask [3]", build(key_padding_mask=[3]), InvalidArgument, r"key_padding_mask shape \[3\]", HELPER),
    ("mask [B, L] with past (T = 9)", build(**PAST, key_padding_mask=[2, 5]), InvalidArgument,
     r"key_padding_mask shape \[2, 5\] .*T = 9", HELPER),
    ("mask [3, 5]", build(key_padding_mask=[3, 5]), InvalidArgument, r"key_padding_mask shape \[3, 5\]", HELPER),
    ("mask [2, 4, 5]", build(key_padding_mask=[2, 4, 5]), InvalidArgument, r"key_padding_mask shape \[2, 4, 5\]",
     HELPER),
    ("mask rank 4", build(key_padding_mask=[2, 1, 3, 5]), InvalidArgument, r"key_padding_mask shape \[2, 1, 3, 5\]",
     HELPER),
    ("mask rank 0", build(key_padding_mask=[]), InvalidArgument, r"key_padding_mask shape \[\]", HELPER),
    # attention_bias (CheckAttentionBias): rank 4, dim 0 in {B, 1}, dim 1 in {N, 1}, S, T.
    ("attention_bias rank 3", build(attention_bias=[2, 3, 5]), InvalidArgument,
     r"'attention_bias' .*\[2, 3, 5\]", HELPER),
    ("attention_bias dim 0 = 3", build(attention_bias=[3, 2, 3, 5]), InvalidArgument, "dim 0 = 3", HELPER),
    ("attention_bias dim 1 = 3", build(attention_bias=[2, 3, 3, 5]), InvalidArgument, "dim 1 = 3", HELPER),
    ("attention_bias dim 2 = 4", build(attention_bias=[2, 2, 4, 5]), InvalidArgument, "dim 2 = 4 must be S = 3", HELPER),
    ("attention_bias dim 3 = L with past", build(**PAST, attention_bias=[2, 2, 3, 5]), InvalidArgument,
     r"dim 3 = 5 must be T = P \+ L = 9", HELPER),
    # multihead_attention.cc after CheckInputs: past/present arity, then formats that take no cache.
    ("past without present", build(**{**PAST, "has_present": False}), InvalidArgument, "need the present", CC),
    ("present, packed kv", build(**PACKED_KV, has_present=True), InvalidArgument, "packed_kv", CC),
    ("present, cross", build(**CROSS, has_present=True), InvalidArgument, "cross", CC),
    ("present, packed qkv", build(**PACKED_QKV, has_present=True), InvalidArgument, "packed_qkv", CC),
    ("past and present, packed qkv", build(**PACKED_QKV, **PAST), InvalidArgument, "packed_qkv", CC),
    # CheckInputs floors H = D / N unchecked; ORT's CPU kernel then fails: a node attnws does not size.
    ("hidden not a multiple of num_heads", build(query=[2, 3, 10], key=[2, 5, 10], value=[2, 5, 6], num_heads=4,
                                                 bias=[26]), Unsupported, "hidden size D = 10 is not a multiple", CC),
]


@pytest.mark.parametrize("call,error,message,source", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_invalid_mha_input_raises_ort_error_naming_the_value(call, error, message, source):
    with pytest.raises(error, match=message) as raised:
        call()
    assert isinstance(raised.value, WorkspaceError)
    assert source in (HELPER, CC, ABI)


def test_ort_error_types():
    assert issubclass(Unsupported, WorkspaceError) and not issubclass(Unsupported, InvalidArgument)


# ORDER: each call fails two checks; the one ORT runs first is reported.
ORDER = [
    ("num_heads bound before query rank", build(num_heads=1025, query=[2, 3, 2, 4]), InvalidArgument, "num_heads = 1025"),
    ("query rank before value-without-key", build(query=[2, 3, 2, 4], key=None), InvalidArgument, r"\(rank 4\)"),
    ("packed kv: query rank before key rank", build(query=[2, 3, 2, 3, 4], key=[2, 5, 8], value=None),
     InvalidArgument, r"'query' must have 3"),
    ("separate: query rank before key/value ranks", build(query=[2, 3, 2, 1, 4], value=[2, 2, 5, 4]),
     InvalidArgument, "when key and value are separate"),
    ("separate: batch before hidden size", build(key=[3, 5, 6]), InvalidArgument, r"\(batch\)"),
    ("separate: hidden size before kv length", build(key=[2, 5, 6], value=[2, 4, 8]), InvalidArgument, "key dim 2 = 6"),
    ("key shape before past", build(key=[2, 5, 6], **{**PAST, "past_key": [3, 2, 4, 4]}), InvalidArgument,
     "key dim 2 = 6"),
    ("past_value rank before past_key dim 0", build(**{**PAST, "past_key": [3, 2, 4, 4], "past_value": [2, 2, 4]}),
     InvalidArgument, "'past_value'"),
    ("past_value dim 0 before past_key dim 1", build(**{**PAST, "past_key": [2, 3, 4, 4], "past_value": [1, 2, 4, 4]}),
     InvalidArgument, "past_value dim 0 = 1"),
    ("past_value dim 1 before past dim 2", build(**{**PAST, "past_value": [2, 1, 6, 4]}), InvalidArgument,
     "past_value dim 1 = 1"),
    ("past dim 2 before past_key dim 3", build(**{**PAST, "past_key": [2, 2, 4, 8], "past_value": [2, 2, 6, 4]}),
     InvalidArgument, "4 != 6"),
    ("past before 3D packed qkv", build(query=[2, 3, 24], key=None, value=None, **{**PAST, "past_key": [2, 3, 4, 4]}),
     InvalidArgument, "past_key dim 1 = 3"),
    ("3D packed qkv before bias rank", build(query=[2, 3, 24], key=None, value=None, bias=[24, 1]), InvalidArgument,
     "3D"),
    ("packed kv bias before bias length", build(**PACKED_KV, bias=[23]), InvalidArgument, "'bias' must be absent"),
    ("bias rank before mask", build(bias=[24, 1], key_padding_mask=[3]), InvalidArgument, r"'bias'"),
    ("bias length before mask", build(bias=[23], key_padding_mask=[3]), InvalidArgument, "bias length 23"),
    ("mask before attention_bias", build(key_padding_mask=[3], attention_bias=[3, 2, 3, 5]), InvalidArgument,
     "key_padding_mask"),
    ("attention_bias dim 0 before dim 3", build(attention_bias=[3, 2, 3, 4]), InvalidArgument, "dim 0 = 3"),
    ("CheckInputs before past/present arity", build(**{**PAST, "has_present": False}, attention_bias=[2, 2, 3, 5]),
     InvalidArgument, r"T = P \+ L = 9"),
    ("arity before format", build(**PACKED_KV, **{**PAST, "has_present": False}), InvalidArgument, "need the present"),
]


@pytest.mark.parametrize("call,error,message", [r[1:] for r in ORDER], ids=[r[0] for r in ORDER])
def test_first_failing_check_in_ort_order_is_reported(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_invalid_bias_is_reported_even_with_past_sequence_length():
    with pytest.raises(InvalidArgument, match="bias length 23"):
        build(bias=[23], past_sequence_length=[1], **PAST)()


# Shapes ORT accepts: no check to fire, and the parameters CheckInputs derives.
def test_a_value_hidden_size_not_divisible_is_not_sized_either():
    with pytest.raises(Unsupported, match="value hidden size Dv = 6 is not a multiple of num_heads = 4"):
        build(query=[2, 3, 8], key=[2, 5, 8], value=[2, 5, 6], num_heads=4)()


def test_packed_qkv_dim_2_is_not_checked_against_num_heads():
    p = build(query=[2, 3, 5, 3, 4], key=None, value=None)()
    assert (p.qkv_format, p.qk_head_size, p.kv_sequence_length) == (MhaFormat.PACKED_QKV, 4, 3)


def test_past_value_is_checked_against_h_not_hv():
    p = build(value=[2, 5, 16], **PAST)()
    assert (p.qk_head_size, p.v_head_size, p.past_sequence_length, p.total_sequence_length) == (4, 8, 4, 9)


@pytest.mark.parametrize("mask,past,expected", [
    ([2], {}, MaskType.KEY_SEQ_LEN), ([8], {}, MaskType.KEY_SEQ_LEN_START), ([2, 5], {}, MaskType.KEY_PADDING),
    ([2, 9], PAST, MaskType.KEY_PADDING), ([2, 3, 9], PAST, MaskType.ATTENTION),
])
def test_mask_kinds_by_shape(mask, past, expected):
    assert build(key_padding_mask=mask, **past)().mask_type is expected


def test_mask_of_b_equal_3b_plus_2_is_never_ambiguous_and_1d_start_needs_exactly_3b_plus_2():
    assert build(key_padding_mask=[2])().mask_type is MaskType.KEY_SEQ_LEN
    with pytest.raises(InvalidArgument):
        build(key_padding_mask=[7])()


def test_cross_and_packed_formats_and_their_lengths():
    cross = build(**CROSS, bias=[24])()
    assert (cross.qkv_format, cross.kv_sequence_length, cross.v_head_size) == (MhaFormat.CROSS, 5, 4)
    kv = build(**PACKED_KV)()
    assert (kv.qkv_format, kv.kv_sequence_length) == (MhaFormat.PACKED_KV, 5)


def test_broadcast_attention_bias_and_present_only():
    p = build(attention_bias=[1, 1, 3, 5], has_present=True)()
    assert (p.broadcast_attn_bias_dim_0, p.broadcast_attn_bias_dim_1, p.has_past, p.has_present) == (
        True, True, False, True)


def test_empty_past_is_accepted():
    p = build(**{**PAST, "past_key": [2, 2, 0, 4], "past_value": [2, 2, 0, 4]})()
    assert (p.past_sequence_length, p.total_sequence_length) == (0, 5)


# Meta-test: every raise / d.require site of builder.py is hit by some row.
BUILDER = Path(builder_module.__file__).resolve()


def _sites() -> list[tuple[int, int]]:
    tree = ast.parse(BUILDER.read_text())
    sites = []
    for node in ast.walk(tree):
        is_require = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr == "require")
        if isinstance(node, ast.Raise) or is_require:
            sites.append((node.lineno, node.end_lineno))
    return sorted(sites)


def _raising_line(call) -> int | None:
    try:
        call()
    except WorkspaceError as error:
        lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).resolve() == BUILDER]
        return lines[-1] if lines else None
    return None


def test_every_builder_check_is_hit_by_a_row():
    sites = _sites()
    assert len(sites) >= 30  # the count of checks read from ORT; a lower count means the parse went wrong
    hit = set()
    for _, call, *_ in ROWS:
        line = _raising_line(call)
        hit.update(site for site in sites if line is not None and site[0] <= line <= site[1])
    missing = [site for site in sites if site not in hit]
    assert not missing, f"builder.py checks without a row (line ranges): {missing}"
