"""GroupQueryAttention's inputs (`attnws.spec.gqa.inputs`): the positional names against ORT 1.31.1's
own registered com.microsoft schema (the installed CPU wheel), and the node's problem as ORT's
adapter reads it, against the builder called by keyword with the shapes each case gives (a swapped
pair of names must change an outcome), then a geometry's positional shapes (`geometry_hints`).
"""

from __future__ import annotations

from dataclasses import replace
from itertools import zip_longest
from typing import Any

import pytest

from attnws.spec.errors import InternalError, InvalidArgument, Unavailable
from attnws.spec.gqa import inputs
from attnws.spec.gqa.builder import build_gqa_problem
from attnws.spec.gqa.estimate import node_at_maxima
from attnws.spec.gqa.inputs import GQA_INPUTS, geometry_hints, input_names, node_hints, node_problem, runtime_problem
from attnws.spec.gqa.problem import GqaFormat
from attnws.spec.hints import MISSING, NO_SHAPE, Geometry
from attnws.spec.ort_version import ORT_VERSION
from attnws.spec.problem import Op

B, S, N, NK, H, P = 2, 8, 4, 2, 64, 32
QUERY, KV, CACHE = [B, S, N * H], [B, S, NK * H], [B, NK, P, H]
HEADS = {"num_heads": N, "kv_num_heads": NK}
DECODER = node_hints(query=QUERY, key=KV, value=KV, past_key=CACHE, past_value=CACHE, seqlens_k=[B],
                     total_sequence_length=())
# B = 1 (a prompt with past context needs it) and attention_bias [B, N, S, T]: T = 24 from its dimension 3.
BIASED = node_hints(query=[1, S, N * H], key=[1, S, NK * H], value=[1, S, NK * H], past_key=[1, NK, P, H],
                    past_value=[1, NK, P, H], seqlens_k=[1], total_sequence_length=(), attention_bias=[1, N, S, 24])
QUANTIZED = node_hints(query=QUERY, key=KV, value=KV, past_key=CACHE, past_value=CACHE, seqlens_k=[B],
                       total_sequence_length=(), k_scale=[1], v_scale=[1])
PACKED = node_hints(query=[B, S, (N + 2 * NK) * H], past_key=CACHE, past_value=CACHE, seqlens_k=[B],
                    total_sequence_length=[1])
INT8 = {**HEADS, "kv_cache_bit_width": 8, "k_quant_type": b"PER_TENSOR", "v_quant_type": b"per_tensor"}


def schema_differences(names: tuple[str, ...], schema: tuple[str, ...]) -> list[str]:
    """Return each position where `names` and the schema's input names differ, in words."""
    pairs = enumerate(zip_longest(names, schema, fillvalue="<none>"))
    return [f"input {i}: {a} != {b}" for i, (a, b) in pairs if a != b]


def ort_schema_inputs() -> tuple[str, ...]:
    """Return the input names of com.microsoft GroupQueryAttention as the installed ORT registers them."""
    import onnxruntime
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    assert onnxruntime.__version__ == ORT_VERSION
    (schema,) = [s for s in get_all_operator_schema()
                 if s.name == "GroupQueryAttention" and s.domain == "com.microsoft"]
    return tuple(i.name for i in schema.inputs)


def test_the_input_names_are_ort_s_registered_schema_in_order():
    schema = ort_schema_inputs()
    assert schema_differences(GQA_INPUTS, schema) == [] and input_names(Op.GQA) == GQA_INPUTS
    swapped = GQA_INPUTS[:10] + (GQA_INPUTS[11], GQA_INPUTS[10]) + GQA_INPUTS[12:]
    assert schema_differences(swapped, schema) == ["input 10: head_sink != attention_bias",
                                                   "input 11: attention_bias != head_sink"]
    assert schema_differences(GQA_INPUTS[:-1], schema) == ["input 15: <none> != k_norm_weight"]


def test_the_index_constants_name_their_inputs():
    named = {"QUERY": "query", "KEY": "key", "VALUE": "value", "PAST_KEY": "past_key", "PAST_VALUE": "past_value",
             "SEQLENS_K": "seqlens_k", "TOTAL_SEQUENCE_LENGTH": "total_sequence_length",
             "POSITION_IDS": "position_ids", "ATTENTION_BIAS": "attention_bias", "HEAD_SINK": "head_sink",
             "K_SCALE": "k_scale", "V_SCALE": "v_scale"}
    assert {constant: GQA_INPUTS[getattr(inputs, constant)] for constant in named} == named


