"""`attnws model` on PagedAttention nodes: the family's reader (`attnws.model.readers.paged`) through
the shared pipeline, like every other operator's.

The decoder below is laid out as a paged-cache engine would export one: one PagedAttention per
layer, query / key / value from MatMuls of the packed hidden states [num_tokens, hidden], the
paged caches key_cache.N / value_cache.N [blocks, block_size, kv_heads, head_size] as graph inputs,
cumulative_sequence_length [batch_size+1], past_seqlens [batch_size] and block_table [batch_size,
M] as int32 graph inputs shared by every layer. The expected numbers come from the spec's own
entry point for a geometry (`estimate_geometry`, the family's `OWN_ESTIMATE`), with S and L
computed here from the rule the reader states (S = min(T, M * block_size), L = M * block_size),
not from the reader's own reading of the node.

ONNX Runtime's CPU engine has no PagedAttention kernel: on it only the load-time checks apply (the
schema, and ORT's shape inference for the operator), so where this file holds attnws's verdict to
ORT's, a model ORT's CPU engine takes up to its kernel lookup ("Could not find an implementation")
passes every load-time check, and the CUDA kernel's own checks (the spec's builder) are attnws's
alone. The models ORT is asked about are bfloat16: a float16 one is refused on CPU by a float Cast
the CPU engine puts before each input (`test_schema_types._valid`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import attnws.model.readers.paged as paged_reader
from attnws.model import ShapeBounds, analyze_model
from attnws.model.reader import NodeInputs, NodeReader, Session
from attnws.model.registry import reader_of
from attnws.model.report import node_target, with_exact_dims
from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from attnws.spec.commands import estimate_json
from attnws.spec.errors import InvalidArgument
from attnws.spec.estimate import estimate_geometry
from attnws.spec.families import family_of
from attnws.spec.hints import MISSING, Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.paged.problem import KvQuantization
from attnws.spec.problem import Op
from attnws.spec.target import DimRange, Target
from attnws.spec.units import format_bytes

from tests.cli.helpers import REPR_MARKS, attnws

from .builders import FP16, MS, OPSETS, ort_error, run, save

PAGED = "PagedAttention"
INT32, BF16, FP32 = TensorProto.INT32, TensorProto.BFLOAT16, TensorProto.FLOAT
N, NK, H, BS, M, BLOCKS = 4, 2, 64, 16, 4, 32  # the small decoder: L <= M * BS = 64
HIDDEN = 8  # the hidden state q/k/v project from (small weights, a small file)
BOUNDS = {"num_tokens": 8, "batch_size": 2}
T, B = BOUNDS["num_tokens"], BOUNDS["batch_size"]
NODE_NAMES = [f"/model/layers.{i}/attn/PagedAttention" for i in range(2)]
PATHS = [f"main{name}" for name in NODE_NAMES]
# The README-style example: a Llama-3-8B-shaped decode layer (32 query heads, 8 KV heads, head size
# 128, fp16, 16-token blocks, 512 blocks per sequence: 8,192 keys), attention_metadata absent.
LLAMA = {"n": 32, "nk": 8, "h": 128, "bs": 16, "m": 512, "blocks": 4096}
LLAMA_BOUNDS = {"num_tokens": 8, "batch_size": 8}


def decoder(layers: int = 2, n: int = N, nk: int = NK, h: int = H, bs: int = BS, m: int | str = M,
            blocks: int | str = BLOCKS, metadata: bool = False, **attrs: Any) -> onnx.ModelProto:
    """A decoder of `layers` layers, each MatMul q/k/v -> PagedAttention -> o_proj -> residual over
    the packed hidden states; `m` a symbol makes the block table's width dynamic."""
    inputs = [helper.make_tensor_value_info("hidden_states", FP16, ["num_tokens", HIDDEN]),
              helper.make_tensor_value_info("cumulative_sequence_length", INT32, ["batch_size+1"]),
              helper.make_tensor_value_info("past_seqlens", INT32, ["batch_size"]),
              helper.make_tensor_value_info("block_table", INT32, ["batch_size", m])]
    if metadata:
        inputs.append(helper.make_tensor_value_info("attention_metadata", INT32, [3]))
    nodes, weights, x = [], [], "hidden_states"
    for i in range(layers):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"{kv}_cache.{i}", FP16, [blocks, bs, nk, h]))
        for w, shape in (("q", (HIDDEN, n * h)), ("k", (HIDDEN, nk * h)), ("v", (HIDDEN, nk * h)),
                         ("o", (n * h, HIDDEN))):
            weights.append(numpy_helper.from_array(np.zeros(shape, np.float16), f"layers.{i}.{w}_proj.weight"))
        for w in "qkv":
            nodes.append(helper.make_node("MatMul", [x, f"layers.{i}.{w}_proj.weight"], [f"/layers.{i}/{w}"]))
        names = [f"/layers.{i}/{w}" for w in "qkv"] + [f"key_cache.{i}", f"value_cache.{i}",
                                                        "cumulative_sequence_length", "past_seqlens", "block_table"]
        if metadata:
            names += [""] * 8 + ["attention_metadata"]
        nodes.append(helper.make_node(PAGED, names, [f"/layers.{i}/attn"], name=NODE_NAMES[i], domain=MS,
                                      num_heads=n, kv_num_heads=nk, **attrs))
        nodes.append(helper.make_node("MatMul", [f"/layers.{i}/attn", f"layers.{i}.o_proj.weight"], [f"/layers.{i}/o"]))
        nodes.append(helper.make_node("Add", [x, f"/layers.{i}/o"], [f"/layers.{i}/residual"]))
        x = f"/layers.{i}/residual"
    nodes.append(helper.make_node("Identity", [x], ["logits"]))
    outputs = [helper.make_tensor_value_info("logits", FP16, ["num_tokens", HIDDEN])]
    return helper.make_model(helper.make_graph(nodes, "decoder", inputs, outputs, weights), opset_imports=OPSETS)


