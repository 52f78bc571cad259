"""One GroupQueryAttention node as attnws describes it while the family is in progress: a `GqaBox`
(the node's attributes and shapes fixed, B, S and T over ranges), read from a target document
(`gqa_target_from_dict`) or a shape record, and said in words. Every layer reads nodes here:
the solver proves over a box (`attnws.solver.gqa_proofs`), the kernels run one of its shapes.

A box is one decoder node as onnxruntime-genai lays it out: query [B, S, N * H] (or packed
[B, S, (N + 2Nk) * H]), key and value [B, S, Nk * H], a past / present cache of P rows per
(batch, KV head) sharing one buffer (P = max length; with a windowed cache, P = the window),
seqlens_k [B] and the scalar total_sequence_length T.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..documents import DocumentError, Fields
from ..domain import CONCRETE
from ..errors import InvalidArgument, WorkspaceError
from ..hints import Hint
from ..options import RuntimeConfig
from ..printable import printable
from ..target import DimRange
from .inputs import build_from_hints, node_hints
from .problem import GqaProblem

KV_QUANT = {"none": (0, "same"), "int8": (8, "int8"), "int4": (4, "uint8"), "fp8": (8, "fp8")}  # bits, T_CACHE


@dataclass(frozen=True)
class GqaBox:
    """One GroupQueryAttention node: B, S and T range over their boxes, the rest is fixed.
    `past` is the cache capacity P; `max_total_sequence_length` the session option ORT's
    estimator needs for a non-windowed cache (0: unset). `patterns`: named sub-boxes."""

    name: str
    num_heads: int
    kv_num_heads: int
    head_size: int
    past: int
    batch: DimRange
    seq: DimRange
    total_seq: DimRange
    config: RuntimeConfig = field(default_factory=RuntimeConfig)
    is_bf16: bool = False
    is_packed_qkv: bool = False
    do_rotary: bool = False
    local_window_size: int = -1
    sliding_window_cache: bool = False
    softcap: float = 0.0
    smooth_softmax: bool = False
    head_sink: bool = False
    kv_quant: str = "none"  # none, int8, int4 or fp8 (per-tensor scales)
    env: tuple[tuple[str, str], ...] = ()  # the environment the configuration was made with
    expect_unavailable_estimate: bool = False  # the target says ORT declares no estimate for it
    max_total_sequence_length: int = 0
    description: str = ""
    patterns: tuple[tuple[str, dict[str, DimRange]], ...] = ()

    def hints(self, batch: Any, seq: Any) -> list[Hint]:
        """Return the node's positional input shapes (element counts) at batch B and query length S."""
        n, nk, h = self.num_heads, self.kv_num_heads, self.head_size
        bits, _ = KV_QUANT[self.kv_quant]
        cache = [batch, nk, self.past, h // 2 if bits == 4 else h]
        shapes: dict[str, Any] = dict(past_key=cache, past_value=cache, seqlens_k=[batch], total_sequence_length=())
        if self.is_packed_qkv:
            shapes.update(query=[batch, seq, (n + 2 * nk) * h])
        else:
            shapes.update(query=[batch, seq, n * h], key=[batch, seq, nk * h], value=[batch, seq, nk * h])
        if self.do_rotary:
            rotary = [max(self.past, self.total_seq.hi), h // 2]
            shapes.update(cos_cache=rotary, sin_cache=rotary)
        if self.head_sink:
            shapes.update(head_sink=[n])
        if bits:
            shapes.update(k_scale=[1], v_scale=[1])
        return node_hints(**shapes)

    def problem(self, d: Any, batch: Any, seq: Any, total: Any) -> GqaProblem:
        """The builder's problem for these dimensions (raises or records ORT's checks)."""
        bits, cache_dtype = KV_QUANT[self.kv_quant]
        quant = {} if not bits else dict(k_quant_type="PER_TENSOR", v_quant_type="PER_TENSOR", kv_cache_bit_width=bits,
                                         cache_dtype=cache_dtype)
        return build_from_hints(
            self.hints(batch, seq), total, num_heads=self.num_heads, kv_num_heads=self.kv_num_heads,
            local_window_size=self.local_window_size, sliding_window_cache=int(self.sliding_window_cache),
            do_rotary=int(self.do_rotary), softcap=self.softcap, smooth_softmax=int(self.smooth_softmax),
            is_bf16=self.is_bf16, d=d, **quant)

    def at_maxima(self) -> GqaProblem:
        """The node as ORT's estimator reads it: every dimension at its bound."""
        return replace(self.problem(CONCRETE, self.batch.hi, self.seq.hi, self.seq.hi),
                       total_sequence_length=self.total_seq.hi)


def check_box(box: GqaBox) -> None:
    """Refuse a box whose largest node ORT rejects: the message is ORT's."""
    try:
        box.at_maxima()
    except WorkspaceError as error:
        raise InvalidArgument(f"{box.name}: the node at its maxima is not valid: {error}") from None


GQA_TARGET_KEYS = {"name", "description", "source", "heads", "kv_heads", "head_size", "past", "batch", "seq",
                   "total_seq", "dtype", "window", "sliding_window_cache", "rotary", "packed_qkv", "softcap",
                   "smooth_softmax", "head_sink", "kv_quant", "max_total_seq", "sm", "sm_count", "sdpa_kernel", "env",
                   "patterns", "expect_unavailable_estimate"}


def gqa_target_from_dict(data: Any, what: str, default_name: str) -> GqaBox:
    """Read a GroupQueryAttention target document (keys as in `GQA_TARGET_KEYS`)."""
    f = Fields(data, what, known=GQA_TARGET_KEYS)

    def dim(key: str) -> DimRange:
        raw = f.raw(key)
        if raw is None:
            raise DocumentError(f"{what}: field {key} is required (N or \"LO..HI\")")
        return DimRange.parse(raw, f"{what}: field {key}")

    def exact(key: str, required: bool = True) -> Any:
        return f.integer(key, None, required=required, lo=1)

    softcap = f.raw("softcap", 0)
    if not isinstance(softcap, (int, float)) or isinstance(softcap, bool) or softcap < 0:
        raise DocumentError(f"{what}: field softcap = {softcap!r}; expected a non-negative number")
    env = f.string_map("env")
    config = RuntimeConfig.make(sm=f.integer("sm", 80), sm_count=f.integer("sm_count", None, optional=True, lo=1),
                                sdpa_kernel=f.integer("sdpa_kernel", 0), env=env)
    patterns = f.raw("patterns") or {}
    if not isinstance(patterns, dict):
        raise DocumentError(f"{what}: field patterns must be an object of name -> {{dimension: range}}")
    read_patterns = tuple((pname, {k: DimRange.parse(v, f"{what}: pattern {pname}.{k}") for k, v in dims.items()
                                   if k in ("batch", "seq", "total_seq") or _bad_pattern(what, pname, k)})
                          for pname, dims in patterns.items())
    box = GqaBox(
        name=f.string("name", default_name), num_heads=exact("heads"), kv_num_heads=exact("kv_heads"),
        head_size=exact("head_size"), past=exact("past"), batch=dim("batch"), seq=dim("seq"),
        total_seq=dim("total_seq"), config=config, is_bf16=f.string("dtype", "fp16", ["fp16", "bf16"]) == "bf16",
        is_packed_qkv=f.boolean("packed_qkv"), do_rotary=f.boolean("rotary"),
        local_window_size=f.integer("window", -1), sliding_window_cache=f.boolean("sliding_window_cache"),
        softcap=float(softcap), smooth_softmax=f.boolean("smooth_softmax"), head_sink=f.boolean("head_sink"),
        kv_quant=f.string("kv_quant", "none", list(KV_QUANT)), max_total_sequence_length=f.integer("max_total_seq", 0),
        description=f.string("description", ""), patterns=read_patterns, env=tuple(sorted(env.items())),
        expect_unavailable_estimate=f.boolean("expect_unavailable_estimate"))
    check_box(box)
    return box


def _bad_pattern(what: str, pattern: str, key: str) -> bool:
    raise DocumentError(f"{what}: pattern {pattern} names {key!r}; a pattern narrows batch, seq or total_seq")


def box_text(box: GqaBox) -> str:
    flags = [f"B {box.batch}", f"S {box.seq}", f"T {box.total_seq}", f"cache {box.past:,}",
             f"N {box.num_heads} / Nk {box.kv_num_heads}", f"H {box.head_size}", "bf16" if box.is_bf16 else "fp16",
             f"sm{box.config.device.sm} ({box.config.device.sm_count} SMs)"]
    flags += [w for w, on in ((f"window {box.local_window_size}", box.local_window_size > 0),
                              ("windowed cache", box.sliding_window_cache), ("rotary", box.do_rotary),
                              ("packed QKV", box.is_packed_qkv), (f"softcap {box.softcap:g}", box.softcap > 0),
                              ("smooth softmax", box.smooth_softmax), ("head sink", box.head_sink),
                              (f"KV {box.kv_quant}", box.kv_quant != "none")) if on]
    return f"{printable(box.name)}: " + ", ".join(flags)




RECORD_LABELS = ("label", "pair", "role")  # what a shapes document may add to a record, in words


def shape_record(box: GqaBox, batch: int, seq: int, total: int, env: dict[str, str] | None = None,
                 **labels: Any) -> dict[str, Any]:
    """Return one concrete shape of the box as a shapes-document record (`"op": "gqa"`): the
    node's target fields with exact B, S and T, its device and environment (`env` overrides the
    box's), and the labels given."""
    config = box.config if env is None else RuntimeConfig.make(
        sm=box.config.device.sm, sm_count=box.config.device.sm_count, sdpa_kernel=box.config.options.sdpa_kernel,
        env={**dict(box.env), **env})
    return {"op": "gqa", "name": box.name, "heads": box.num_heads, "kv_heads": box.kv_num_heads,
            "head_size": box.head_size, "past": box.past, "batch": batch, "seq": seq, "total_seq": total,
            "dtype": "bf16" if box.is_bf16 else "fp16", "window": box.local_window_size,
            "sliding_window_cache": box.sliding_window_cache, "rotary": box.do_rotary, "packed_qkv": box.is_packed_qkv,
            "softcap": box.softcap, "smooth_softmax": box.smooth_softmax, "head_sink": box.head_sink,
            "kv_quant": box.kv_quant, "max_total_seq": box.max_total_sequence_length, "sm": config.device.sm,
            "sm_count": config.device.sm_count, "sdpa_kernel": config.options.sdpa_kernel,
            "env": {**dict(box.env), **(env or {})}, **labels}


def read_shape_record(record: Any, what: str = "shape record") -> tuple[GqaBox, int, int, int, dict[str, Any]]:
    """Return (the node, B, S, T, its labels) of a `shape_record`; a malformed record is a
    DocumentError naming the field."""
    if not isinstance(record, dict) or record.get("op") != "gqa":
        raise DocumentError(f"{what}: not a GroupQueryAttention record (\"op\": \"gqa\")")
    fields = {k: v for k, v in record.items() if k not in ("op", *RECORD_LABELS)}
    for name in ("batch", "seq", "total_seq"):
        value = fields.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise DocumentError(f"{what}: field {name} = {value!r}; a shape record gives one non-negative integer")
        fields[name] = f"{value}..{value}"
    box = gqa_target_from_dict(fields, what, str(record.get("name", "shape")))
    return box, box.batch.hi, box.seq.hi, box.total_seq.hi, {k: record[k] for k in RECORD_LABELS if k in record}
