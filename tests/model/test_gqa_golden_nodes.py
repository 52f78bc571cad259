"""ORT 1.31.1's own node-level GroupQueryAttention estimate tests, replayed through `attnws model`
on one-node models: every case of `group_query_attention_workspace_estimate_test.cc` whose
function is `EstimateGroupQueryAttentionWorkspace` (the graph adapter; `tests/data/ort-gqa-golden.json`
holds them, with file and commit) gives what ORT's test asserts: a value (with the bytes it
pins, or the relation it states), or none (nullopt: attnws reports the node unavailable).

The fixture of the adapter tests is a windowed fp16 node (B 2, S 4, N 8, Nk 2, H 64, window 128,
sliding_window_cache = 1, a cache of 128 rows); each case changes what its name says.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from onnx import TensorProto, helper, numpy_helper
import numpy as np

from attnws.model import ShapeBounds, analyze_model
from attnws.spec.options import SDPA_MATH, RuntimeConfig

from .builders import FP16, OPSETS

GOLDEN = json.loads((Path(__file__).parents[1] / "data" / "ort-gqa-golden.json").read_text())
ESTIMATE_CASES = [c for c in GOLDEN if c["function"].startswith("EstimateGroupQueryAttentionWorkspace")]
B, S, N, NK, H, WINDOW = 2, 4, 8, 2, 64, 128
INT64_MAX = 2**63 - 1
INPUTS = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length", "cos_cache",
          "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale")


def gqa_model(shapes: dict[str, Any] | None = None, initializers: dict[str, np.ndarray] | None = None,
              cache_type: int = FP16, **attrs: Any) -> Any:
    """A one-node GroupQueryAttention model: the fixture's inputs, with `shapes` overriding
    (None: the input is absent; "unshaped": present without a shape) and the attributes given."""
    fixture = {"query": [B, S, N * H], "key": [B, S, NK * H], "value": [B, S, NK * H],
               "past_key": [B, NK, WINDOW, H], "past_value": [B, NK, WINDOW, H], "seqlens_k": [B],
               "total_sequence_length": []}
    fixture.update(shapes or {})
    initializers = initializers or {}
    types = {"seqlens_k": TensorProto.INT32, "total_sequence_length": TensorProto.INT32,
             "position_ids": TensorProto.INT64, "k_scale": TensorProto.FLOAT, "v_scale": TensorProto.FLOAT,
             "past_key": cache_type, "past_value": cache_type}
    names, graph_inputs = [], []
    for name in INPUTS:
        dims = fixture.get(name)
        if dims is None and name not in initializers:
            names.append("")
            continue
        names.append(name)
        if name not in initializers:
            graph_inputs.append(helper.make_tensor_value_info(name, types.get(name, FP16),
                                                              None if dims == "unshaped" else dims))
    while names and not names[-1]:
        names.pop()
    node_attrs = {"num_heads": N, "kv_num_heads": NK, "local_window_size": WINDOW, "sliding_window_cache": 1}
    node_attrs.update(attrs)
    node_attrs = {k: v for k, v in node_attrs.items() if v is not None}
    node = helper.make_node("GroupQueryAttention", names, ["out", "present_key", "present_value"], name="gqa",
                            domain="com.microsoft", **node_attrs)
    outputs = [helper.make_tensor_value_info(o, FP16, None) for o in ("out", "present_key", "present_value")]
    weights = [numpy_helper.from_array(v, k) for k, v in initializers.items()]
    return helper.make_model(helper.make_graph([node], "g", graph_inputs, outputs, weights), opset_imports=OPSETS)


def estimate(model: Any, config: RuntimeConfig = RuntimeConfig(), max_total: int = 0) -> Any:
    """The one node's estimate, as `attnws model` reads the node."""
    (node,) = analyze_model(model, ShapeBounds({}), config, max_total_sequence_length=max_total).nodes
    return node.estimate


NONWINDOWED = {"local_window_size": None, "sliding_window_cache": None}
NO_XQA = RuntimeConfig.make(env={"ORT_ENABLE_XQA": "0"})
HALF = H // 2
# Each adapter case by its text in the golden data: (the model, whether ORT's adapter gives a value).
ADAPTER_CASES = {
    "RejectsCacheCapacityDifferentFromWindow: window 128, capacity 256":
        (gqa_model({"past_key": [B, NK, 256, H], "past_value": [B, NK, 256, H]}), False),
    "RejectsCacheCapacityDifferentFromWindow: window 128, capacity 128": (gqa_model(), True),
    "window 128, past_key cap 128 / past_value cap 256": (gqa_model({"past_value": [B, NK, 256, H]}), False),
    "RejectsOptionalHolesAndMalformedGeometry: value missing": (gqa_model({"value": None}), False),
    "past_key rank 3": (gqa_model({"past_key": [B, NK, WINDOW * H]}), False),
    "query PresentWithoutShape": (gqa_model({"query": "unshaped"}), False),
    "RejectsBiasWithoutHeadSink: bias rank 3": (gqa_model({"attention_bias": [B, S, WINDOW]}), False),
    "bias [2,8,4,256] (windowed)": (gqa_model({"attention_bias": [B, N, S, 256]}), False),
    "RejectsUndersizedPositionIds [1,1]": (gqa_model({"position_ids": [1, 1]}), False),
    "position_ids [2,4]": (gqa_model({"position_ids": [B, S]}), True),
    "ValidatesPartialRotaryCaches: cos/sin [INT64_MAX,8]":
        (gqa_model({"cos_cache": [INT64_MAX, 8], "sin_cache": [INT64_MAX, 8]}, do_rotary=1), True),
    "cos [..,8] sin [..,16]": (gqa_model({"cos_cache": [INT64_MAX, 8], "sin_cache": [INT64_MAX, 16]}, do_rotary=1),
                               False),
    "cos/sin [..,40] (>H/2=32)":
        (gqa_model({"cos_cache": [INT64_MAX, HALF + 8], "sin_cache": [INT64_MAX, HALF + 8]}, do_rotary=1), False),
    "RejectsNoncausalLocalWindow causal=0": (gqa_model(causal=0), False),
}