def llama_decoder(layers: int = 2) -> onnx.ModelProto:
    """The README-style example: `decoder` with Llama-3-8B's attention shapes."""
    return decoder(layers, **LLAMA)


def dims(bounds: dict[str, int] = BOUNDS) -> list[str]:
    return [arg for name, value in bounds.items() for arg in ("--dim", f"{name}={value}")]


def geometry(t: int = T, b: int = B, n: int = N, nk: int = NK, h: int = H, bs: int = BS, m: int = M,
             **flags: Any) -> Geometry:
    """The node's largest step as a geometry, S and L by the reader's stated rule."""
    return Geometry(op=Op.PAGED, element_size=2, batch=b, seq=min(t, m * bs), heads=n, head_size=h, tokens=t,
                    kv_heads=nk, kv_len=m * bs, block_size=bs, max_blocks=m, **flags)


def expected_bytes(config: RuntimeConfig = RuntimeConfig(), **shape: Any) -> int:
    """attnws's bound for the geometry, through the spec's shared entry point (`OWN_ESTIMATE`)."""
    est = estimate_geometry(geometry(**shape), config)
    assert est.ok, est.message
    return est.total_workspace_bytes


def check_report(report: Any, t: int = T, b: int = B, **shape: Any) -> None:
    """Every layer's node found, read by position at the bounds, with attnws's bound for its shapes."""
    n, nk, h, bs, m = (shape.get(k, v) for k, v in (("n", N), ("nk", NK), ("h", H), ("bs", BS), ("m", M)))
    assert [node.name for node in report.nodes] == NODE_NAMES
    want = expected_bytes(t=t, b=b, n=n, nk=nk, h=h, bs=bs, m=m)
    for node in report.nodes:
        assert node.op_type == PAGED and node.attributes == {"num_heads": n, "kv_num_heads": nk}
        cache = (shape.get("blocks", BLOCKS), bs, nk, h)
        assert node.hints[:8] == ((t, n * h), (t, nk * h), (t, nk * h), cache, cache, (b + 1,), (b,), (b, m))
        reader = reader_of(PAGED)
        assert reader.dims_read(node.hints) == {"batch": b, "tokens": t, "kv_heads": nk, "block_size": bs,
                                                "max_blocks": m}
        est, p = node.estimate, node.estimate.problem
        assert est.ok and est.op is Op.PAGED and est.total_workspace_bytes == want
        assert (p.batch_size, p.token_count, p.max_query_len, p.max_kv_len) == (b, t, min(t, m * bs), m * bs)
        assert (p.num_heads, p.kv_num_heads, p.head_size, p.block_size, p.max_blocks_per_sequence) == (n, nk, h, bs, m)
        assert est.requirements()[0].size_bytes == want
    assert report.complete and report.sum_total_bytes == 2 * want and report.peak_total_bytes == want


def _report(model: onnx.ModelProto | None = None, bounds: dict[str, int] = BOUNDS, **kwargs: Any) -> Any:
    return analyze_model(model or decoder(), ShapeBounds(bounds), **kwargs)


