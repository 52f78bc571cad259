"""`attnws plot` benchmark, one run, not part of pytest: `python3 bench/bench_plot.py`.

A 1,000-point sweep (long-seq-pmha-fp32-sm80 over S, thinned to 1,000 points with every dispatch
threshold kept, proofs included) is computed once, then drawn to PNG and to SVG, best of REPEATS
each. Prints the points, the time to compute the series and each format's render time; the issue
asks for under 2 s a render.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attnws.spec.command_line import load_target_arg  # noqa: E402
from attnws.plot.render import render  # noqa: E402
from attnws.plot.series import compute_series  # noqa: E402

TARGET, SWEEP, POINTS = "long-seq-pmha-fp32-sm80", "seq", 1000
REPEATS = 3


def main() -> None:
    start = time.perf_counter()
    series = compute_series(load_target_arg(TARGET), SWEEP, max_points=POINTS)
    computed = time.perf_counter() - start
    print(f"{TARGET} over {SWEEP}: {len(series.points)} points, series computed in {computed:.2f} s "
          f"(spec at every point, tight bound, proven maximum, pairs)")
    with tempfile.TemporaryDirectory() as folder:
        for suffix in (".png", ".svg"):
            best = min(render(series, Path(folder) / f"sweep{suffix}") for _ in range(REPEATS))
            print(f"render {len(series.points)} points to {suffix[1:].upper()}: {best:.3f} s (best of {REPEATS})")


if __name__ == "__main__":
    main()
