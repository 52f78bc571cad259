"""The gqa family's node reader (`attnws.spec.gqa`): GroupQueryAttention nodes.

ORT 1.31.1's com.microsoft schema for the node (attribute types, num_heads and kv_num_heads
required, the required inputs, each input's type: T for the tensors, the cache T_CACHE,
seqlens_k and total_sequence_length M (int32), position_ids int64, the scales T_KV_SCALE
(float); outputs), and what differs from the other families, as the hooks the shared pipeline
calls for every reader:

- `estimate`: ORT's own GroupQueryAttention estimator (`attnws.spec.gqa.estimate.ort_estimate`,
  what `attnws estimate --op gqa` prints), not the shared aggregate: the node read at its maximum
  shapes as ORT's adapter reads it (`attnws.spec.gqa.inputs.node_problem`: kv_num_heads, the
  window, rotary, softcap and the cache quantization are attributes, the cache capacity P is
  past_key's dimension 2), with the session option
  `ep.cuda.gqa_workspace_max_total_sequence_length` (`Session.max_total_sequence_length`; unset,
  a non-windowed cache has no estimate, as in ORT) and whether the head sink is a constant (ORT
  prepacks it: `Session.constants`).
- `output_shapes`: what ORT's symbolic shape inference propagates (`_infer_GroupQueryAttention` in
  onnxruntime/tools/symbolic_shape_infer.py), whatever the node's validity: output [B, S, N * H]
  (query's shape; a packed query's hidden becomes N * H), present_key / present_value past_key's
  / past_value's shape (past and present share the cache's capacity P, as onnxruntime-genai binds
  them).
- `target_fields`, `unstated`: the solver's `Target` of a sized node: N, H, Nk and P exact, T over
  1..P where past and present share one buffer of P rows (onnxruntime-genai's layout: no run
  passes a larger T), P over 0..P and T over 1..P + S for a growing cache (the session's
  `cache_layout` "separate"), a windowed cache's T over 1..max(P, S, the session option); a node
  the target cannot state (per-channel or mixed cache scales, an attention bias) says why.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Sequence

import onnx

from ...spec.errors import WorkspaceError
from ...spec.estimate import Estimate, own_estimate_record, unavailable
from ...spec.gqa.estimate import node_at_maxima, ort_estimate
from ...spec.gqa.inputs import (HEAD_SINK, KEY, PAST_KEY, PAST_VALUE, QUERY, SEQLENS_K, TOTAL_SEQUENCE_LENGTH, VALUE,
                                node_problem)
from ...spec.gqa.problem import GqaFormat, GqaProblem, KvQuantization, shares_buffer
from ...spec.hints import Hint, hint_at, shape_of
from ...spec.limits import INT32_MAX
from ...spec.problem import Backend, Op
from ...spec.target import DimRange, Target
from ..reader import DimFactory, NodeInputs, NodeReader, OutputType, Session, output_present, static_dim

_A = onnx.AttributeProto
_PRESENT_OUTPUTS, _OUTPUT_QK = (1, 2), 3
# What the model report says when neither --cache-layout nor a genai_config.json gives the layout.
_ASSUMED_SHARED = ("cache layout: shared assumed (past and present alias one buffer of P rows, as onnxruntime-genai "
                   "binds them); --cache-layout separate reads a growing cache (present P + S rows)")
# What a --dim refused as changing nothing adds where the graph computes seqlens_k or
# total_sequence_length from the symbol: the session option that bounds the total sequence.
_TOTAL_SEQUENCE_ADVICE = ("the longest total sequence ONNX Runtime's estimator reads is its session option, "
                          "--max-total-seq N")
# What the report adds where ORT's estimate declares nothing because cuDNN is reachable.
_CUDNN_ADVICE = (" An --sdpa-kernel without cuDNN's bit, or --env ORT_ENABLE_CUDNN_FLASH_ATTENTION=0, keeps cuDNN off "
                 "and makes it sizable.")


def _type_name(elem_type: int) -> str | None:
    """The ONNX name of an element type ("float16"), None for 0 (unknown)."""
    if not elem_type:
        return None
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"unknown element type {elem_type}"


@dataclass(frozen=True, eq=False)
class Reader(NodeReader):
    """GroupQueryAttention's node (`NodeReader`): ORT 1.31.1's schema and the adapter's reading."""

    def role(self, index: int, axis: int, rank: int) -> str:
        """Return what input `index` axis `axis` is to the operator, in words."""
        if index in (QUERY, KEY, VALUE) and axis < 2:
            return ("the batch size B", "the sequence length S")[axis]
        if index in (PAST_KEY, PAST_VALUE) and axis == 2:
            return "the cache capacity P"
        return "the batch size B" if axis == 0 and index in (PAST_KEY, PAST_VALUE, SEQLENS_K) else "a dimension"

    def unmodelled(self, outputs: Sequence[str]) -> tuple[str, str]:
        """Return why a node with output_qk is not sized (ORT's CUDA kernel does not write it)."""
        if output_present(outputs, _OUTPUT_QK):
            return (f"output {_OUTPUT_QK} (output_qk {outputs[_OUTPUT_QK]!r}) is present: ORT 1.31.1's CUDA "
                    f"{self.op_type} does not write it (its CPU kernel does)", "unsupported")
        return "", ""

    def output_shapes(self, node: NodeInputs, problem: Any) -> list[OutputType]:
        """Return output [B, S, N * H] (query's ONNX element type) and present_key / present_value
        shaped and typed as past_key / past_value, from the shapes alone (`problem` is not read);
        None where an input shape is unknown or a packed query's hidden is not a multiple of
        N + 2 Nk."""
        hints, attributes = node.hints, node.attributes
        query = shape_of(hint_at(hints, QUERY))
        output = None
        if query is not None and len(query) == 3 and min(query) >= 0:
            n, nk = attributes.get("num_heads"), attributes.get("kv_num_heads")
            packed = shape_of(hint_at(hints, KEY)) is None and shape_of(hint_at(hints, VALUE)) is None
            if not packed:
                output = (node.elem_type(QUERY), list(query))
            elif isinstance(n, int) and isinstance(nk, int) and n > 0 and nk > 0 and query[2] % (n + 2 * nk) == 0:
                output = (node.elem_type(QUERY), [query[0], query[1], n * (query[2] // (n + 2 * nk))])
        presents = [(node.elem_type(i), shape_of(hint_at(hints, i))) for i in (PAST_KEY, PAST_VALUE)]
        return [output, *((kind, list(p)) if p is not None and kind and min(p, default=0) >= 0 else None
                          for kind, p in presents)]

    def exact_dims(self, hints: Sequence[Hint], attributes: dict[str, Any]) -> frozenset[str]:
        """Return batch and seq where query [B, S, ...] fixes them (N, Nk, H and P are exact in
        every target: `target_fields`)."""
        return frozenset(name for name, axis in (("batch", 0), ("seq", 1)) if static_dim(hints, QUERY, axis))

    def estimate(self, node: NodeInputs, config: Any, session: Session) -> Estimate:
        """Return ORT 1.31.1's own estimate for the node (EstimateGroupQueryAttentionWorkspace)
        with the session option and a constant head sink prepacked; unavailable with ORT's
        reason where it declares nothing (the problem and route verdicts kept where the node is
        valid) or the builder's error where ORT refuses the node. The fields are those
        `attnws.spec.estimate.estimate_geometry` gives a GroupQueryAttention geometry (tested):
        the node's own problem goes where a geometry cannot (per-channel scales, a prepacked sink)."""
        try:
            p = node_problem(node.hints, node.attributes, node.element_type, _type_name(node.elem_type(PAST_KEY)),
                             node.has_present)
        except WorkspaceError as error:
            return unavailable(self.op, str(error), error=error.status)
        prepacked = HEAD_SINK < len(node.names) and node.names[HEAD_SINK] in session.constants
        p = replace(p, head_sink_is_input=p.has_head_sink and not prepacked)  # a graph input: converted each run
        try:
            outcome: Any = ort_estimate(p, config, session.max_total_sequence_length)  # the sink's storage is p's
        except WorkspaceError as error:
            outcome = error
        est = own_estimate_record(p, config, outcome)
        if not est.ok and not p.sliding_window_cache and not session.max_total_sequence_length:
            est = replace(est, message=f"{est.message}; --max-total-seq N sets it")
        if not est.ok and any(r.backend is Backend.CUDNN and r.reachable for r in est.reachability):
            est = replace(est, message=f"{est.message}{_CUDNN_ADVICE}")
        return est

    def target_fields(self, problem: Any, dim: DimFactory, exact_heads: bool, session: Session) -> dict[str, Any]:
        """Return the target's N, H and Nk exact, and the cache as the session's layout holds it
        (a windowed cache is always shared): shared, P exact and T over 1..P (past and present
        share one buffer of P rows: no run passes a larger T), a windowed cache's T over
        1..max(P, S, the session option, 0 unset); separate (a growing cache), P over 0..its
        bound and T over 1..P + S, at most the session option where it is set (no run passes a
        longer T: ORT's estimator relies on it too); the node's flags and the session option."""
        p, option = problem, session.max_total_sequence_length
        capacity, windowed = p.past_sequence_length, p.sliding_window_cache
        # the spec's rule (`shares_buffer`); a windowed cache is asked without the session's layout:
        # it shares its buffer whatever the layout says
        shared = shares_buffer(None if windowed else session.cache_layout, windowed, p.total_sequence_length, capacity)
        layout = "shared" if shared else "separate"
        total = max(capacity, p.sequence_length, option) if windowed \
            else min(capacity + p.sequence_length, option or INT32_MAX) if layout == "separate" else capacity
        kv_quant = _kv_quant(p)
        return {"heads": DimRange(p.num_heads, p.num_heads), "head_size": DimRange(p.head_size, p.head_size),
                "kv_heads": DimRange(p.kv_num_heads, p.kv_num_heads), "cache_layout": layout,
                "past": DimRange(0 if layout == "separate" else capacity, capacity), "total_seq": DimRange(1, total),
                "gqa_format": GqaFormat.PACKED_QKV if p.is_packed_qkv else GqaFormat.SEPARATE, "bf16": p.is_bf16,
                "rotary": p.do_rotary, "window": None if p.local_window_size == -1 else p.local_window_size,
                "sliding_window_cache": windowed, "softcap": p.softcap or None,
                "smooth_softmax": p.smooth_softmax, "qk_norm": p.use_qk_norm,
                "head_sink": p.head_sink,
                "kv_quant": None if kv_quant in ("none", None) else kv_quant, "max_total_seq": option or None}

    def unstated(self, estimate: Estimate, target: Target) -> str:
        """Return why the target does not state the node: its cache scales are per channel or
        differ between K and V, or the node read at the target's maxima differs from the node (an
        attention bias, q/k norms, ...). A head sink is stated with its kind: a constant
        initializer (prepacked) or a graph input (converted at every run)."""
        p = estimate.problem
        if _kv_quant(p) is None:
            return "the solver's box has per-tensor cache scales only"
        at = node_at_maxima(target.max_geometry())
        layout_given = ("total_sequence_length", "kv_share_buffer")  # the target's own: ORT's adapter reads neither
        differ = [f.name for f in fields(p) if f.name not in layout_given and getattr(at, f.name) != getattr(p, f.name)]
        return f"the solver's box cannot state the node's {', '.join(differ)}" if differ else ""

    def absent_dim(self, dim: str) -> str:
        """Return why the node has no packed token count or key/value length of its own."""
        return {"tokens": f"{self.op_type} has no packed token count",
                "kv_seq": f"{self.op_type}'s new keys are its new tokens (L = S); its key length is total_seq"}.get(dim, "")


def _kv_quant(p: GqaProblem) -> str | None:
    """The target's name for the node's cache quantization (a key of `attnws.spec.gqa.problem
    .KV_QUANT`), or None where the target has none: its scales are per tensor, alike for K and V."""
    if not p.quantized:
        return "none"
    if p.k_quantization != p.v_quantization or p.k_quantization is not KvQuantization.PER_TENSOR:
        return None
    return "fp8" if p.cache_is_fp8 else {8: "int8", 4: "int4"}.get(p.kv_cache_bit_width)


READERS = (
    Reader(op=Op.GQA,
           attribute_types={"num_heads": _A.INT, "kv_num_heads": _A.INT, "scale": _A.FLOAT, "softcap": _A.FLOAT,
                            "local_window_size": _A.INT, "do_rotary": _A.INT, "rotary_interleaved": _A.INT,
                            "smooth_softmax": _A.INT, "causal": _A.INT, "sliding_window_cache": _A.INT,
                            "qk_output": _A.INT, "qk_norm_epsilon": _A.FLOAT, "kv_cache_bit_width": _A.INT,
                            "k_quant_type": _A.STRING, "v_quant_type": _A.STRING},
           required_attributes=("num_heads", "kv_num_heads"),
           required_inputs=(QUERY, SEQLENS_K, TOTAL_SEQUENCE_LENGTH),
           # query key value past_key past_value seqlens_k total_sequence_length cos_cache sin_cache
           # position_ids attention_bias head_sink k_scale v_scale q_norm_weight k_norm_weight
           input_types=("T", "T", "T", "T_CACHE", "T_CACHE", "M", "M", "T", "T", "tensor(int64)", "T", "T",
                        "T_KV_SCALE", "T_KV_SCALE", "T", "T"),
           type_constraints={"T": ("float16", "bfloat16", "float"),
                             "T_CACHE": ("float", "float16", "bfloat16", "uint8", "int8", "float8e4m3fn"),
                             "T_KV_SCALE": ("float",), "M": ("int32",)},
           output_names=("output", "present_key", "present_value", "output_qk"), any_domain=False,
           present_outputs=_PRESENT_OUTPUTS, session_options=("max_total_sequence_length", "cache_layout"),
           assumptions={"cache_layout": _ASSUMED_SHARED}, value_advice=_TOTAL_SEQUENCE_ADVICE),
)
