"""The command line's own times, one run, not part of pytest:
`python3 bench/bench_cli.py [startup] [prove] [targets]` (startup and prove by default).

1. startup: `attnws --version` and `attnws --help`, each run REPEATS times as a user runs them (a
   new process), their median and best wall seconds, and which heavy libraries (z3, onnx, numba,
   numpy, matplotlib) building the parser loads (none should);
2. prove: the README's main job, `attnws prove` on the built-in default target, its median wall
   seconds over REPEATS runs;
3. targets: `attnws prove --target NAME` on every committed target of every family (the default
   theorems and each memory pattern), one run each: wall seconds, the verdict line, and the
   slowest target.
Everything runs as an installed `attnws` would: the console script of this interpreter's
environment, each command in a process of its own.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

REPEATS = 9
HEAVY = ("z3", "onnx", "numba", "numpy", "matplotlib")
ATTNWS = [sys.executable, "-m", "attnws"]


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    """Return (wall seconds, the finished process) of one attnws command."""
    start = time.perf_counter()
    done = subprocess.run([*ATTNWS, *argv], capture_output=True, text=True)
    return time.perf_counter() - start, done


def startup() -> None:
    for argv in (["--version"], ["--help"]):
        seconds = [timed(argv)[0] for _ in range(REPEATS)]
        print(f"attnws {' '.join(argv)}: median {statistics.median(seconds):.3f} s, best {min(seconds):.3f} s "
              f"({REPEATS} runs)")
    probe = ("import sys, attnws.cli as c; c.build_parser(); "
             f"print([m for m in {HEAVY!r} if m in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"heavy libraries loaded to build the parser: {loaded}")


def prove() -> None:
    seconds = []
    for _ in range(REPEATS):
        elapsed, done = timed(["prove"])
        seconds.append(elapsed)
    print(f"attnws prove (the default target): median {statistics.median(seconds):.2f} s, best {min(seconds):.2f} s "
          f"({REPEATS} runs), exit {done.returncode}")


def targets() -> None:
    folder = Path(__file__).resolve().parents[1] / "attnws" / "proofs" / "targets"
    rows = []
    for path in sorted(folder.glob("*.json")):
        elapsed, done = timed(["prove", "--target", path.stem])
        verdict = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()
        rows.append((elapsed, path.stem, verdict))
        print(f"{elapsed:7.1f} s  {path.stem}: {verdict}", flush=True)
    slowest = max(rows)
    print(f"committed targets: {len(rows)}, total {sum(r[0] for r in rows):.0f} s, slowest {slowest[1]} "
          f"{slowest[0]:.1f} s")


if __name__ == "__main__":
    parts = set(sys.argv[1:]) or {"startup", "prove"}
    if "startup" in parts:
        startup()
    if "prove" in parts:
        prove()
    if "targets" in parts:
        targets()
