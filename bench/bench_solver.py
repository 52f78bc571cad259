"""Solver cost against exhaustive enumeration, and proof time as the sequence bound grows.

Run: python3 bench/bench_solver.py  (not part of pytest). Prints the numbers of this run:
1. safe_bound by Z3 versus `estimate_exact` at every (B, S) of a small box (T = 1 fixed so the
   box is enumerable), and the ratio exhaustive / solver;
2. all theorems on a PMHA fp16 target with S up to 512, 4096 and 65535, and each time's ratio to
   the first.
"""

from __future__ import annotations

import time

from attnws.solver.gateway import Verdict
from attnws.solver.results import context
from attnws.solver.theorems import THEOREMS, prove_target
from attnws.spec.estimate import estimate_exact, estimate_geometry
from attnws.spec.target import target_from_dict


def exhaustive_vs_solver(batch: int, seq: int) -> None:
    target = target_from_dict({"name": f"bench-b{batch}-s{seq}", "op": "pmha", "dtype": "fp32", "batch": f"1..{batch}",
                               "seq": f"1..{seq}", "tokens": "1..1", "heads": "12..12", "head_size": "64..64"})
    bound = estimate_geometry(target.max_geometry(), target.config).total_workspace_bytes
    start = time.perf_counter()
    worst = max(estimate_exact(target.geometry(batch=b, seq=s, heads=12, head_size=64, tokens=1),
                               target.config).total_workspace_bytes
                for b in range(1, batch + 1) for s in range(1, seq + 1))
    enumerated = time.perf_counter() - start
    start = time.perf_counter()
    result = THEOREMS["safe_bound"](context(target))
    solved = time.perf_counter() - start
    agree = (worst <= bound) == (result.verdict is Verdict.PROVED)
    print(f"B<={batch} S<={seq}: exhaustive {batch * seq} shapes {enumerated:.2f}s, Z3 {solved:.2f}s "
          f"({result.verdict.value}, agree={agree}), ratio {enumerated / solved:.1f}x")


def growth() -> None:
    first = None
    for seq in (512, 4096, 65535):
        target = target_from_dict({"name": f"bench-s{seq}", "op": "pmha", "dtype": "fp16", "batch": "1..32",
                                   "seq": f"1..{seq}", "heads": "12..12", "head_size": "64..64", "sm": 90})
        start = time.perf_counter()
        results = prove_target(target, names=list(THEOREMS))
        seconds = time.perf_counter() - start
        first = first or seconds
        verdicts = ",".join(f"{r.theorem}={r.verdict.value}" for r in results)
        print(f"S<={seq}: all theorems {seconds:.2f}s (x{seconds / first:.2f} of S<=512): {verdicts}")


if __name__ == "__main__":
    for b, s in ((4, 256), (16, 512)):
        exhaustive_vs_solver(b, s)
    growth()
