"""GroupQueryAttention validation, one row per check of `build_gqa_problem`: a valid node mutated
to fail exactly that check, the error ORT's CUDA kernel reports and its exact text (values
appended as ORT appends them); then valid nodes and the `GqaProblem` each must build, with its
fields worked out by hand from `docs/research/gqa-inputs-dispatch.md` §1.4; then ORT's order where
two checks fail, and a meta-test that every `raise` / `d.require` site of builder.py is hit by a row.

Check ids are the research note's (§2.1 K, §2.2 C, §2.3 H and X, §2.4 D); ABI rows are attnws's
own rules (int32 dimensions, inputs ORT reads without a check, the caller's buffer description).
"""

from __future__ import annotations

import ast
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument, Unsupported, WorkspaceError
from attnws.spec.gqa import builder as builder_module
from attnws.spec.gqa.builder import build_gqa_problem
from attnws.spec.gqa.problem import GqaProblem, KvQuantization

DROP = object()  # a change that removes the input

# B = 2, S = L = 1, N = 4, Nk = 2, H = 16, P = 8, T = 5: a decode step on a static cache that past
# and present share (C = max(T, P) = 8).
DECODE: dict[str, Any] = dict(query=[2, 1, 64], key=[2, 1, 32], value=[2, 1, 32], past_key=[2, 2, 8, 16],
                              past_value=[2, 2, 8, 16], seqlens_k=[2], total_sequence_length=5, num_heads=4,
                              kv_num_heads=2)
# B = 2, S = L = T = 4, no past: a first prompt.
PROMPT: dict[str, Any] = dict(query=[2, 4, 64], key=[2, 4, 32], value=[2, 4, 32], seqlens_k=[2],
                              total_sequence_length=4, num_heads=4, kv_num_heads=2)
# Packed QKV: (N + 2 Nk) * H = (4 + 4) * 16 = 128.
PACKED: dict[str, Any] = dict(query=[2, 1, 128], past_key=[2, 2, 8, 16], past_value=[2, 2, 8, 16], seqlens_k=[2],
                              total_sequence_length=5, num_heads=4, kv_num_heads=2)
# A windowed cache of capacity C = W = 4, at absolute length T = 20.
WINDOWED: dict[str, Any] = dict(query=[1, 1, 64], key=[1, 1, 32], value=[1, 1, 32], past_key=[1, 2, 4, 16],
                                past_value=[1, 2, 4, 16], seqlens_k=[1], total_sequence_length=20, num_heads=4,
                                kv_num_heads=2, sliding_window_cache=1, local_window_size=4)
INT8 = dict(DECODE, cache_dtype="int8", kv_cache_bit_width=8, k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR",
            k_scale=[1], v_scale=[1])
INT4 = dict(INT8, cache_dtype="uint8", kv_cache_bit_width=4, past_key=[2, 2, 8, 8], past_value=[2, 2, 8, 8])
ROTARY = dict(DECODE, cos_cache=[8, 8], sin_cache=[8, 8], do_rotary=1)

I32 = 2**31 - 1
ENFORCE = "GroupQueryAttention constructor: "
NI = " (ORT: NOT_IMPLEMENTED)"
K2 = ('info.GetAttr("kv_num_heads", &kv_num_heads).IsOK() && kv_num_heads > 0 && num_heads % kv_num_heads == 0 '
      "was false.")
HEAD_8 = "head_size must be a multiple of 8. Got head_size % 8 == 4"
KV_BOTH = "Input 'key' and 'value' shall be both present, or both absent in the case of packed qkv."


