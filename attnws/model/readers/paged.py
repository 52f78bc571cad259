"""The paged family's node reader (`attnws.spec.paged`): PagedAttention nodes.

ORT 1.31.1's com.microsoft schema for the node (16 attributes, num_heads and kv_num_heads
required; query, key_cache, cumulative_sequence_length, past_seqlens and block_table required;
the tensors T (float16, bfloat16), the caches T_CACHE, the index inputs S (int32), the scales
T_KV_SCALE (float); outputs output, key_cache_out, value_cache_out), and what differs from the
other families, as the hooks the shared pipeline calls for every reader:

- what the node fixes, read from its shapes and attributes: N and Nk (attributes), H (query's
  width over N, or over N + 2 Nk for a packed query), the block size (key_cache's dimension 1),
  the block table's width M (block_table's dimension 1), the cache's element type (key_cache's
  type: int8, float8e4m3fn, uint8 with k_cache_dtype int4, or the query's own), the layout, the
  quantization, the optional inputs present (rotary caches, head sink, QK-norm weights, the
  attention_metadata that gives the step's bounds), softcap, the window and is_causal; what
  varies: T (query's dimension 0), B (cumulative_sequence_length's dimension 0 less one, also
  past_seqlens' and block_table's dimension 0);
- S and L, which no shape states (they are the step's values: cumulative_sequence_length and
  past_seqlens, or attention_metadata's bounds): read at their largest the shapes allow, as the
  spec's builder bounds a step, S <= T <= B * S and S <= L <= M * block_size: S = min(T, M *
  block_size), L = M * block_size (the block table's capacity; attention_metadata's bounds are
  clamped to T and to it by ORT). The estimate's note says so, with the values;
- `estimate`: attnws's own bound (`attnws.spec.paged.estimate`, `OWN_ESTIMATE`'s estimator; ORT
  1.31.1 has none) on the node's own problem: the shared default cannot, since a node's shapes
  alone give the spec no PagedAttention problem (`attnws.spec.paged.inputs.problem_from_hints`);
- `output_shapes`: what ORT's symbolic shape inference propagates (`_infer_PagedAttention`):
  output [T, N * Hv] (query's shape where key is given and the layout is SEPARATE), the cache
  outputs shaped and typed as the caches they alias;
- `target_fields`, `unstated`: the solver's `Target`: N, Nk exact (attributes), H, the block
  size and M exact where the model fixes them, B, T, S and L ranges; a node a target cannot state
  (scales that differ between K and V, a field the target has no place for) says why.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Sequence

import onnx

from ...spec.errors import InvalidArgument, WorkspaceError
from ...spec.estimate import Estimate, own_estimate_record, unavailable
from ...spec.hints import MISSING, Hint, hint_at, shape_of
from ...spec.paged.builder import build_paged_problem
from ...spec.paged.estimate import bound
from ...spec.paged.inputs import named_shapes, runtime_problem
from ...spec.paged.problem import KvQuantization, PagedFormat, PagedProblem
from ...spec.problem import Op
from ...spec.target import DimRange, Target
from ..reader import DimFactory, NodeInputs, NodeReader, OutputType, Session, dim_at, static_dim

_A = onnx.AttributeProto
_T = onnx.TensorProto
(_QUERY, _KEY, _VALUE, _KEY_CACHE, _VALUE_CACHE, _CUMULATIVE, _PAST_SEQLENS, _BLOCK_TABLE, _COS_CACHE, _SIN_CACHE,
 _SLOT_MAPPING) = range(11)
_KEY_CACHE_OUT, _VALUE_CACHE_OUT = 1, 2
# The problem's fields no bound reads and no target states: the cache's block count (key_cache's
# dimension 0, a pool the engine allocates) and whether slot_mapping is given.
_GRAPH_ONLY = ("num_blocks", "has_slot_mapping")
# The cache element types ORT 1.31.1 registers a CUDA kernel for, by the cache tensor's element
# type: the logical type k_cache_dtype / v_cache_dtype names (uint8 holds packed int4).
_STORAGE = {_T.FLOAT16: "float16", _T.BFLOAT16: "bfloat16", _T.INT8: "int8", _T.FLOAT8E4M3FN: "float8e4m3fn",
            _T.UINT8: "int4"}
_CACHE_DTYPES = ("float16", "bfloat16", "int8", "float8e4m3fn", "int4", "float4e2m1")  # the attribute's values
_CACHE_TYPE = {"int8": "int8", "float8e4m3fn": "fp8", "int4": "int4"}  # -> the spec's `cache_type`
# What a --dim refused as changing nothing adds where the graph computes an index input's value
# (cumulative_sequence_length, past_seqlens, the block table, attention_metadata) from the symbol.
_LENGTHS_ADVICE = ("PagedAttention's S and L are read at their largest the shapes allow (S = min(T, M * block_size), "
                   "L = M * block_size): bound T, query's dimension 0, and M, block_table's dimension 1, instead")


def _sizes(node: NodeInputs) -> tuple[int, int]:
    """(S, L): the step's longest new tokens and key length at their largest the shapes allow,
    S = min(T, M * block_size) and L = M * block_size (1 where a shape is malformed: the builder
    refuses it before it reads them)."""
    query, cache, table = (dim_at(node.hints, i, a) for i, a in ((_QUERY, 0), (_KEY_CACHE, 1), (_BLOCK_TABLE, 1)))
    tokens = query if isinstance(query, int) and query >= 0 else 1
    capacity = cache * table if isinstance(cache, int) and isinstance(table, int) and min(cache, table) >= 0 else 1
    return min(tokens, capacity), capacity


def _cache_type(node: NodeInputs, latent: bool) -> tuple[str | None, str]:
    """The spec's `cache_type` of the node's caches (None: the query's own type) and, where the
    node names a k_cache_dtype / v_cache_dtype ORT does not know, that text (the builder refuses it
    with ORT's words); raise InvalidArgument where ORT refuses the attribute against the cache
    tensor's type (both caches have one: the schema binds T_CACHE), or registers no kernel for it."""
    a = node.attributes
    storage = _STORAGE[node.elem_type(_KEY_CACHE)]  # the schema's T_CACHE (`estimate`: known)
    if latent and a.get("v_cache_dtype", ""):
        raise InvalidArgument("Input 'v_scale' and attributes 'v_quant_type' / 'v_cache_dtype' must be unset when "
                              "'kv_cache_layout' is 'LATENT'")
    for attribute in ("k_cache_dtype",) if latent else ("k_cache_dtype", "v_cache_dtype"):
        text = a.get(attribute, "")
        if text and text not in _CACHE_DTYPES:
            return None, text
        if not text and storage == "int4":
            raise InvalidArgument("A uint8 packed cache requires an explicit int4 cache dtype.")
        if text and text != storage:
            named = "uint8" if storage == "int4" else storage
            raise InvalidArgument(f"{attribute} is '{text}', but the cache tensor's element type is '{named}'. Leave "
                                  "the attribute at '' to use the tensor's element type.")
    if storage in ("float16", "bfloat16") and storage != node.element_type:
        raise InvalidArgument(f"no CUDA PagedAttention kernel is registered for T = {node.element_type} with "
                              f"T_CACHE = {storage} (ORT 1.31.1 registers T_CACHE = T, int8, uint8 (packed int4) or "
                              "float8e4m3fn)")
    return _CACHE_TYPE.get(storage), ""


def _node_problem(node: NodeInputs) -> PagedProblem:
    """Return the spec's problem for the node at its largest step (`_sizes`), or raise the error
    ORT gives the node (the builder's checks, in ORT's order, after the cache type's)."""
    a = node.sizing_attributes
    latent = a.get("kv_cache_layout", "SEPARATE") == "LATENT"
    if latent and node.has_output(_VALUE_CACHE_OUT):  # ORT's schema inference, when it loads the model
        raise InvalidArgument("value_cache_out must be absent when kv_cache_layout is 'LATENT'.")
    cache_type, invalid = _cache_type(node, latent)
    seq, length = _sizes(node)
    shapes = {name: shape for name, shape in named_shapes(node.hints).items() if shape is not None}
    metadata = "attention_metadata" in shapes
    scale = a.get("scale")
    return build_paged_problem(
        **shapes, num_heads=a.get("num_heads"), kv_num_heads=a.get("kv_num_heads"), max_query_len=seq,
        max_kv_len=length, kv_lower_bound=length if metadata else 0, scale=scale or None,  # 0: ORT's default
        softcap=a.get("softcap", 0.0), local_window_size=a.get("local_window_size", -1),
        is_causal=a.get("is_causal", 1), do_rotary=a.get("do_rotary", 0), rotary_offset=a.get("rotary_offset", 0),
        qk_norm_epsilon=a.get("qk_norm_epsilon", 1e-6), kv_cache_layout=a.get("kv_cache_layout", "SEPARATE"),
        v_head_size=a.get("v_head_size", 0), cache_type=invalid or cache_type,
        k_quant_type=a.get("k_quant_type", "NONE"), v_quant_type=a.get("v_quant_type", "NONE"),
        is_bf16=node.element_type == "bfloat16")


def _kv_scale(p: PagedProblem) -> str | None:
    """The target's `kv_scale` of a quantized cache (None: unquantized)."""
    if not p.quantized:
        return None
    return "per_channel" if p.k_quantization is KvQuantization.PER_CHANNEL else "per_tensor"


@dataclass(frozen=True, eq=False)
class Reader(NodeReader):
    """PagedAttention's node (`NodeReader`): ORT 1.31.1's schema and how attnws reads the node."""

    @property
    def index_inputs(self) -> tuple[int, ...]:
        """The int32 index inputs (type S): cumulative_sequence_length, past_seqlens, block_table,
        slot_mapping and attention_metadata."""
        return self.inputs_of("S")

    def role(self, index: int, axis: int, rank: int) -> str:
        """Return what input `index` axis `axis` is to the operator, in words."""
        if axis == 0 and index in (_QUERY, _KEY, _VALUE, _SLOT_MAPPING):
            return "the packed token count T"
        if index in (_KEY_CACHE, _VALUE_CACHE) and axis < 4:
            return ("the cache's block count", "the cache's block size", "the KV head count Nk",
                    "the head size H ((H + 1) / 2 for an int4 cache)")[axis]
        if index == _CUMULATIVE and axis == 0:
            return "B + 1, the length of cumulative_sequence_length"
        if index in (_PAST_SEQLENS, _BLOCK_TABLE) and axis == 0:
            return "the batch size B"
        if index == _BLOCK_TABLE and axis == 1:
            return "the block table's width M (blocks per sequence: L <= M * block_size)"
        if index in (_COS_CACHE, _SIN_CACHE) and axis < 2:
            return ("the rotary cache's positions", "half the rotary dimension")[axis]
        return "a dimension"

    def unmodelled(self, outputs: Sequence[str]) -> tuple[str, str]:
        """Return ("", ""): the cache outputs alias the caches and change no scratch."""
        return "", ""

    def output_shapes(self, node: NodeInputs, problem: Any) -> list[OutputType]:
        """Return output [T, N * Hv] (query's type; query's own shape where key is given and the
        layout is SEPARATE, or where the width does not divide), key_cache_out and
        value_cache_out shaped and typed as key_cache and value_cache, from the shapes alone
        (`problem` is not read); None where a shape is unknown."""
        hints, a = node.hints, node.attributes
        query = shape_of(hint_at(hints, _QUERY))
        output = None
        if query is not None and len(query) == 2 and min(query) >= 0:
            output = (node.elem_type(_QUERY), list(query))
            latent = a.get("kv_cache_layout", "SEPARATE") == "LATENT"
            n, nk = a.get("num_heads"), a.get("kv_num_heads")
            if (latent or hint_at(hints, _KEY) is MISSING) and isinstance(n, int) and n > 0:
                divisor = n if latent else n + 2 * (nk if isinstance(nk, int) else 0)
                if divisor > 0 and query[1] % divisor == 0:
                    h = query[1] // divisor
                    hv = (a.get("v_head_size", 0) or h) if latent else h
                    output = (node.elem_type(_QUERY), [query[0], n * hv])
        caches = [(node.elem_type(i), shape_of(hint_at(hints, i))) for i in (_KEY_CACHE, _VALUE_CACHE)]
        return [output, *((kind, list(c)) if c is not None and kind and min(c, default=0) >= 0 else None
                          for kind, c in caches)]

    def exact_dims(self, hints: Sequence[Hint], attributes: dict[str, Any]) -> frozenset[str]:
        """Return the dimensions the node's static shapes fix: batch (cumulative_sequence_length's,
        past_seqlens' or block_table's dimension 0), tokens (query's dimension 0), head_size
        (query's width or key_cache's dimension 3), block_size (key_cache's dimension 1),
        max_blocks (block_table's dimension 1); N and Nk are attributes, exact in every target."""
        places = {"batch": ((_CUMULATIVE, 0), (_PAST_SEQLENS, 0), (_BLOCK_TABLE, 0)), "tokens": ((_QUERY, 0),),
                  "head_size": ((_QUERY, 1), (_KEY_CACHE, 3)), "block_size": ((_KEY_CACHE, 1),),
                  "max_blocks": ((_BLOCK_TABLE, 1),)}
        return frozenset(name for name, at in places.items() if any(static_dim(hints, i, axis) for i, axis in at))

    def dims_read(self, hints: Sequence[Hint]) -> dict[str, int]:
        """Return the target dimensions the input shapes give (-1 where symbolic), each where the
        node has it: batch (cumulative_sequence_length's length less one, else past_seqlens'),
        tokens (query's dimension 0), kv_heads, block_size (key_cache's dimensions 2 and 1) and
        max_blocks (block_table's dimension 1). S and L are no shape's: `_sizes`."""
        cumulative, past = dim_at(hints, _CUMULATIVE, 0), dim_at(hints, _PAST_SEQLENS, 0)
        read = {"batch": cumulative - 1 if isinstance(cumulative, int) and cumulative > 0 else past,
                "tokens": dim_at(hints, _QUERY, 0), "kv_heads": dim_at(hints, _KEY_CACHE, 2),
                "block_size": dim_at(hints, _KEY_CACHE, 1), "max_blocks": dim_at(hints, _BLOCK_TABLE, 1)}
        return {name: value for name, value in read.items() if value is not None}

    def estimate(self, node: NodeInputs, config: Any, session: Session) -> Estimate:
        """Return attnws's own bound for the node at its largest step (`_node_problem`): every
        scratch request of each reachable route at its largest over every step up to the maxima,
        the note saying how S and L were read; unavailable with ORT's error where ORT refuses the
        node, or with the bound's reason (a reachable route no recipe sizes)."""
        unknown = [name for name, kind in (("query", node.element_type), ("key_cache", node.elem_type(_KEY_CACHE)))
                   if not kind]
        if unknown:
            return unavailable(self.op, f"the element type of {' and '.join(unknown)} is unknown after inference: "
                                        "attnws reads the node's types from them")
        fp4 = [name for name in ("k_cache_dtype", "v_cache_dtype") if node.attributes.get(name) == "float4e2m1"]
        if fp4:
            return unavailable(self.op, f"{fp4[0]} 'float4e2m1': attnws models no packed fp4 cache",
                               error="unsupported")
        try:
            p = _node_problem(node)
        except WorkspaceError as error:
            return unavailable(self.op, str(error), error=error.status)
        try:
            outcome: Any = bound(p, config)
        except WorkspaceError as error:
            outcome = error
        est = own_estimate_record(p, config, outcome)
        if not est.ok:
            return est
        words = (f"the graph states neither S nor L (the step's values: cumulative_sequence_length, past_seqlens"
                 f"{', attention_metadata' if p.has_metadata else ''}): read at their largest the shapes allow, "
                 f"S = min(T, M * block_size) = {p.max_query_len:,} and L = M * block_size = {p.max_kv_len:,}")
        return replace(est, note=f"{est.note}; {words}")

    def target_fields(self, problem: Any, dim: DimFactory, exact_heads: bool, session: Session) -> dict[str, Any]:
        """Return the target's N and Nk exact (attributes), H, the block size and M exact where the
        model fixes them (else ranges, which the family's target refuses: they are the model's
        and its cache's), T over 1..its maximum (exact where static), L over 1..M * block_size, and
        the node's flags (B and S are the shared `Target` fields the report fills)."""
        p = problem
        latent_hv = p.latent and p.v_head_size != p.head_size
        return {"heads": DimRange(p.num_heads, p.num_heads), "head_size": dim("head_size", p.head_size),
                "v_head_size": DimRange(p.v_head_size, p.v_head_size) if latent_hv else None,
                "kv_heads": DimRange(p.kv_num_heads, p.kv_num_heads), "tokens": dim("tokens", p.token_count),
                "kv_len": dim("kv_len", p.max_kv_len), "block_size": dim("block_size", p.block_size),
                "max_blocks": dim("max_blocks", p.max_blocks_per_sequence),
                "paged_format": PagedFormat.PACKED_QKV if p.is_packed_qkv else PagedFormat.SEPARATE,
                "bf16": p.is_bf16, "rotary": p.do_rotary,
                "window": None if p.local_window_size == -1 else p.local_window_size, "softcap": p.softcap or None,
                "head_sink": True if p.has_head_sink else None, "qk_norm": p.use_qk_norm, "kv_quant": p.cache_type,
                "kv_scale": _kv_scale(p), "latent": p.latent, "non_causal": not p.causal,
                "metadata": "bounds" if p.has_metadata else None}

    def unstated(self, estimate: Estimate, target: Target) -> str:
        """Return why the target does not state the node: its K and V scales differ in kind (a
        target has one `kv_scale`), or the node read at the target's maxima differs from the node
        in a field the bound reads (the cache's block count and slot_mapping it does not)."""
        p = estimate.problem
        if not p.latent and p.k_quantization is not p.v_quantization:
            return "the solver's box has one scale kind for both caches; the node's K and V scales differ"
        at = runtime_problem(target.max_geometry())
        differ = [f.name for f in fields(p) if f.name not in _GRAPH_ONLY and getattr(at, f.name) != getattr(p, f.name)]
        return f"the solver's box cannot state the node's {', '.join(differ)}" if differ else ""

    def absent_dim(self, dim: str) -> str:
        """Return why the node has no past or key/value length of MultiHeadAttention's kind."""
        return {"kv_seq": f"{self.op_type}'s key length is kv_len (L), its longest sequence's past plus new tokens",
                "past": f"{self.op_type}'s past is in its paged cache: L counts it (at most M * block_size)"
                }.get(dim, "")


READERS = (
    Reader(op=Op.PAGED,
           attribute_types={"num_heads": _A.INT, "kv_num_heads": _A.INT, "scale": _A.FLOAT, "softcap": _A.FLOAT,
                            "local_window_size": _A.INT, "is_causal": _A.INT, "do_rotary": _A.INT,
                            "rotary_interleaved": _A.INT, "rotary_offset": _A.INT, "qk_norm_epsilon": _A.FLOAT,
                            "kv_cache_layout": _A.STRING, "v_head_size": _A.INT, "k_cache_dtype": _A.STRING,
                            "v_cache_dtype": _A.STRING, "k_quant_type": _A.STRING, "v_quant_type": _A.STRING},
           required_attributes=("num_heads", "kv_num_heads"),
           required_inputs=(_QUERY, _KEY_CACHE, _CUMULATIVE, _PAST_SEQLENS, _BLOCK_TABLE),
           # query key value key_cache value_cache cumulative_sequence_length past_seqlens block_table
           # cos_cache sin_cache slot_mapping head_sink q_norm_weight k_norm_weight k_scale v_scale
           # attention_metadata
           input_types=("T", "T", "T", "T_CACHE", "T_CACHE", "S", "S", "S", "T", "T", "S", "T", "T", "T",
                        "T_KV_SCALE", "T_KV_SCALE", "S"),
           type_constraints={"T": ("float16", "bfloat16"),
                             "T_CACHE": ("float16", "bfloat16", "int8", "float8e4m3fn", "uint8"),
                             "T_KV_SCALE": ("float",), "S": ("int32",)},
           output_names=("output", "key_cache_out", "value_cache_out"), any_domain=False,
           # ORT reads these as true only when exactly 1 (the constructor's `== 1`, fork copy
           # ykhrustalev f5c8354f; docs/research/paged-attention.md §3.3)
           flag_attributes=("is_causal", "do_rotary", "rotary_interleaved"),
           value_advice=_LENGTHS_ADVICE),
)