# -- the nodes, their estimates --------------------------------------------------------------------------

def test_every_layer_is_read_by_position_and_sized_by_attnws_s_own_bound():
    check_report(_report())


@pytest.mark.parametrize("t, b", [(1, 1), (8, 8), (40, 2)], ids=["one token", "decode-shaped", "T beyond M * bs"])
def test_s_and_l_are_read_at_their_largest_the_shapes_allow(t, b):
    """S = min(T, M * block_size) (S <= T, and S <= L), L = M * block_size: the spec's builder
    takes both (S <= T <= B * S, S <= L <= M * block_size), and the note says so."""
    (node, _) = _report(bounds={"num_tokens": t, "batch_size": b}).nodes
    p = node.estimate.problem
    assert (p.max_query_len, p.max_kv_len, p.metadata) == (min(t, M * BS), M * BS, "absent")
    assert node.estimate.total_workspace_bytes == expected_bytes(t=t, b=b)
    assert node.estimate.note.endswith(f"read at their largest the shapes allow, S = min(T, M * block_size) = "
                                       f"{min(t, M * BS)} and L = M * block_size = {M * BS}")


def test_a_step_the_block_table_cannot_hold_is_refused_with_the_builder_s_words():
    """T > B * M * block_size: no step of T tokens over B sequences of at most M * block_size keys."""
    (node, _) = _report(bounds={"num_tokens": 2 * M * BS + 1, "batch_size": 2}).nodes
    assert not node.estimate.ok and node.estimate.error == "invalid_argument"
    assert "S = 64 with T = 129 over B = 2: the longest sequence's new tokens S satisfy S <= T <= B * S" in \
        node.estimate.message


def test_attention_metadata_s_bounds_are_clamped_to_the_same_maxima():
    """With attention_metadata ORT sizes with its bounds, clamped to T and M * block_size: the
    largest are the same S and L, the key length's lower bound L itself."""
    (node, _) = _report(decoder(metadata=True)).nodes
    p = node.estimate.problem
    assert (p.metadata, p.max_query_len, p.max_kv_len, p.kv_lower_bound) == ("bounds", T, M * BS, M * BS)
    assert node.estimate.total_workspace_bytes == expected_bytes(metadata="bounds")
    assert "(the step's values: cumulative_sequence_length, past_seqlens, attention_metadata)" in node.estimate.note


def test_the_estimate_is_the_family_s_own_bound_and_the_shared_default_cannot_give_it():
    """The reader's estimate says what the spec's `estimate_geometry` (the family's OWN_ESTIMATE)
    says of the node's largest step: the same routes, verdicts, bytes and note (the reader adds
    how it read S and L; the problem's block pool is the node's own). The shared default
    (`estimate_for_node`) reads positional shapes, which give the spec no PagedAttention problem."""
    assert family_of(Op.PAGED).estimate.OWN_ESTIMATE is not None
    (node, _) = _report().nodes
    ours, spec = (estimate_json(e) for e in (node.estimate, estimate_geometry(geometry())))
    assert ours.pop("note").startswith(spec.pop("note") + "; the graph states neither S nor L")
    assert {**ours.pop("problem"), "num_blocks": None} == {**spec.pop("problem"), "num_blocks": None}
    assert ours == spec
    reader = reader_of(PAGED)
    inputs = NodeInputs(reader, node.element_type, node.attributes, node.hints, (), node.outputs, node.inputs,
                        (FP16,) * 5 + (INT32,) * 3)
    default = NodeReader.estimate(reader, inputs, RuntimeConfig(), Session())
    assert not default.ok and "PagedAttention's shapes do not give" in default.message


def test_the_dims_the_model_fixes_are_exact():
    """H, the block size and M are static; T and B are symbols (N and Nk are attributes)."""
    model = decoder()
    report = with_exact_dims(model, _report(model), ShapeBounds(BOUNDS))
    assert all(n.exact == {"head_size", "block_size", "max_blocks"} for n in report.nodes)


def test_the_graph_propagates_the_node_s_output_shape():
    """output [T, N * H] reaches o_proj: the logits resolve to [num_tokens, hidden]."""
    from attnws.model.derive import resolve

    inferred = resolve(decoder(), ShapeBounds(BOUNDS)).inferred
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in (*inferred.graph.value_info, *inferred.graph.output)}
    assert shapes["/layers.0/attn"] == [T, N * H] and shapes["logits"] == [T, HIDDEN]