def test_every_adapter_case_of_the_data_is_replayed_or_named():
    texts = {c["inputs"].get("case") for c in ESTIMATE_CASES if "case" in c["inputs"]}
    named_elsewhere = {t for t in texts if "Quantized" in t or "v_scale missing" in t}
    assert texts - named_elsewhere == set(ADAPTER_CASES)


@pytest.mark.parametrize("case", sorted(ADAPTER_CASES))
def test_the_adapter_gives_a_value_exactly_where_ort_s_test_does(case):
    (expected,) = [c["expected"]["result"] for c in ESTIMATE_CASES if c["inputs"].get("case") == case]
    model, has_value = ADAPTER_CASES[case]
    assert has_value == (expected == "has value")
    node = estimate(model)
    assert node.ok == has_value, node.message
    assert (node.total_workspace_bytes > 0) == has_value


@pytest.mark.parametrize("v_scale, has_value", [([1, NK, 1, 128], True), (None, False)],
                         ids=["ValidatesQuantizedCacheMetadata", "PerTensor both but v_scale missing"])
def test_quantized_cache_metadata(v_scale, has_value):
    """k per-tensor and v per-channel (bit 8 and bit 4, H 128): scales [1] and [1, Nk, 1, 128]
    give a value; per-tensor both with v_scale missing gives none."""
    for bits in (8, 4):
        cache = [B, NK, WINDOW, 128 * bits // 8]  # int4 packs two elements a byte: ORT doubles the dim
        shapes = {"query": [B, S, N * 128], "key": [B, S, NK * 128], "value": [B, S, NK * 128], "past_key": cache,
                  "past_value": cache, "k_scale": [1], "v_scale": v_scale}
        quant = {"k_quant_type": "PER_TENSOR", "v_quant_type": "PER_CHANNEL" if v_scale else "PER_TENSOR"}
        node = estimate(gqa_model(shapes, cache_type=TensorProto.INT8 if bits == 8 else TensorProto.UINT8,
                                  kv_cache_bit_width=bits, **quant))
        assert node.ok == has_value, (bits, node.message)


def test_a_non_windowed_cache_needs_the_session_option_and_is_bounded_by_the_larger():
    """NonWindowedRequiresExplicitTotalKvBound: capacity 128, XQA off; unset: none; 64 and 128 the
    same bytes (max(option, capacity)); 256 more."""
    model = gqa_model({"past_key": [B, NK, 128, H], "past_value": [B, NK, 128, H]}, **NONWINDOWED)
    sizes = {m: estimate(model, NO_XQA, m) for m in (0, 64, 128, 256)}
    assert not sizes[0].ok and "ep.cuda.gqa_workspace_max_total_sequence_length" in sizes[0].message
    assert sizes[64].total_workspace_bytes == sizes[128].total_workspace_bytes < sizes[256].total_workspace_bytes


def test_get_capability_s_budget_case():
    """GetCapabilityBudgetUsesLevel1Estimate: window 256 over a 256-row windowed cache, a head sink
    initializer [8], XQA on, sdpa_kernel MATH: the prepacked sink's 32 persistent and 16
    initialization bytes, and a workspace above the 270,344 B fallback ORT compares it with."""
    (case,) = [c for c in ESTIMATE_CASES if c["test"].endswith("GetCapabilityBudgetUsesLevel1Estimate")]
    sink = {"head_sink": np.zeros(N, np.float16)}
    model = gqa_model({"past_key": [B, NK, 256, H], "past_value": [B, NK, 256, H]}, sink, local_window_size=256)
    node = estimate(model, RuntimeConfig.make(sdpa_kernel=SDPA_MATH, env={"ORT_ENABLE_XQA": "1"}))
    assert node.ok and node.persistent_prepack_bytes, node.message  # the constant head sink is prepacked
    assert node.persistent_prepack_bytes == case["expected"]["persistent_prepack_bytes"] == 32
    assert node.initialization_scratch_bytes == case["expected"]["initialization_scratch_bytes"] == 16
    assert node.total_workspace_bytes > case["expected"]["fallback_workspace_bytes"]
