"""Where ONNX Runtime 1.31.1 picks a route and the run then fails: a table for an upstream report.

Two parts, both computed by the spec's concrete dispatch (`attnws.spec.runtime_failures` holds
the conditions and their sources):
- the TRT fused runner swept over every operator form, device with TRT kernels, head size and
  sequence length up to a bound: where IsValid holds and the runner has no kernel ("Failed to
  find kernel"). ORT 1.31.1 has none (its kSM_80 table has d = 32 since 2023); before August
  2023, head size 32 failed on sm80 and sm89.
- one row per other failure kind: the shape closest to the threshold where dispatch picks the
  route and the run fails, and its neighbour one step below, which runs. Each row's two shapes
  are dispatched when the table is built, so a row whose shapes do not behave as stated is an
  error, never a line of the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dispatch import dispatch
from .errors import InternalError
from .estimate import runtime_problem
from .hints import Geometry
from .mha.problem import MaskType, MhaFormat
from .options import RuntimeConfig
from .problem import Op
from .packed.problem import QkvFormat

FORMS = (("PackedAttention", Op.PA, {}),
         ("PackedMultiHeadAttention, packed QKV", Op.PMHA, {"pmha_format": QkvFormat.PACKED}),
         ("PackedMultiHeadAttention, separate Q/K/V", Op.PMHA, {"pmha_format": QkvFormat.SEPARATE}),
         ("MultiHeadAttention, separate Q/K/V, [B] key-length mask", Op.MHA, {"mask": MaskType.KEY_SEQ_LEN}))
SMS = (75, 80, 86, 89)  # the devices with TRT kernels; sm90 and sm120 never pick the runner
HEAD_SIZES = (16, 32, 40, 64, 80, 128, 160, 256)


@dataclass(frozen=True)
class FailureRow:
    """One (form, sm, head size) of the TRT sweep: the inclusive S ranges where ORT fails."""

    form: str
    sm: int
    head_size: int
    ranges: tuple[tuple[int, int], ...]
    message: str

    def as_dict(self) -> dict[str, object]:
        return {"form": self.form, "sm": self.sm, "head_size": self.head_size,
                "ranges": [list(r) for r in self.ranges], "message": self.message}


@dataclass(frozen=True)
class Example:
    """One failure kind: where it happens, in words, and a failing shape with a running neighbour."""

    kind: str
    where: str
    condition: str
    failing: Geometry
    running: Geometry
    sm: int = 80

    def check(self) -> tuple[str, str, str]:
        """Return (failing route, running route, ORT's error) after dispatching both shapes;
        raise InternalError when they do not behave as the row states."""
        config = RuntimeConfig.make(sm=self.sm)
        failed, ran = (dispatch(runtime_problem(g), config) for g in (self.failing, self.running))
        if failed.failure_kind != self.kind or ran.failure:
            raise InternalError(f"the {self.kind} example does not fail where stated: {failed.failure_kind or 'runs'}, "
                                f"then {ran.failure_kind or 'runs'}")
        return failed.backends[0].value, ran.backends[0].value, failed.failure

    def as_dict(self) -> dict[str, object]:
        route, neighbour_route, message = self.check()
        return {"kind": self.kind, "where": self.where, "condition": self.condition, "sm": self.sm,
                "failing": shape_text(self.failing), "route": route, "running": shape_text(self.running),
                "running_route": neighbour_route, "message": message}


def _mha(**dims: Any) -> Geometry:
    flags = {k: dims.pop(k) for k in ("mha_format", "mask", "unidirectional", "attn_bias") if k in dims}
    return Geometry(Op.MHA, dims.pop("e", 2), **{"batch": 1, "seq": 1, "heads": 1, "head_size": 64, **dims}, **flags)


EXAMPLES = (
    Example("unpack_block_limit", "MultiHeadAttention, packed KV or packed QKV, on Flash, MEA, cuDNN or unfused",
            "(H / w) * N > 1024 threads per block (w = 4 when H % 4 == 0, else 2 when even, else 1)",
            _mha(kv_seq=1, heads=33, head_size=128, mha_format=MhaFormat.PACKED_KV),
            _mha(kv_seq=1, heads=32, head_size=128, mha_format=MhaFormat.PACKED_KV)),
    Example("mea_bias_alignment", "MultiHeadAttention with an attention bias, on MEA",
            "T = P + L not a multiple of 8 (fp16) or 4 (fp32, sm80 and newer); dispatch tests S only",
            _mha(seq=8, kv_seq=9, attn_bias=True), _mha(seq=8, kv_seq=8, attn_bias=True)),
    Example("causal_mask_1d", "MultiHeadAttention, unidirectional, [B] or [3B + 2] mask, on unfused",
            "T > 1024", _mha(kv_seq=1025, mask=MaskType.KEY_SEQ_LEN, unidirectional=True),
            _mha(kv_seq=1024, mask=MaskType.KEY_SEQ_LEN, unidirectional=True)),
    Example("softmax_shared_memory", "MultiHeadAttention, [B, T] or [B, S, T] mask (or causal without one), on unfused",
            "T >= 12273: 4 * T + 64 bytes of shared memory exceed the default 48 KiB",
            _mha(e=4, kv_seq=12273, mask=MaskType.KEY_PADDING), _mha(e=4, kv_seq=12272, mask=MaskType.KEY_PADDING)),
    Example("mea_offsets_int32", "MultiHeadAttention, [3B + 2] mask, on MEA",
            "B * S or B * T >= 2^31 (int32 sequence starts)",
            _mha(batch=65535, seq=32769, kv_seq=1, mask=MaskType.KEY_SEQ_LEN_START),
            _mha(batch=65535, seq=32768, kv_seq=1, mask=MaskType.KEY_SEQ_LEN_START)),
)


def shape_text(g: Geometry) -> str:
    """Return the dimensions of an example as a person reads them."""
    parts = [f"B = {g.batch}", f"S = {g.seq}"] + ([f"L = {g.l}"] if g.op is Op.MHA else [f"T = {g.t}"])
    parts += [f"N = {g.heads}", f"H = {g.head_size}", "fp16" if g.element_size == 2 else "fp32"]
    if g.op is Op.MHA:
        parts += [g.mha_format.value] + ([f"mask {g.mask.value}"] if g.mask is not MaskType.NONE else [])
        parts += ["unidirectional"] * g.unidirectional + ["attention bias"] * g.attn_bias
    return ", ".join(parts)


def _ranges(values: list[int]) -> tuple[tuple[int, int], ...]:
    """Return the inclusive runs of consecutive integers in the sorted list."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return tuple(runs)


def failure_row(form: str, op: Op, flags: dict[str, Any], sm: int, head_size: int, max_seq: int) -> FailureRow:
    """Return where dispatch picks the TRT runner that then has no kernel, for S in 1..max_seq
    (`flags`: the form's Geometry fields)."""
    config = RuntimeConfig.make(sm=sm)
    failing, message = [], ""
    for seq in range(1, max_seq + 1):
        g = Geometry(op, 2, batch=1, seq=seq, heads=1, head_size=head_size, tokens=None if op is Op.MHA else seq,
                     **flags)
        outcome = dispatch(runtime_problem(g), config)
        if outcome.failure_kind == "trt_no_kernel":
            failing.append(seq)
            message = message or outcome.failure
    return FailureRow(form, sm, head_size, _ranges(failing), message)


def failure_table(max_seq: int = 1024) -> list[FailureRow]:
    """Return one TRT-sweep row per form, device and head size (see the module docstring)."""
    return [failure_row(form, op, flags, sm, head, max_seq)
            for form, op, flags in FORMS for sm in SMS for head in HEAD_SIZES]


def failure_markdown(rows: list[FailureRow], max_seq: int) -> str:
    """Return the document: every failure kind with its checked example, then the TRT sweep."""
    lines = [
        "# Where ONNX Runtime 1.31.1 picks a route and then fails at run time",
        "",
        "Generated by `attnws ort-failures --markdown` (do not edit by hand). Each failure happens after dispatch",
        "picked the route and the workspace was allocated: the run returns ORT's error and nothing falls back.",
        "Each row's two shapes are dispatched by attnws when this document is built (default options); the",
        "conditions and their sources are in `attnws/spec/runtime_failures.py` and",
        "`docs/research/ort-1.31.1-pin.md`. PackedAttention and PackedMultiHeadAttention check their shapes",
        "before any kernel runs, so none of these reaches them.",
        "",
        "| failure | where | fails when | failing shape (route) | runs (route) |",
        "|---|---|---|---|---|",
    ]
    for example in EXAMPLES:
        row = example.as_dict()
        lines.append(f"| `{row['kind']}` | {row['where']} | {row['condition']} | {row['failing']} ({row['route']}) | "
                     f"{row['running']} ({row['running_route']}) |")
    failing = [r for r in rows if r.ranges]
    lines += ["", "## The TRT fused runner", "",
              f"Every operator form, sm{', sm'.join(map(str, SMS))}, head sizes {', '.join(map(str, HEAD_SIZES))} "
              f"and S = 1..{max_seq} (fp16, default options): where the runner's validity check passes and it has",
              "no kernel to launch ('Failed to find kernel'). ORT 1.31.1's kSM_80 table has head size 32 for every",
              "sequence bucket (since ORT commit 44101e877, 2023-08-31), and sm86 and sm89 load it; before that,",
              "head size 32 with S <= 384 failed on sm80 and sm89 (microsoft/onnxruntime issue #19259).", ""]
    if not failing:
        lines.append(f"None: the runner finds its kernel for all {len(rows)} (form, sm, head size) and every S.")
    for row in failing:
        spans = ", ".join(f"{lo}..{hi}" if lo != hi else str(lo) for lo, hi in row.ranges)
        lines.append(f"- {row.form}, sm{row.sm}, H = {row.head_size}: S in {spans}")
    return "\n".join(lines) + "\n"