@pytest.mark.parametrize("query, key, attrs, want", [
    ([T, N * H], [T, NK * H], {}, [T, N * H]),
    ([T, (N + 2 * NK) * H], None, {}, [T, N * H]),
    ([T, 100], None, {}, [T, 100]),  # the width does not divide: query's shape, as ORT's rule
    ([T, N * H], [T, H], {"kv_cache_layout": "LATENT", "v_head_size": 32, "kv_num_heads": 1}, [T, N * 32]),
], ids=["separate", "packed qkv", "packed, width not dividing", "latent, Hv 32"])
def test_output_shapes_follow_ort_s_symbolic_inference(query, key, attrs, want):
    """`_infer_PagedAttention` (onnxruntime/tools/symbolic_shape_infer.py at 1.31.1): output
    [T, N * Hv], the cache outputs shaped and typed as the caches."""
    reader = reader_of(PAGED)
    cache = (BLOCKS, BS, attrs.get("kv_num_heads", NK), H)
    hints = (tuple(query), tuple(key) if key else MISSING, MISSING, cache,
             cache if "v_head_size" not in attrs else MISSING)
    inputs = NodeInputs(reader, "float16", {"num_heads": N, "kv_num_heads": NK, **attrs}, hints, (),
                        ("out", "kco", "vco"), elem_types=(FP16, FP16, FP16, TensorProto.INT8, TensorProto.INT8))
    out, kco, vco = reader.output_shapes(inputs, None)
    assert out == (FP16, want) and kco == (TensorProto.INT8, list(cache))
    assert vco == (None if "v_head_size" in attrs else (TensorProto.INT8, list(cache)))


# -- one-node models: what ORT refuses, and the cache types --------------------------------------------------

Shapes = dict[str, tuple[int, list[Any]] | None]


def one_node(elem: int = BF16, cache: int | None = None, outputs: tuple[str, ...] = ("out",),
             **changes: Any) -> onnx.ModelProto:
    """A one-node model, its inputs graph inputs (`changes`: an input's (type, dims), None to leave
    it out, or an attribute's value; None drops an attribute): a separate-layout step of T tokens over
    B sequences, the caches of `cache` type (the query's by default)."""
    cache = cache or elem
    shapes: Shapes = {"query": (elem, ["num_tokens", N * H]), "key": (elem, ["num_tokens", NK * H]),
                      "value": (elem, ["num_tokens", NK * H]), "key_cache": (cache, [BLOCKS, BS, NK, H]),
                      "value_cache": (cache, [BLOCKS, BS, NK, H]),
                      "cumulative_sequence_length": (INT32, ["batch_size+1"]), "past_seqlens": (INT32, ["batch_size"]),
                      "block_table": (INT32, ["batch_size", M])}
    attributes: dict[str, Any] = {"num_heads": N, "kv_num_heads": NK}
    names = reader_of(PAGED).input_names
    for name, value in changes.items():
        (shapes if name in names else attributes)[name] = value
    attributes = {k: v for k, v in attributes.items() if v is not None}
    inputs = [name if shapes.get(name) else "" for name in names]
    while inputs and not inputs[-1]:
        inputs.pop()
    node = helper.make_node(PAGED, inputs, list(outputs), name="attn", domain=MS, **attributes)
    graph_inputs = [helper.make_tensor_value_info(name, *shape) for name, shape in shapes.items() if shape]
    graph_outputs = [helper.make_tensor_value_info(o, elem if i == 0 else cache, None) for i, o in enumerate(outputs)]
    return helper.make_model(helper.make_graph([node], "g", graph_inputs, graph_outputs), opset_imports=OPSETS,
                             ir_version=10)


NO_CPU_KERNEL = "Could not find an implementation for PagedAttention(1) node"


def test_the_valid_node_is_sized_and_ort_s_cpu_engine_loads_it_to_its_kernel_lookup(tmp_path):
    model = one_node()
    assert NO_CPU_KERNEL in ort_error(model)
    result = attnws("model", save(model, tmp_path), *dims())
    assert result.code == EXIT_OK, result
    assert f"reserve {expected_bytes(bf16=True):,} B" in result.out