def node(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The base node with the changes applied (DROP removes an input)."""
    merged = {**base, **changes}
    return {name: value for name, value in merged.items() if value is not DROP}


def row(check: str, base: dict[str, Any], message: str, kind: type = InvalidArgument, **changes: Any) -> Any:
    return pytest.param(node(base, **changes), kind, message, id=check)


ROWS = [
    # -- constructor (CUDA, ORT_ENFORCE at session creation)
    row("K1", DECODE, ENFORCE + 'info.GetAttr("num_heads", &num_heads).IsOK() && num_heads > 0 was false.',
        num_heads=0),
    # an absent attribute never reaches the constructor: the schema check refuses the model at load
    # (the 1.31.1 CPU wheel: "Required attribute 'kv_num_heads' is missing", tests/model/test_schema_types.py)
    row("K1-absent", DECODE, "Required attribute 'num_heads' is missing.", num_heads=None),
    row("K2-absent", DECODE, "Required attribute 'kv_num_heads' is missing.", kv_num_heads=None),
    row("K2-zero", DECODE, ENFORCE + K2, kv_num_heads=0),
    row("K2-multiple", DECODE, ENFORCE + K2, num_heads=5),
    row("K3", DECODE, ENFORCE + "causal == 0 || causal == 1 was false. causal must be 0 or 1.", causal=2),
    row("K4-zero", DECODE, ENFORCE + "local_window_size_attr == -1 || (local_window_size_attr > 0 && "
        "local_window_size_attr <= std::numeric_limits<int>::max()) was false. local_window_size must be -1 or greater "
        "than 0 (and not exceed INT_MAX).", local_window_size=0),
    row("K4-minus-2", DECODE, ENFORCE + "local_window_size_attr == -1 || (local_window_size_attr > 0 && "
        "local_window_size_attr <= std::numeric_limits<int>::max()) was false. local_window_size must be -1 or greater "
        "than 0 (and not exceed INT_MAX).", local_window_size=-2),
    row("K5", DECODE, ENFORCE + "is_unidirectional_ || local_window_size_ == -1 was false. GroupQueryAttention (CUDA): "
        "local_window_size must be -1 when causal is 0.", causal=0, local_window_size=4),
    row("K6", WINDOWED, ENFORCE + "!sliding_window_cache_ || local_window_size_ > 0 was false. GroupQueryAttention "
        "(CUDA): sliding_window_cache=1 requires local_window_size > 0.", local_window_size=-1),
    row("K7-zero", DECODE, ENFORCE + "std::isfinite(qk_norm_epsilon_) && qk_norm_epsilon_ > 0.0f was false. "
        "GroupQueryAttention (CUDA): qk_norm_epsilon must be finite and positive.", qk_norm_epsilon=0.0),
    row("K7-inf", DECODE, ENFORCE + "std::isfinite(qk_norm_epsilon_) && qk_norm_epsilon_ > 0.0f was false. "
        "GroupQueryAttention (CUDA): qk_norm_epsilon must be finite and positive.", qk_norm_epsilon=float("inf")),
    row("K8", DECODE, ENFORCE + "StringToKVQuantizationType was false. Invalid KV quantization type: 'BOGUS'. Valid "
        "values are: NONE, PER_TENSOR, PER_CHANNEL.", v_quant_type="BOGUS"),
    # -- ComputeInternal before CheckInputs (CUDA)
    row("C1", DECODE, "GroupQueryAttention (CUDA): q_norm_weight and k_norm_weight must be provided together.",
        k_norm_weight=[16]),
    row("C2", INT8, "k_scale must be provided when k_quant_type is not NONE", k_scale=DROP),
    row("C3", INT8, "v_scale must be provided when v_quant_type is not NONE", v_scale=DROP),
    row("C5", INT8, "attention_bias with quantized KV cache is not implemented in GroupQueryAttention cuda kernel." + NI,
        attention_bias=[2, 4, 1, 5]),
    row("C6-smooth", DECODE, "attention_bias with smooth softmax or head_sink is not implemented in GroupQueryAttention "
        "cuda kernel." + NI, attention_bias=[2, 4, 1, 5], smooth_softmax=1),
    row("C6-sink", DECODE, "attention_bias with smooth softmax or head_sink is not implemented in GroupQueryAttention "
        "cuda kernel." + NI, attention_bias=[2, 4, 1, 5], head_sink=[4]),
    # -- CheckInputs (shared; H0 with CUDA's max threads per block)
    row("H0", DECODE, "num_heads should be no larger than 1024", num_heads=1032, kv_num_heads=8),
    row("H2", DECODE, "kv_cache_bit_width must be 0, 4 or 8. Got kv_cache_bit_width == 3", kv_cache_bit_width=3),
    row("H3", DECODE, "Input 'query' is expected to have 3 dimensions, got 2", query=[2, 64]),
    row("H4", DECODE, HEAD_8, query=[2, 1, 48]),
    row("H5", DECODE, KV_BOTH, value=DROP),
    row("H6", DECODE, "Input 'key' is expected to have 3 dimensions, got 4", key=[2, 1, 2, 16]),
    row("H7", DECODE, "Input 'query' and 'key' shall have same dim 0 (batch size)", key=[3, 1, 32]),
    row("H8", DECODE, "kv_hidden_size must be a multiple of kv_num_heads. Got kv_hidden_size % kv_num_heads == 1",
        key=[2, 1, 33]),
    row("H9", DECODE, "kv_hidden_size / kv_num_heads must be equal to head_size. Got kv_hidden_size / kv_num_heads == "
        "32", key=[2, 1, 64], value=[2, 1, 64]),
    row("H10", DECODE, "Input 'value' is expected to have 3 dimensions, got 2", value=[2, 32]),
    row("H11", DECODE, "Input 'query' and 'value' shall have same dim 0 (batch size)", value=[3, 1, 32]),
    row("H12", DECODE, "Input 'key' and 'value' shall have same dim 1 (sequence length)", value=[2, 2, 32]),
    row("H13", DECODE, "Input 'value' is expected to have same hidden size as key.", value=[2, 1, 40]),
    row("H14", PACKED, "Input 'query' is expected to have 3 dimensions, got 4", query=[2, 1, 8, 16]),
    row("H15", PACKED, HEAD_8, query=[2, 1, 96]),
    row("H16", PACKED, KV_BOTH, value=[2, 1, 32]),
    row("H17-key", DECODE, "Input 'past_key' is expected to have 4 dimensions, got 3", past_key=[2, 2, 8]),
    row("H17-value", DECODE, "Input 'past_value' is expected to have 4 dimensions, got 5", past_value=[2, 2, 8, 16, 1]),
    row("H18-key", DECODE, "Input 'past_key' dimension 0 should be batch_size, got 3", past_key=[3, 2, 8, 16]),
    row("H18-value", DECODE, "Input 'past_value' dimension 0 should be batch_size, got 1", past_value=[1, 2, 8, 16]),
    # ORT prints past_key's dim 1 (Nk = 2), not a length
    row("H19", DECODE, "BNSH Input 'past_key' and 'past_value' should have same dimension 2 (max sequencelength or "
        "past sequence length), got 2", past_value=[2, 2, 9, 16]),
    row("H20-key", DECODE, "Input 'past_key' shall have kv_num_heads", past_key=[2, 3, 8, 16]),
    row("H20-value", DECODE, "Input 'past_value' shall have kv_num_heads", past_value=[2, 1, 8, 16]),
    row("H21-key", DECODE, "Input 'past_key' dimension 3 should match the packed KV head dimension, got 8 expected 16",
        past_key=[2, 2, 8, 8]),
    row("H21-value", DECODE, "Input 'past_value' dimension 3 should match the packed KV head dimension, got 32 "
        "expected 16", past_value=[2, 2, 8, 32]),
    row("H21-int4", INT4, "Input 'past_key' dimension 3 should match the packed KV head dimension, got 16 expected 8",
        past_key=[2, 2, 8, 16], past_value=[2, 2, 8, 16]),
    # a two-byte cache at 8 bits packs two values per element (CPU wheel: "got 16 expected 8")
    row("H21-fp16-8bit", INT8, "Input 'past_key' dimension 3 should match the packed KV head dimension, got 16 "
        "expected 8", cache_dtype="same"),
    row("H22", DECODE, "query and key must have the same sequence length when past_key is provided, or key sequence "
        "length must be 0 for shared KV (no new KV to append). Got sequence_length=1, kv_sequence_length=2",
        key=[2, 2, 32], value=[2, 2, 32]),
    row("H23", DECODE, "Input 'past_key' and 'past_value' shall be both present or both absent.", past_value=DROP),
    row("H24", PROMPT, "query and key must have the same sequence length when past_key is not provided. Got "
        "sequence_length=4, kv_sequence_length=3", key=[2, 3, 32], value=[2, 3, 32]),
    row("H25", DECODE, "seqlens_k must be at least 1D, got scalar.", seqlens_k=[]),
    row("H26", DECODE, "seqlens_k must have batch_size (2) elements, got 3.", seqlens_k=[3]),
    row("H27", node(DECODE, query=[4, 1, 64], key=[4, 1, 32], value=[4, 1, 32], past_key=[4, 2, 8, 16],
                    past_value=[4, 2, 8, 16]),
        "seqlens_k has unexpected shape. Each dimension must be 1 or batch_size (4), got dim[0] = 2.", seqlens_k=[2, 2]),
    row("H28-two", DECODE, "total_sequence_length tensor must be of one element.", total_sequence_length_shape=[2]),
    row("H28-rank-2", DECODE, "total_sequence_length tensor must be of one element.",
        total_sequence_length_shape=[1, 1]),
    row("H29", DECODE, "total_sequence_length must be positive, got 0.", total_sequence_length=0),
    row("H30", PROMPT, "total_sequence_length must be at least kv_sequence_length for a non-sliding cache. Got 3 and 4.",
        total_sequence_length=3),
    row("H31", DECODE, "total_sequence_length must equal past_sequence_length + kv_sequence_length for a dynamic "
        "cache, or be no greater than past_sequence_length for a static cache. Got total_sequence_length=10, "
        "past_sequence_length=8, kv_sequence_length=1.", total_sequence_length=10, kv_share_buffer=False),
    row("H33", WINDOWED, "sliding_window_cache=1 requires past_key and past_value to be present.", past_key=DROP,
        past_value=DROP),
    row("H34", WINDOWED, "sliding_window_cache=1 is not supported when kv_sequence_length == 0 (shared KV).",
        key=[1, 0, 32], value=[1, 0, 32]),
    row("H35", node(WINDOWED, query=[1, 1, 32], key=[1, 1, 16], value=[1, 1, 16], past_key=[1, 2, 4, 8],
                    past_value=[1, 2, 4, 8], cache_dtype="int8", kv_cache_bit_width=8, k_quant_type="PER_TENSOR",
                    v_quant_type="PER_TENSOR", k_scale=[1], v_scale=[1]),
        "sliding_window_cache: head_size (8) must be a multiple of 16 for an 8-bit KV cache."),
    row("H36", node(WINDOWED, past_key=[1, 2, 4, 8], past_value=[1, 2, 4, 8], cache_dtype="uint8", kv_cache_bit_width=4,
                    k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", k_scale=[1], v_scale=[1]),
        "sliding_window_cache: head_size (16) must be a multiple of 32 for a 4-bit KV cache."),
    row("H37", WINDOWED, "sliding_window_cache: KV cache capacity (2) must be at least local_window_size (4).",
        past_key=[1, 2, 2, 16], past_value=[1, 2, 2, 16]),
    row("H38", ROTARY, "cos_cache and sin_cache must have the same shape. Got cos_cache shape {8,8} and sin_cache shape "
        "{9,8}.", sin_cache=[9, 8]),
    row("H38-rank", ROTARY, "cos_cache and sin_cache must have the same shape. Got cos_cache shape {8,8} and sin_cache "
        "shape {8,8,1}.", sin_cache=[8, 8, 1]),
    row("H39", node(ROTARY, query=[2, 1, 32], key=[2, 1, 16], value=[2, 1, 16], past_key=[2, 2, 8, 8],
                    past_value=[2, 2, 8, 8]), "head_size shall be a multiple of 16. Got head_size % 16 == 8"),
    row("H40", ROTARY, "cos_cache dimension 0 shall not be less than total_sequence_length.", cos_cache=[4, 8],
        sin_cache=[4, 8]),
    row("H41-size", ROTARY, "cos_cache dimension 1 must be <= head_size / 2 and a multiple of 8.", cos_cache=[8, 16],
        sin_cache=[8, 16]),
    row("H41-multiple", ROTARY, "cos_cache dimension 1 must be <= head_size / 2 and a multiple of 8.",
        cos_cache=[8, 4], sin_cache=[8, 4]),
    row("H43", ROTARY, "Input 'cos_cache' and 'sin_cache' shall be both present or both absent.", sin_cache=DROP),
    row("H44", node(DECODE, query=[2, 2, 64], key=[2, 2, 32], value=[2, 2, 32]),
        "batch_size must be 1 when sequence_length > 1 and past context is given."),
    row("H45", node(DECODE, query=[2, 0, 64], key=[2, 0, 32], value=[2, 0, 32]),
        "sequence_length shall be 1 when it is not prompt."),
    # -- CheckCustomAttentionInputs (shared; X3 CUDA only)
    row("X1", DECODE, "position_ids dimension 0 must be equal to the batch size, got 3", position_ids=[3, 1]),
    row("X2", DECODE, "position_ids dimension 1 must be at least sequence length, got 0", position_ids=[2, 0]),
    row("X3", WINDOWED, "attention_bias with sliding_window_cache is not implemented in GroupQueryAttention." + NI,
        attention_bias=[1, 4, 1, 20]),
    row("X4", DECODE, "attention_bias must be a 4D tensor, got 3 dimensions", attention_bias=[4, 1, 5]),
    row("X5", DECODE, "attention_bias dimension 0 must be equal to the batch size or 1, got 3", attention_bias=[3, 4, 1, 5]),
    row("X6", DECODE, "attention_bias dimension 1 must be equal to the num heads or 1, got 2", attention_bias=[2, 2, 1, 5]),
    row("X7", DECODE, "attention_bias dimension 2 must be equal to the sequence length, got 2",
        attention_bias=[1, 1, 2, 5]),
    row("X8", DECODE, "attention_bias dimension 3 must be equal to total_sequence_length, got 8",
        attention_bias=[2, 4, 1, 8]),
    row("X9", DECODE, "head_sink must be a 1D tensor", head_sink=[1, 4]),
    row("X10", DECODE, "head_sink dimension 0 must be equal to the num heads, got 2", head_sink=[2]),
    # -- ComputeInternal after CheckInputs (CUDA)
    row("D1", WINDOWED, "GroupQueryAttention (CUDA): sliding_window_cache=1 requires the KV cache capacity (6) to "
        "equal local_window_size (4).", past_key=[1, 2, 6, 16], past_value=[1, 2, 6, 16]),
    row("D2", DECODE, "q_norm_weight must be a 1D tensor of shape (head_size=16)", q_norm_weight=[8], k_norm_weight=[16]),
    row("D2-rank", DECODE, "q_norm_weight must be a 1D tensor of shape (head_size=16)", q_norm_weight=[1, 16],
        k_norm_weight=[16]),
    row("D3", DECODE, "k_norm_weight must be a 1D tensor of shape (head_size=16)", q_norm_weight=[16], k_norm_weight=[32]),
    row("D5", DECODE, "cos_cache and sin_cache must be passed to GroupQueryAttention when do_rotary = 1", do_rotary=1),
    row("D6-no-past", PROMPT, "present_key and present_value are required unless borrowing a non-quantized KV cache",
        has_present=False),
    row("D6-quantized", INT8, "present_key and present_value are required unless borrowing a non-quantized KV cache",
        has_present=False),
    row("D7", WINDOWED, "sliding_window_cache=1 requires past_key/present_key and past_value/present_value to share "
        "the same buffer.", kv_share_buffer=False),
    row("D8", DECODE, "total_sequence_length exceeds the borrowed KV cache capacity", has_present=False,
        total_sequence_length=9),
    # -- attnws's own rules
    row("ABI-shared-buffer", DECODE, "present_key / present_value of shape (B, Nk, max(T, P) = 9, H) cannot share the "
        "past buffer of length P = 8: a shared past/present buffer needs total_sequence_length <= P (attnws: ORT's "
        "output allocation fails on the bound buffer; a separate present, --cache-layout separate, takes T = P + S)",
        total_sequence_length=9),
    row("ABI-int32-dim", PROMPT, f"query.shape[1] = {I32 + 1} exceeds the int32 CUDA ABI ({I32})",
        query=[2, I32 + 1, 64]),
    row("ABI-negative-dim", DECODE, "past_key.shape[2] = -1 must be non-negative", past_key=[2, 2, -1, 16]),
    row("ABI-int32-heads", DECODE, f"num_heads = {I32 + 1} exceeds the int32 CUDA ABI ({I32})", num_heads=I32 + 1,
        kv_num_heads=1),
    row("ABI-int32-total", DECODE, f"total_sequence_length = {I32 + 1} does not fit its int32 tensor",
        total_sequence_length=I32 + 1),
    row("ABI-negative-cos-rows", ROTARY, "cos_cache.shape[0] = -1 must be non-negative", cos_cache=[-1, 8],
        sin_cache=[-1, 8]),
    row("ABI-cos-rank", ROTARY, "cos_cache must have dims 0 and 1 (max_sequence_length, rotary_dim / 2), got shape [8] "
        "(attnws: ORT reads them unchecked)", cos_cache=[8], sin_cache=[8]),
    row("ABI-position-ids-rank", DECODE, "position_ids must have dims 0 and 1 (batch_size, sequence_length), got shape "
        "[2] (attnws: ORT reads them unchecked)", position_ids=[2]),
    row("ABI-cache-dtype", DECODE, "no CUDA GroupQueryAttention kernel is registered for T_CACHE = 'int4' (registered: "
        "same, int8, uint8, fp8)", cache_dtype="int4"),
    row("ABI-query", DECODE, "GroupQueryAttention input 'query' is required", query=None),
    row("ABI-seqlens", DECODE, "GroupQueryAttention input 'seqlens_k' is required (ONNX schema: input 5)",
        seqlens_k=DROP),
    row("ABI-total", DECODE, "GroupQueryAttention input 'total_sequence_length' is required (ONNX schema: input 6)",
        total_sequence_length=DROP),
    row("UNSUPPORTED-floored-head", DECODE, "query hidden size 66 is not a multiple of num_heads = 4: ORT floors the "
        "head size to 16 and its kernels then read only part of each row", Unsupported, query=[2, 1, 66]),
    row("UNSUPPORTED-floored-packed", PACKED, "query hidden size 130 is not a multiple of num_heads + 2 * kv_num_heads "
        "= 8: ORT floors the head size to 16 and its kernels then read only part of each row", Unsupported,
        query=[2, 1, 130]),
]


@pytest.mark.parametrize("kwargs, kind, message", ROWS)
def test_each_check_fails_with_ort_s_text(kwargs: dict[str, Any], kind: type, message: str) -> None:
    with pytest.raises(WorkspaceError) as caught:
        build_gqa_problem(**kwargs)
    assert type(caught.value) is kind
    assert str(caught.value) == message


def test_every_base_node_is_valid() -> None:
    for base in (DECODE, PROMPT, PACKED, WINDOWED, INT8, INT4, ROTARY):
        build_gqa_problem(**base)


# -- valid nodes and their problems (fields by hand) -----------------------------------------
def _expected(**fields: Any) -> GqaProblem:
    return GqaProblem(**fields)


def test_decode_on_a_shared_static_cache() -> None:
    # B 2, S = L = 1, P 8, T 5 <= P: past and present share the 8-row buffer (C = max(5, 8) = 8).
    problem = build_gqa_problem(**DECODE, kv_share_buffer=True)
    assert problem == _expected(batch_size=2, sequence_length=1, kv_sequence_length=1, past_sequence_length=8,
                                total_sequence_length=5, num_heads=4, kv_num_heads=2, head_size=16, has_past=True,
                                kv_share_buffer=True)
    assert problem.present_capacity(CONCRETE) == 8 and not problem.is_first_prompt(CONCRETE)


def test_decode_on_a_dynamic_cache() -> None:
    # T = P + L = 9 > P: the present is a new 9-row buffer, not shared.
    problem = build_gqa_problem(**node(DECODE, total_sequence_length=9), kv_share_buffer=False)
    assert problem == _expected(batch_size=2, sequence_length=1, kv_sequence_length=1, past_sequence_length=8,
                                total_sequence_length=9, num_heads=4, kv_num_heads=2, head_size=16, has_past=True,
                                kv_share_buffer=False)
    assert problem.present_capacity(CONCRETE) == 9


def test_prompt_without_past() -> None:
    # No past: P = 0, nothing to share (kv_share_buffer is ignored); S = T = 4 is the first prompt.
    problem = build_gqa_problem(**PROMPT)
    assert problem == _expected(batch_size=2, sequence_length=4, kv_sequence_length=4, past_sequence_length=0,
                                total_sequence_length=4, num_heads=4, kv_num_heads=2, head_size=16, has_past=False,
                                kv_share_buffer=False)
    assert problem.is_first_prompt(CONCRETE) and problem.present_capacity(CONCRETE) == 4


def test_packed_qkv() -> None:
    # query (B, S, (N + 2 Nk) H) = (1, 3, (8 + 2 * 2) * 32): H = 384 / 12 = 32, L = S = 3.
    problem = build_gqa_problem([1, 3, 384], seqlens_k=[1], total_sequence_length=3, num_heads=8, kv_num_heads=2,
                                is_bf16=True, do_rotary=1, cos_cache=[3, 16], sin_cache=[3, 16],
                                position_ids=[1, 3])
    assert problem == _expected(batch_size=1, sequence_length=3, kv_sequence_length=3, past_sequence_length=0,
                                total_sequence_length=3, num_heads=8, kv_num_heads=2, head_size=32, is_bf16=True,
                                has_past=False, kv_share_buffer=False, is_packed_qkv=True, do_rotary=True)


def test_windowed_cache() -> None:
    # C = W = 4 rows at absolute T = 20; past and present alias; bias-free; softcap and a head sink.
    problem = build_gqa_problem(**WINDOWED, softcap=30.0, head_sink=[4])
    assert problem == _expected(batch_size=1, sequence_length=1, kv_sequence_length=1, past_sequence_length=4,
                                total_sequence_length=20, num_heads=4, kv_num_heads=2, head_size=16, has_past=True,
                                kv_share_buffer=True, local_window_size=4, sliding_window_cache=True, softcap=30.0,
                                has_head_sink=True)
    assert problem.use_smooth_softmax


def test_windowed_staging_step() -> None:
    # S = 3 > 1 at T = 3: the first prompt into a 4-row window, B = 1.
    problem = build_gqa_problem(**node(WINDOWED, query=[1, 3, 64], key=[1, 3, 32], value=[1, 3, 32],
                                       total_sequence_length=3))
    assert (problem.sequence_length, problem.kv_sequence_length, problem.past_sequence_length) == (3, 3, 4)
    assert problem.sliding_window_cache and problem.kv_share_buffer


def test_int8_per_tensor_cache() -> None:
    # int8 storage (1 byte), 8 bits: past dim 3 is H = 16 * 8 / 8.
    problem = build_gqa_problem(**INT8)
    assert problem == _expected(batch_size=2, sequence_length=1, kv_sequence_length=1, past_sequence_length=8,
                                total_sequence_length=5, num_heads=4, kv_num_heads=2, head_size=16, has_past=True,
                                kv_share_buffer=True, cache_element_size=1, kv_cache_bit_width=8,
                                k_quantization=KvQuantization.PER_TENSOR, v_quantization=KvQuantization.PER_TENSOR)
    assert problem.quantized


def test_int4_cache() -> None:
    # uint8 storage, 4 bits: two values per byte, past dim 3 is H / 2 = 8.
    problem = build_gqa_problem(**INT4)
    assert problem == _expected(batch_size=2, sequence_length=1, kv_sequence_length=1, past_sequence_length=8,
                                total_sequence_length=5, num_heads=4, kv_num_heads=2, head_size=16, has_past=True,
                                kv_share_buffer=True, cache_element_size=1, kv_cache_bit_width=4,
                                k_quantization=KvQuantization.PER_TENSOR, v_quantization=KvQuantization.PER_TENSOR)


def test_fp8_per_channel_cache_with_lowercase_types() -> None:
    # StringToKVQuantizationType is case-insensitive; CUDA does not check the scales' shapes.
    problem = build_gqa_problem(**node(INT8, cache_dtype="fp8", k_quant_type="per_channel", v_quant_type="Per_Channel",
                                       k_scale=[1, 2, 1, 16], v_scale=[1, 2, 1, 16]))
    assert problem.cache_is_fp8 and problem.cache_element_size == 1
    assert problem.k_quantization is problem.v_quantization is KvQuantization.PER_CHANNEL


def test_borrowed_past_without_present_outputs() -> None:
    # No present outputs: a non-quantized node borrows its past (T = 5 <= P = 8), a shared buffer.
    problem = build_gqa_problem(**DECODE, has_present=False, kv_share_buffer=False)
    assert problem.kv_share_buffer and problem.has_past


def test_shared_kv_step_and_subsequent_prompt() -> None:
    shared = build_gqa_problem(**node(DECODE, key=[2, 0, 32], value=[2, 0, 32]))  # L = 0 with T <= P
    assert (shared.sequence_length, shared.kv_sequence_length) == (1, 0)
    chunk = build_gqa_problem(**node(DECODE, query=[1, 3, 64], key=[1, 3, 32], value=[1, 3, 32], past_key=[1, 2, 8, 16],
                                     past_value=[1, 2, 8, 16], seqlens_k=[1, 1], total_sequence_length=7))
    assert (chunk.batch_size, chunk.sequence_length, chunk.total_sequence_length) == (1, 3, 7)
    assert not chunk.is_first_prompt(CONCRETE)


def test_attributes_the_kernels_test_for_one() -> None:
    # smooth_softmax, do_rotary and sliding_window_cache count only at 1 (CPU wheel: 2 is "off").
    problem = build_gqa_problem(**DECODE, smooth_softmax=2, do_rotary=2, sliding_window_cache=2, causal=0)
    assert not (problem.smooth_softmax or problem.do_rotary or problem.sliding_window_cache or problem.causal)
    assert problem.local_window_size == -1


def test_options_are_carried() -> None:
    problem = build_gqa_problem(**node(ROTARY, position_ids=[2, 4], attention_bias=[1, 1, 1, 5],
                                       q_norm_weight=[16], k_norm_weight=[16], local_window_size=3, softcap=5.0))
    assert problem.do_rotary and problem.has_attention_bias and problem.use_qk_norm
    assert (problem.local_window_size, problem.softcap, problem.causal) == (3, 5.0, True)
    assert problem == replace(problem, is_bf16=False, has_head_sink=False)


# -- order: where two checks fail, ORT's first one is reported --------------------------------
ORDER = [
    pytest.param(node(DECODE, num_heads=5, query=[2, 64]), "num_heads % kv_num_heads", id="K2-before-shapes"),
    # H1 (the helper's own N % Nk check) is unreachable on CUDA: the constructor refuses first.
    pytest.param(node(DECODE, causal=2, local_window_size=0), "causal must be 0 or 1.", id="K3-before-K4"),
    pytest.param(node(INT8, k_scale=DROP, attention_bias=[2, 4, 1, 5]), "k_scale must be provided", id="C2-before-C5"),
    pytest.param(node(DECODE, num_heads=1032, kv_num_heads=8, kv_cache_bit_width=3), "no larger than 1024",
                 id="H0-before-H2"),
    pytest.param(node(DECODE, query=[2, 1, 48], key=[2, 1, 2, 2]), HEAD_8, id="H4-before-H6"),
    pytest.param(node(DECODE, past_key=[3, 2, 8, 16], key=[2, 2, 32], value=[2, 2, 32]), "dimension 0 should be",
                 id="H18-before-H22"),
    pytest.param(node(DECODE, past_value=[2, 1, 9, 16]), "should have same dimension 2", id="H19-before-H20"),
    pytest.param(node(DECODE, seqlens_k=[], total_sequence_length=0), "seqlens_k must be at least 1D",
                 id="H25-before-H29"),
    pytest.param(node(WINDOWED, total_sequence_length=0, past_key=DROP, past_value=DROP), "must be positive",
                 id="H29-before-H33"),
    pytest.param(node(ROTARY, total_sequence_length=0), "must be positive", id="H29-before-H40"),
    pytest.param(node(ROTARY, total_sequence_length=10, cos_cache=[4, 8], sin_cache=[4, 8]), "for a dynamic cache",
                 id="H31-before-H40"),
    pytest.param(node(WINDOWED, past_key=DROP, past_value=DROP, cos_cache=[1, 8]), "requires past_key and past_value",
                 id="H33-before-H43"),
    pytest.param(node(DECODE, query=[2, 2, 64], key=[2, 2, 32], value=[2, 2, 32], position_ids=[3, 2]),
                 "batch_size must be 1", id="H44-before-X1"),
    pytest.param(node(DECODE, position_ids=[3, 1], attention_bias=[3, 4, 1, 5]), "position_ids dimension 0",
                 id="X1-before-X5"),
    pytest.param(node(WINDOWED, attention_bias=[1, 4, 1], past_key=[1, 2, 6, 16], past_value=[1, 2, 6, 16]),
                 "with sliding_window_cache", id="X3-before-X4-and-D1"),
    pytest.param(node(DECODE, head_sink=[2], q_norm_weight=[8], k_norm_weight=[16]), "head_sink dimension 0",
                 id="X10-before-D2"),
    pytest.param(node(DECODE, do_rotary=1, has_present=False, total_sequence_length=9), "do_rotary = 1",
                 id="D5-before-D8"),
]


@pytest.mark.parametrize("kwargs, fragment", ORDER)
def test_ort_s_first_failing_check_is_reported(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidArgument, match=None) as caught:
        build_gqa_problem(**kwargs)
    assert fragment in str(caught.value)


# -- every check site is hit by a row ----------------------------------------------------------
BUILDER = Path(builder_module.__file__).resolve()


def _sites() -> list[tuple[int, int]]:
    tree = ast.parse(BUILDER.read_text())
    sites = []
    for item in ast.walk(tree):
        is_require = isinstance(item, ast.Call) and isinstance(item.func, ast.Attribute) and item.func.attr == "require"
        if isinstance(item, ast.Raise) or is_require:
            sites.append((item.lineno, item.end_lineno))
    return sorted(sites)


def _raising_line(kwargs: dict[str, Any]) -> int | None:
    try:
        build_gqa_problem(**kwargs)
    except WorkspaceError as error:
        lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).resolve() == BUILDER]
        return lines[-1] if lines else None
    return None


# Sites no concrete node reaches, kept because ORT has them: H1 (after K2) and H32 (after K6).
UNREACHABLE = ('f"num_heads must be a multiple of kv_num_heads',
               'InvalidArgument("sliding_window_cache=1 requires local')


def test_every_builder_check_is_hit_by_a_row() -> None:
    sites = _sites()
    assert len(sites) >= 70  # the checks read from ORT; a lower count means the parse went wrong
    hit = set()
    for param in ROWS:
        line = _raising_line(param.values[0])
        hit.update(site for site in sites if line is not None and site[0] <= line <= site[1])
    lines = BUILDER.read_text().splitlines()
    missing = [site for site in sites if site not in hit
               and not any(text in "\n".join(lines[site[0] - 1:site[1] + 1]) for text in UNREACHABLE)]
    assert not missing, f"builder.py checks without a row (line ranges): {missing}"
