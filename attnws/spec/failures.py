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
from typing import Any, Callable

from .dispatch import dispatch
from .errors import InternalError
from .estimate import runtime_problem
from .families import FAMILIES, op_fields
from .hints import Geometry
from .options import RuntimeConfig
from .problem import Op
from .runtime_failures import FAILURE_KINDS

# The operator forms the TRT runner serves, each family's (`failures.TRT_FORMS`: a name, the
# operator and its `Geometry` fields).
FORMS = tuple(form for family in FAMILIES for form in family.failures.TRT_FORMS)
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
        return (failed.backends[0].value if failed.backends else "no route"), ran.backends[0].value, failed.failure

    def as_dict(self) -> dict[str, object]:
        route, neighbour_route, message = self.check()
        return {"kind": self.kind, "where": self.where, "condition": self.condition, "sm": self.sm,
                "failing": shape_text(self.failing), "route": route, "running": shape_text(self.running),
                "running_route": neighbour_route, "message": message}


def _example_geometry(op: Op, fields: dict[str, Any]) -> Geometry:
    """A failure example's shape: B = S = N = 1, H = 64, fp16, but for the fields it gives."""
    fields = dict(fields)
    return Geometry(op, fields.pop("element_size", 2), **{"batch": 1, "seq": 1, "heads": 1, "head_size": 64, **fields})


# In the order of the failure kinds (each family's, then a cascade with no route).
EXAMPLES = tuple(sorted((Example(kind, where, condition, _example_geometry(family.ops[0], failing),
                                 _example_geometry(family.ops[0], running), *sm)
                         for family in FAMILIES for kind, where, condition, failing, running, *sm in family.failures.EXAMPLES),
                        key=lambda e: FAILURE_KINDS.index(e.kind)))


def shape_text(g: Geometry) -> str:
    """Return the dimensions of an example as a person reads them."""
    dims, flags = op_fields(g.op).example_words(g, "fp16" if g.element_size == 2 else "fp32")
    return ", ".join([f"B = {g.batch}", f"S = {g.seq}", *dims, f"N = {g.heads}", f"H = {g.head_size}", *flags])


def _ranges(values: list[int]) -> tuple[tuple[int, int], ...]:
    """Return the inclusive runs of consecutive integers in the sorted list."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return tuple(runs)


def failure_row(form: str, op: Op, flags: Callable[[int], dict[str, Any]], sm: int, head_size: int,
                max_seq: int) -> FailureRow:
    """Return where dispatch picks the TRT runner that then has no kernel, for S in 1..max_seq
    (`flags(S)`: the form's Geometry fields at S)."""
    config = RuntimeConfig.make(sm=sm)
    failing, message = [], ""
    for seq in range(1, max_seq + 1):
        g = Geometry(op, 2, batch=1, seq=seq, heads=1, head_size=head_size, **flags(seq))
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
        "picked the route and the workspace was allocated: the run returns ORT's error and nothing falls back;",
        "`no_route` is GroupQueryAttention's cascade passing every route over, before any allocation.",
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
