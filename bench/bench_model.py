"""`attnws model` benchmark, one run, not part of pytest: `python3 bench/bench_model.py [--json PATH]`.

Stacked packed-encoder layers (`attnws.model.examples.packed_encoder`, hidden 64, 4 heads: 8 nodes
a layer, about 1 kB of model per layer) written to a file, then read, checked and sized as
`attnws model` does (load_model + analyze_model), best of REPEATS runs. Prints the time per
model, the time per layer, and each model's time per layer against the smallest model's: a
constant ratio is linear time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import onnx  # noqa: E402

from attnws.model import analyze_model, load_model, shape_bounds  # noqa: E402
from attnws.model.examples import EncoderSpec, packed_encoder  # noqa: E402

LAYERS = (50, 400, 1000)
REPEATS = 3
BOUNDS = ["token_count=4096", "batch=8", "seq=512", "batch_plus_1=9"]


def time_model(layers: int, folder: Path) -> dict:
    """Return the best time to load and size an encoder of `layers` layers, with its size."""
    path = folder / f"encoder-{layers}.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=layers, hidden=64, heads=4, ffn=64)), str(path))
    bounds = shape_bounds(BOUNDS, None)
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        report = analyze_model(load_model(path), bounds)
        best = min(best, time.perf_counter() - start)
    assert report.complete and len(report.nodes) == layers
    return {"layers": layers, "nodes": 8 * layers, "file_bytes": path.stat().st_size, "seconds": best,
            "ms_per_layer": 1000 * best / layers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [time_model(layers, Path(tmp)) for layers in LAYERS]
    base = rows[0]["ms_per_layer"]
    print("attnws model: load + check + infer + size, best of", REPEATS)
    for row in rows:
        row["per_layer_ratio"] = row["ms_per_layer"] / base
        print(f"  {row['layers']:>5} layers ({row['nodes']:>5} nodes, {row['file_bytes'] / 1000:7.1f} kB): "
              f"{row['seconds']:6.3f} s, {row['ms_per_layer']:.3f} ms/layer, "
              f"{row['per_layer_ratio']:.2f}x the {LAYERS[0]}-layer time per layer")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
