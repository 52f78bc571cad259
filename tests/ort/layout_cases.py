"""GroupQueryAttention steps over both cache layouts, and ONNX Runtime's CPU verdict on each.

A case is one step of a cache: B sequences, S new tokens, a past of P rows, the total length T,
and the layout: "shared" (past_key / present_key and past_value / present_value bound to one
OrtValue each with an IOBinding, as onnxruntime-genai binds them) or "separate" (a plain
`InferenceSession.run`: present is a new tensor). `generate_cases(seed, count)` draws them from
one `random.Random(seed)`, T mostly on the boundaries that decide (P + S, P, P - 1, S) and
sometimes anywhere in 1..P + S + 2.

`ort_verdicts` runs them on the CPU execution provider in a child process (`python -m
tests.ort.layout_cases CASES START`), restarted after a crash, as `engine.py` does: the inputs are
zeros except seqlens_k (T - 1) and total_sequence_length (T).
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import numpy as np

from . import engine
from .engine import OrtVerdict
from .gqa_cases import GqaCase, feeds, model

SEED = 20261205
CASE_COUNT = 240
LAYOUTS = ("shared", "separate")
HEADS = ((4, 2, 16), (2, 2, 32), (8, 1, 16))  # (N, Nk, H)


@dataclass(frozen=True)
class LayoutCase:
    """One step: B, S, P, T, the heads (N, Nk, H) and the layout (`LAYOUTS`)."""

    batch: int
    seq: int
    past: int
    total: int
    num_heads: int
    kv_num_heads: int
    head_size: int
    layout: str

    def node(self) -> GqaCase:
        """The step as a one-node GroupQueryAttention case: query [B, S, N H], key and value
        [B, S, Nk H], past [B, Nk, P, H], seqlens_k [B], a scalar T, the present outputs."""
        b, s, n, nk, h = self.batch, self.seq, self.num_heads, self.kv_num_heads, self.head_size
        shapes: list[tuple[int, ...] | None] = [None] * 16
        shapes[:7] = [(b, s, n * h), (b, s, nk * h), (b, s, nk * h), (b, nk, self.past, h), (b, nk, self.past, h),
                      (b,), ()]
        return GqaCase(self.describe(), n, nk, (), "same", tuple(shapes), self.total, True, frozenset())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return (f"{self.layout} B={self.batch} S={self.seq} P={self.past} T={self.total} "
                f"N={self.num_heads} Nk={self.kv_num_heads} H={self.head_size}")


def generate_cases(seed: int, count: int) -> list[LayoutCase]:
    """Return `count` cases drawn from `random.Random(seed)`, each step in both layouts in turn."""
    rng = random.Random(seed)
    cases: list[LayoutCase] = []
    while len(cases) < count:
        b, s, p = rng.choice((1, 1, 2, 3)), rng.choice((1, 1, 2, 4)), rng.randint(0, 8)
        t = rng.choice((p + s, p + s, p, p - 1, s, rng.randint(1, p + s + 2)))
        n, nk, h = rng.choice(HEADS)
        cases += [LayoutCase(b, s, p, max(t, 1), n, nk, h, layout) for layout in LAYOUTS]
    return cases[:count]


def ort_verdicts(cases: Sequence[LayoutCase]) -> list[OrtVerdict]:
    """Return ORT's verdict for every case, in order (see the module)."""
    return engine.ort_verdicts(cases, child="tests.ort.layout_cases")


def _run(ort: ModuleType, case: LayoutCase) -> OrtVerdict:
    """Create the session and run the step in its layout."""
    node = case.node()
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model(node), options, providers=["CPUExecutionProvider"])
    run_options = ort.RunOptions()
    run_options.log_severity_level = 4
    inputs = feeds(node)
    try:
        if case.layout == "separate":
            session.run(None, inputs, run_options)
        else:
            session.run_with_iobinding(_shared_binding(ort, session, inputs), run_options)
    except Exception as error:  # noqa: BLE001  (ORT's pybind exceptions share no base but Exception)
        return OrtVerdict(False, "run", _message(error))
    return OrtVerdict(True, "ran")


def _message(error: Exception) -> str:
    """ORT's status message: `engine.ort_message`'s for a plain run; a run with an IOBinding raises
    RuntimeError("Error in execution: ... Status Message: TEXT")."""
    text = str(error)
    if text.startswith("Error in execution: "):
        return text.split("Status Message: ", 1)[-1].strip()
    return engine.ort_message(error)


def _shared_binding(ort: ModuleType, session: Any, inputs: dict[str, np.ndarray]) -> Any:
    """An IOBinding whose present_key / present_value are the past_key / past_value OrtValues."""
    binding = session.io_binding()
    for name, array in inputs.items():
        if name in ("past_key", "past_value"):
            value = ort.OrtValue.ortvalue_from_numpy(array)
            binding.bind_ortvalue_input(name, value)
            binding.bind_ortvalue_output(name.replace("past", "present"), value)
        else:
            binding.bind_cpu_input(name, array)
    binding.bind_output("output")
    return binding


def main(argv: Sequence[str]) -> None:
    """Child process: print one JSON verdict per line for cases[start:] of the JSON file argv[0]."""
    import onnxruntime

    cases = [LayoutCase(**data) for data in json.loads(Path(argv[0]).read_text())]
    for case in cases[int(argv[1]):]:
        print(json.dumps(asdict(_run(onnxruntime, case))), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