def test_node_hints_lays_named_shapes_out_by_position():
    hints = node_hints(query=[1, 2, 3], head_sink=[4])
    assert len(hints) == 16 and hints[0] == [1, 2, 3] and hints[11] == [4]
    assert all(h is MISSING for i, h in enumerate(hints) if i not in (0, 11))
    with pytest.raises(InternalError, match=r"no input \['keys'\]"):
        node_hints(query=[1, 2, 3], keys=[1])


# -- the adapter's reading: problems ------------------------------------------------------------------

def built(*, has_present: bool = True, **given: Any) -> Any:
    """The builder called by keyword, as the adapter reads the node: past and present share a buffer."""
    return build_gqa_problem(**{**HEADS, **given}, has_present=has_present, kv_share_buffer=True)


PLAIN = dict(query=QUERY, key=KV, value=KV, past_key=CACHE, past_value=CACHE, seqlens_k=[B])
# (hints, attributes, query type, cache type, has_present, the builder's keywords)
PROBLEMS = {
    "fp16 decoder at T = S": (DECODER, HEADS, "float16", "float16", True, dict(**PLAIN, total_sequence_length=S)),
    "bf16 with attention_bias, T its dimension 3": (
        BIASED, HEADS, "bfloat16", "bfloat16", True,
        dict(query=[1, S, N * H], key=[1, S, NK * H], value=[1, S, NK * H], past_key=[1, NK, P, H],
             past_value=[1, NK, P, H], seqlens_k=[1], total_sequence_length=24, attention_bias=[1, N, S, 24],
             is_bf16=True)),
    "int8 cache, quant types as bytes": (
        QUANTIZED, INT8, "float16", "int8", True,
        dict(**PLAIN, total_sequence_length=S, k_scale=[1], v_scale=[1], kv_cache_bit_width=8,
             k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", cache_dtype="int8")),
    "fp8 cache": (
        QUANTIZED, INT8, "float16", "float8e4m3fn", True,
        dict(**PLAIN, total_sequence_length=S, k_scale=[1], v_scale=[1], kv_cache_bit_width=8,
             k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", cache_dtype="fp8")),
    "packed qkv, total as [1]": (
        PACKED, HEADS, "float16", "float16", True,
        dict(query=[B, S, (N + 2 * NK) * H], past_key=CACHE, past_value=CACHE, seqlens_k=[B],
             total_sequence_length=S, total_sequence_length_shape=[1])),
    "no present outputs: a borrowed cache": (
        DECODER, HEADS, "float16", "float16", False, dict(**PLAIN, total_sequence_length=S, has_present=False)),
    "window and an attribute the builder does not take": (
        DECODER, {**HEADS, "local_window_size": 16, "scale": 0.125}, "float16", "float16", True,
        dict(**PLAIN, total_sequence_length=S, local_window_size=16)),
}


@pytest.mark.parametrize("hints, attributes, element_type, cache_type, has_present, expected",
                         PROBLEMS.values(), ids=PROBLEMS)
def test_problem_from_hints_is_the_builder_s_problem(hints, attributes, element_type, cache_type, has_present,
                                                     expected):
    assert node_problem(hints, attributes, element_type, cache_type, has_present) == built(**expected)


# -- the adapter's reading: errors --------------------------------------------------------------------

QUERY_TYPES = (": ORT's GroupQueryAttention estimator sizes float16 and bfloat16 queries only (its CUDA kernel runs "
               "no other)")
NO_PAST = ("past_key (input 3) is absent: ORT's estimator reads the cache's capacity from its dimension 2 and "
           "declares nothing without it")
NO_KERNEL = "no CUDA GroupQueryAttention kernel is registered for T_CACHE = {!r} (registered: same, int8, uint8, fp8)"
ERRORS = {
    "float32 query": (DECODER, HEADS, "float", "float", Unavailable, "query is float" + QUERY_TYPES),
    "query of unknown type": (DECODER, HEADS, None, None, Unavailable, "query is of unknown type" + QUERY_TYPES),
    "past_key missing": (node_hints(query=QUERY, key=KV, value=KV, seqlens_k=[B], total_sequence_length=()), HEADS,
                         "float16", None, Unavailable, NO_PAST),
    "past_key of unknown shape": (
        node_hints(query=QUERY, key=KV, value=KV, past_key=NO_SHAPE, past_value=NO_SHAPE, seqlens_k=[B],
                   total_sequence_length=()), HEADS, "float16", "float16", Unavailable, NO_PAST),
    "float cache": (DECODER, HEADS, "float16", "float", InvalidArgument, NO_KERNEL.format("float")),
    "cache of unknown type": (DECODER, HEADS, "float16", None, InvalidArgument, NO_KERNEL.format("unknown")),
    "total of shape [1, 1]": (
        node_hints(query=QUERY, key=KV, value=KV, past_key=CACHE, past_value=CACHE, seqlens_k=[B],
                   total_sequence_length=[1, 1]), HEADS, "float16", "float16", InvalidArgument,
        "total_sequence_length tensor must be of one element."),
    "batch 2 prompt after a past": (
        node_hints(**PLAIN, total_sequence_length=(), attention_bias=[B, N, S, 24]), HEADS, "float16", "float16",
        InvalidArgument, "batch_size must be 1 when sequence_length > 1 and past context is given."),
    "unknown quant type": (DECODER, {**HEADS, "k_quant_type": b"BLOCK"}, "float16", "float16", InvalidArgument,
                           "GroupQueryAttention constructor: StringToKVQuantizationType was false. Invalid KV "
                           "quantization type: 'BLOCK'. Valid values are: NONE, PER_TENSOR, PER_CHANNEL."),
}


@pytest.mark.parametrize("hints, attributes, element_type, cache_type, error, message", ERRORS.values(), ids=ERRORS)
def test_problem_from_hints_refuses_as_before(hints, attributes, element_type, cache_type, error, message):
    with pytest.raises(error) as raised:
        node_problem(hints, attributes, element_type, cache_type, True)
    assert str(raised.value) == message


def outcome(hints: list[Any], attributes: dict[str, Any], element_type: str, cache_type: str,
            has_present: bool) -> Any:
    """The problem, or the error's type and text."""
    try:
        return node_problem(hints, attributes, element_type, cache_type, has_present)
    except (InvalidArgument, Unavailable) as error:
        return type(error).__name__, str(error)


@pytest.mark.parametrize("first, second", [("attention_bias", "head_sink"), ("past_key", "seqlens_k"),
                                           ("query", "key"), ("k_scale", "q_norm_weight")])
def test_a_swapped_pair_of_names_changes_a_problem(monkeypatch, first, second):
    """Planted: two input names swapped moves their shapes to each other's builder argument."""
    cases = [case[:5] for case in PROBLEMS.values()]
    before = [outcome(*case) for case in cases]
    names = list(GQA_INPUTS)
    i, j = names.index(first), names.index(second)
    names[i], names[j] = names[j], names[i]
    monkeypatch.setattr(inputs, "GQA_INPUTS", tuple(names))
    assert [outcome(*case) for case in cases] != before


# -- a geometry's positional shapes -------------------------------------------------------------------

def geometry(batch: int = B, seq: int = S, total: int = P, **fields: Any) -> Geometry:
    return Geometry(Op.GQA, 2, batch=batch, seq=seq, heads=N, head_size=H, kv_heads=NK, total_seq=total, past=P,
                    **fields)


def test_a_geometry_lays_its_shapes_out_by_position():
    assert geometry_hints(geometry()) == DECODER
    assert geometry_hints(geometry(gqa_format=GqaFormat.PACKED_QKV, kv_quant="int4")) == node_hints(
        query=[B, S, (N + 2 * NK) * H], past_key=[B, NK, P, H // 2], past_value=[B, NK, P, H // 2], seqlens_k=[B],
        total_sequence_length=(), k_scale=[1], v_scale=[1])
    assert geometry_hints(geometry(1, 1, rotary=True, head_sink=True)) == node_hints(
        query=[1, 1, N * H], key=[1, 1, NK * H], value=[1, 1, NK * H], past_key=[1, NK, P, H],
        past_value=[1, NK, P, H], seqlens_k=[1], total_sequence_length=(), cos_cache=[P, H // 2],
        sin_cache=[P, H // 2], head_sink=[N])


def test_a_target_at_its_maxima_is_what_the_adapter_reads_of_its_shapes():
    """The shared description and the model reader take the same node: the adapter's T = S, then T's maximum."""
    g = geometry(bf16=True, window=16)
    read = node_problem(geometry_hints(g), {**HEADS, "local_window_size": 16}, "bfloat16", "bfloat16", True)
    assert read == runtime_problem(replace(g, total_seq=S))
    assert node_at_maxima(g).total_sequence_length == P and read.total_sequence_length == S