# (the change, ORT's load-time error on CPU, "" where it loads the model to its kernel lookup or None
# where its CPU engine cannot tell, attnws's reason): ORT's CUDA kernel refuses the first ones at run
# time (its constructor and CheckInputs), which its CPU engine never reaches; its shape inference
# refuses the last four when it loads the model.
REFUSED = {
    "key_cache dim 2 != kv_num_heads": (
        dict(key_cache=(BF16, [BLOCKS, BS, 3, H]), value_cache=(BF16, [BLOCKS, BS, 3, H])), "",
        "Input 'key_cache' shall have kv_num_heads, got 3"),
    "block size not a power of two": (
        dict(key_cache=(BF16, [BLOCKS, 24, NK, H]), value_cache=(BF16, [BLOCKS, 24, NK, H])), "",
        "block_size must be a power of two and at least 16. Got block_size == 24"),
    "block_table rows != B": (
        dict(block_table=(INT32, ["batch_size+1", M])), "", "block_table dimension 0 should be batch_size, got 3"),
    "kv heads not dividing heads": (
        dict(kv_num_heads=3, key=(BF16, ["num_tokens", 3 * H]), value=(BF16, ["num_tokens", 3 * H]),
             key_cache=(BF16, [BLOCKS, BS, 3, H]), value_cache=(BF16, [BLOCKS, BS, 3, H])), "",
        "num_heads must be a multiple of kv_num_heads"),
    "uint8 cache without k_cache_dtype": (
        dict(cache=TensorProto.UINT8), "", "A uint8 packed cache requires an explicit int4 cache dtype."),
    "k_cache_dtype against the cache's type": (
        dict(k_cache_dtype="int8"), "", "k_cache_dtype is 'int8', but the cache tensor's element type is 'bfloat16'"),
    "unknown k_cache_dtype": (dict(k_cache_dtype="int3"), "", "Invalid KV cache data type: 'int3'"),
    "an int8 cache without quantization": (
        dict(cache=TensorProto.INT8), "",
        "The KV cache has a quantized element type, so 'k_quant_type' must be 'PER_TENSOR' or 'PER_CHANNEL'."),
    "a bfloat16 query over a float16 cache": (  # the CPU engine's float Cast refuses it first: not compared
        dict(cache=FP16), None, "no CUDA PagedAttention kernel is registered for T = bfloat16 with T_CACHE "
                                        "= float16"),
    "unknown layout": (
        dict(kv_cache_layout="PAGED"), "kv_cache_layout must be 'SEPARATE' or 'LATENT'.",
        "'kv_cache_layout' must be 'SEPARATE' or 'LATENT', got 'PAGED'"),
    "query of rank 3": (
        dict(query=(BF16, ["num_tokens", N, H])), "Input 0 (query) shall be 2 dimensions",
        "Input 'query' is expected to have 2 dimensions, got 3"),
    "packed query width not dividing": (
        dict(query=(BF16, ["num_tokens", 100]), key=None, value=None),
        "Hidden size must be divisible by (num_heads + 2 * kv_num_heads).",
        "Packed input 'query' hidden size must be a multiple of num_heads + 2 * kv_num_heads. Got 100"),
    "value_cache_out under LATENT": (
        dict(kv_cache_layout="LATENT", kv_num_heads=1, key=(BF16, ["num_tokens", H]), value=None,
             key_cache=(BF16, [BLOCKS, BS, 1, H]), value_cache=None, outputs=("out", "kco", "vco")),
        "value_cache_out must be absent when kv_cache_layout is 'LATENT'.",
        "value_cache_out must be absent when kv_cache_layout is 'LATENT'."),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_node_ort_refuses_is_refused_with_its_reason(name, tmp_path):
    """ORT's verdict on CPU (load-time only: its kernel lookup fails on every PagedAttention node)
    and attnws's: unavailable with ORT's reason, exit 1, never sized, never an internal error."""
    changes, ort_says, message = REFUSED[name]
    model = one_node(**changes)
    if ort_says is not None:
        loaded = ort_error(model)
        assert (ort_says in loaded) if ort_says else (NO_CPU_KERNEL in loaded), loaded
    result = attnws("model", save(model, tmp_path), *dims())
    assert result.code == EXIT_REJECTED, result
    assert message in " ".join(result.out.split()) and "Traceback" not in result.err, result.out


def test_the_key_cache_s_kv_heads_refusal_in_process():
    """The refusal as the report records it: ORT's invalid_argument with its text."""
    (node,) = analyze_model(one_node(key_cache=(BF16, [BLOCKS, BS, 3, H]), value_cache=(BF16, [BLOCKS, BS, 3, H])),
                            ShapeBounds(BOUNDS)).nodes
    assert node.estimate.error == "invalid_argument" and node.estimate.problem is None
    assert node.estimate.message == "Input 'key_cache' shall have kv_num_heads, got 3"


@pytest.mark.parametrize("cache, attrs, scales, kv_quant", [
    (TensorProto.INT8, {}, [1], "int8"),
    (TensorProto.FLOAT8E4M3FN, {}, [1], "fp8"),
    (TensorProto.UINT8, {"k_cache_dtype": "int4", "v_cache_dtype": "int4"}, [1], "int4"),
    (TensorProto.INT8, {}, [NK, 1, H], "int8"),
], ids=["int8", "fp8", "uint8 int4", "int8 per-channel"])
def test_a_quantized_cache_s_type_is_read_from_the_cache_tensor(cache, attrs, scales, kv_quant):
    quant = "PER_TENSOR" if scales == [1] else "PER_CHANNEL"
    head = (H + 1) // 2 if kv_quant == "int4" else H
    caches = (cache, [BLOCKS, BS, NK, head])
    model = one_node(cache=cache, key_cache=caches, value_cache=caches, k_scale=(FP32, scales), v_scale=(FP32, scales),
                     k_quant_type=quant, v_quant_type=quant, **attrs)
    assert NO_CPU_KERNEL in ort_error(model)
    (node,) = analyze_model(model, ShapeBounds(BOUNDS)).nodes
    assert node.estimate.ok, node.estimate.message
    p = node.estimate.problem
    assert p.cache_type == kv_quant and p.k_quantization is KvQuantization[quant] and p.is_bf16
    kv_scale = "per_tensor" if quant == "PER_TENSOR" else "per_channel"
    assert node.estimate.total_workspace_bytes == expected_bytes(bf16=True, kv_quant=kv_quant, kv_scale=kv_scale)


def test_optional_inputs_and_attributes_reach_the_problem():
    model = one_node(cos_cache=(BF16, [M * BS, H // 2]), sin_cache=(BF16, [M * BS, H // 2]), do_rotary=1,
                     head_sink=(BF16, [N]), q_norm_weight=(BF16, [H]), k_norm_weight=(BF16, [H]), softcap=30.0,
                     local_window_size=32, is_causal=2, attention_metadata=(INT32, [3]))
    (node,) = analyze_model(model, ShapeBounds(BOUNDS)).nodes
    p = node.estimate.problem
    assert node.estimate.ok, node.estimate.message
    assert (p.do_rotary, p.has_head_sink, p.use_qk_norm, p.softcap, p.local_window_size) == (True, True, True, 30.0, 32)
    assert not p.causal and p.metadata == "bounds"  # is_causal 2: ORT reads is_causal == 1 only


# -- the dynamic block table --------------------------------------------------------------------------------

def test_a_dynamic_block_table_width_without_a_bound_is_refused_naming_it(tmp_path):
    result = attnws("model", save(decoder(m="max_blocks"), tmp_path), *dims())
    assert result.code == EXIT_REJECTED and "no safe reservation" in result.out
    assert ("missing: --dim max_blocks=MAX (the block table's width M (blocks per sequence: L <= M * block_size) of "
            "PagedAttention node") in result.out


def test_a_dynamic_block_table_width_is_no_exact_dimension_and_the_target_refuses_its_range():
    """Bounded by --dim, the estimate reads M at its bound; the solver's target takes M as the
    model's own (exact), so a width the model leaves symbolic is refused there, by name."""
    model, bounds = decoder(1, m="max_blocks"), {**BOUNDS, "max_blocks": M}
    report = with_exact_dims(model, _report(model, bounds), ShapeBounds(bounds))
    (node,) = report.nodes
    assert node.estimate.total_workspace_bytes == expected_bytes() and "max_blocks" not in node.exact
    with pytest.raises(InvalidArgument, match="max_blocks 1..4: PagedAttention's max_blocks is fixed by the model"):
        target_of(node)


# -- the solver's target of a node (no Z3) -------------------------------------------------------------------

def target_of(node: Any) -> Target:
    """The node's target as `report.node_target` builds one (the reader's `target_fields`, S over
    1..S): node_target itself reads the problem's `sequence_length`, which PagedProblem names
    `max_query_len` (test_node_target_takes_a_paged_node)."""
    p, reader = node.estimate.problem, reader_of(PAGED)

    def dim(name: str, value: int, lowest: int = 1) -> DimRange:
        return DimRange(value, value) if name in node.exact else DimRange(min(lowest, value), value)

    target = Target(op=p.op, element_size=p.element_size, batch=dim("batch", p.batch_size),
                    seq=dim("seq", p.max_query_len), config=node.config, name=node.path,
                    **reader.target_fields(p, dim, False, node.session))
    why = reader.unstated(node.estimate, target)
    if why:
        raise InvalidArgument(why)
    return target


def _node(model: onnx.ModelProto | None = None) -> Any:
    """The one node of `model` (default: a one-layer decoder), with the dimensions it fixes."""
    model = model or decoder(1)
    (node,) = with_exact_dims(model, _report(model), ShapeBounds(BOUNDS)).nodes
    assert node.estimate.ok, node.estimate.message
    return node


def test_a_sized_node_s_target_states_it():
    """N, Nk, H, the block size and M exact; B, T, S and L from 1; the estimate at the target's
    maxima is the node's."""
    node = _node()
    target = target_of(node)
    assert (target.heads, target.kv_heads, target.head_size, target.block_size, target.max_blocks) == \
        tuple(DimRange(v, v) for v in (N, NK, H, BS, M))
    assert (target.batch, target.tokens, target.seq, target.kv_len) == \
        (DimRange(1, B), DimRange(1, T), DimRange(1, T), DimRange(1, M * BS))
    assert target.metadata is None and target.kv_quant is None and not target.latent and not target.non_causal
    assert estimate_geometry(target.max_geometry()).total_workspace_bytes == node.estimate.total_workspace_bytes


def test_a_latent_node_s_target_states_its_v_head_size():
    """Absorbed MLA: one cache, Nk = 1, V the first Hv channels (with an explicit scale)."""
    model = one_node(kv_cache_layout="LATENT", kv_num_heads=1, v_head_size=32, scale=0.125, value=None,
                     key=(BF16, ["num_tokens", H]), key_cache=(BF16, [BLOCKS, BS, 1, H]), value_cache=None)
    assert NO_CPU_KERNEL in ort_error(model)
    node = _node(model)
    target = target_of(node)
    assert target.latent and target.v_head_size == DimRange(32, 32) and target.kv_heads == DimRange(1, 1)
    assert estimate_geometry(target.max_geometry()).total_workspace_bytes == node.estimate.total_workspace_bytes


def test_an_fp4_cache_is_not_modelled():
    (node,) = analyze_model(one_node(cache=TensorProto.UINT8, k_cache_dtype="float4e2m1",
                                     v_cache_dtype="float4e2m1"), ShapeBounds(BOUNDS)).nodes
    assert node.estimate.error == "unsupported" and "attnws models no packed fp4 cache" in node.estimate.message


def test_a_node_whose_k_and_v_scales_differ_is_unstated():
    node = _node()
    p = replace(node.estimate.problem, cache_type="int8", k_quantization=KvQuantization.PER_TENSOR,
                v_quantization=KvQuantization.PER_CHANNEL)
    with pytest.raises(InvalidArgument, match="one scale kind for both caches"):
        target_of(replace(node, estimate=replace(node.estimate, problem=p)))


def test_node_target_takes_a_paged_node():
    assert node_target(_node()).seq == DimRange(1, T)


# -- the command line ----------------------------------------------------------------------------------------

def test_the_text_leads_with_the_reservation_and_shows_each_layer_once(tmp_path):
    run_ = attnws("model", save(decoder(), tmp_path), *dims())
    want = expected_bytes()
    assert run_.code == EXIT_OK, run_
    assert run_.out.startswith(f"reserve {want:,} B for attention workspace")
    assert "(x2, identical)" in run_.out and "key_cache [32, 16, 2, 64]" in run_.out
    assert "absent: cos_cache, sin_cache, slot_mapping" in run_.out and "absent: key_cache_out" in run_.out
    assert f"  total workspace      {format_bytes(want)}" in run_.out
    assert "attnws's own for MultiHeadAttention and PagedAttention (ORT has none)" in run_.out
    assert not any(mark in run_.out for mark in REPR_MARKS)


def test_the_json_lists_every_node_with_its_estimate_and_level_2(tmp_path):
    path = save(decoder(), tmp_path)
    doc = attnws("model", path, *dims(), "--json").json()
    in_process = run(path, *dims())  # the command's handler, as the other model tests call it
    assert in_process.exit_code == EXIT_OK and in_process.json["nodes"] == doc["nodes"]
    want = expected_bytes()
    assert doc["node_count"] == doc["sized_count"] == 2 and doc["status"] == "ok"
    assert doc["groups"] == [{"count": 2, "nodes": [0, 1], "op_type": PAGED, "status": "ok",
                              "total_workspace_bytes": want}]
    for name, node in zip(NODE_NAMES, doc["nodes"]):
        assert node["name"] == name and node["input_shapes"][7] == [B, M] and node["session_options"] == {}
        assert node["output_names"] == [node["output_names"][0], None, None]
        est = node["estimate"]
        assert est["op"] == "paged" and est["problem"]["max_kv_len"] == M * BS
        assert est["problem"]["num_blocks"] == BLOCKS  # the node's own pool
        assert est["requirements"] == [{"size_bytes": want, "slot_id": 0, "alignment_bytes": 256}]


def test_a_session_option_no_node_reads_is_refused(tmp_path):
    run_ = attnws("model", save(decoder(), tmp_path), *dims(), "--max-total-seq", "64")
    assert run_.code == EXIT_USAGE and "no node of this model reads it" in run_.err + run_.out


def test_a_bound_only_a_length_s_value_reads_is_refused_with_the_reader_s_advice(tmp_path):
    """past_seqlens computed from a mask's width: the width changes no shape, and the advice says
    which shapes bound S and L instead (the reader's S-typed index inputs)."""
    model = decoder(1)
    model.graph.input.append(helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch_size", "total_length"]))
    model.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    model.graph.node.insert(0, helper.make_node("ReduceSum", ["mask", "axes"], ["lengths"], keepdims=0))
    model.graph.node.insert(1, helper.make_node("Cast", ["lengths"], ["computed_seqlens"], to=INT32))
    next(n for n in model.graph.node if n.op_type == PAGED).input[6] = "computed_seqlens"
    run_ = attnws("model", save(model, tmp_path), *dims(), "--dim", "total_length=64")
    text = " ".join((run_.err + run_.out).split())
    assert run_.code == EXIT_USAGE and "--dim total_length=64 changes nothing" in text, run_
    assert "input 6 (past_seqlens)" in text and paged_reader._LENGTHS_ADVICE in text


def test_the_llama_example_through_the_command(tmp_path):
    """`python -m attnws model` on the README-style example (a real process, as a user runs it)."""
    path = save(llama_decoder(), tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-m", "attnws", "model", path, *dims(LLAMA_BOUNDS)], capture_output=True,
                          text=True, env=env, timeout=300)
    want = expected_bytes(t=8, b=8, **{k: v for k, v in LLAMA.items() if k != "blocks"})
    assert done.returncode == EXIT_OK, done.stderr
    assert done.stdout.startswith(f"reserve {want:,} B") and "(x2, identical)" in done.stdout
    assert "S = min(T, M * block_size) = 8 and L = M * block_size = 8,192" in done.stdout
    assert "block_table [8, 512]" in done.stdout and "key_cache [4096, 16, 8, 128]" in done.stdout


# -- a planted misreading the checks catch ---------------------------------------------------------------------

def _block_size_from_the_heads_axis(monkeypatch):
    """The reader takes the block size from key_cache's dimension 2 (Nk) instead of 1."""
    real = paged_reader._sizes
    monkeypatch.setattr(paged_reader, "_sizes", lambda node: real(replace(node, hints=tuple(
        (h[0], h[2], h[1], h[3]) if i == 3 else h for i, h in enumerate(node.hints)))))


def _decode_assumed(monkeypatch):
    """The reader takes every step as decode: S = 1."""
    real = paged_reader._sizes
    monkeypatch.setattr(paged_reader, "_sizes", lambda node: (1, real(node)[1]))


def _batch_off_by_one(monkeypatch):
    """dims_read takes cumulative_sequence_length's length for B."""
    monkeypatch.setattr(paged_reader, "dim_at", lambda hints, i, a: hints[i][a] + (1 if i == 5 else 0))


def _last_layer_dropped(monkeypatch):
    import attnws.model.functions as functions_module

    real = functions_module.is_attention
    monkeypatch.setattr(functions_module, "is_attention", lambda node: real(node) and node.name != NODE_NAMES[-1])


@pytest.mark.parametrize("plant", [None, _block_size_from_the_heads_axis, _decode_assumed, _batch_off_by_one,
                                   _last_layer_dropped])
def test_a_planted_misreading_fails_the_checks(plant, monkeypatch):
    bounds = {"num_tokens": 8, "batch_size": 4}
    report = lambda: _report(bounds=bounds)  # noqa: E731 - read after the plant
    if plant is None:  # the honest reading passes the same check
        check_report(report(), 8, 4)
        return
    plant(monkeypatch)
    with pytest.raises(AssertionError):
        check_report(report(), 8, 4)
