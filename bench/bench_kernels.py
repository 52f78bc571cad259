"""Kernel benchmarks, one run, not part of pytest: `python3 bench/bench_kernels.py [--json PATH]`.

Tiny shapes (on the simulator, or on the GPU when there is one): shapes validated per
second. On the simulator, per route, the budget's cost estimate over the measured run time (the
validator refuses shapes by that estimate, so it should stay at or above 1). GPU (when Numba sees one): per realistic shape, the kernels' time (median of REPEATS runs
after a warm-up run that compiles them) against the float64 NumPy reference's time for the same
output, and against the shape's workspace bytes. Prints the ratios measured in this run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import attnws.kernels  # noqa: E402,F401  (chooses the device before numba loads)
from attnws.kernels.device import CUDA, device_kind  # noqa: E402
from attnws.kernels.families import kernel_family  # noqa: E402
from attnws.kernels.placement import place  # noqa: E402
from attnws.kernels.reference_check import checked_rows  # noqa: E402
from attnws.kernels.validate import route_for, staged, validate_shape  # noqa: E402
from attnws.spec import Op, QkvFormat, RuntimeConfig, recipe, runtime_problem  # noqa: E402
from attnws.spec.footprint import footprint  # noqa: E402
from attnws.spec.hints import Geometry  # noqa: E402

REPEATS = 5
SM75, SM80, SM90 = (RuntimeConfig.make(sm=sm) for sm in (75, 80, 90))
LOW_FP32 = RuntimeConfig.make(sm=80, env={"ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32": "1"})
TINY = {
    "pa-fp16-trt": (Geometry(Op.PA, 2, batch=2, seq=4, heads=1, head_size=32, tokens=6), SM80),
    "pa-fp32-unfused": (Geometry(Op.PA, 4, batch=2, seq=4, heads=2, head_size=4, tokens=6), SM80),
    "pmha-fp16-flash": (Geometry(Op.PMHA, 2, batch=2, seq=4, heads=2, head_size=8, tokens=6,
                                 pmha_format=QkvFormat.SEPARATE, qkv_bias=True), SM80),
    "pmha-fp32-mea": (Geometry(Op.PMHA, 4, batch=2, seq=4, heads=2, head_size=8, tokens=6), LOW_FP32),
}
REALISTIC = {
    "pmha-fp16-trt-sm80-S384": (Geometry(Op.PMHA, 2, batch=8, seq=384, heads=12, head_size=64), SM80),
    "pmha-fp16-flash-sm90-S1024": (Geometry(Op.PMHA, 2, batch=8, seq=1024, heads=16, head_size=64), SM90),
    "pa-fp16-mea-sm90-S512": (Geometry(Op.PA, 2, batch=8, seq=512, heads=12, head_size=64, tokens=3000), SM90),
    "pmha-fp16-mea-accumulator-sm75": (Geometry(Op.PMHA, 2, batch=4, seq=512, heads=8, head_size=64,
                                                v_head_size=256, pmha_format=QkvFormat.SEPARATE), SM75),
    "pmha-fp32-unfused-sm80-S255": (Geometry(Op.PMHA, 4, batch=8, seq=255, heads=12, head_size=64), SM80),
    "pmha-fp32-mea-sm80-S256": (Geometry(Op.PMHA, 4, batch=8, seq=256, heads=12, head_size=64), SM80),
}


def simulator_rate(rounds: int = 3) -> dict:
    """Return tiny shapes validated per second (every TINY shape, `rounds` times)."""
    start = time.perf_counter()
    passed = sum(validate_shape(g, c).passed for _ in range(rounds) for g, c in TINY.values())
    elapsed = time.perf_counter() - start
    return {"shapes": rounds * len(TINY), "passed": passed, "seconds": elapsed,
            "shapes_per_second": rounds * len(TINY) / elapsed}


def kernel_timing(name: str, geometry: Geometry, config: RuntimeConfig) -> dict:
    """Return the kernels' median time, the reference's time and the workspace bytes of one shape."""
    problem = runtime_problem(geometry)
    backend = route_for(problem, config, None)
    route = recipe(problem, backend)
    family = kernel_family(problem.op)
    host = family.inputs.make_inputs(problem)
    with staged(problem, place(problem, footprint(problem, backend), route), host) as stage:
        stage.run()
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            stage.run()
            times.append(time.perf_counter() - start)
    start = time.perf_counter()
    family.reference.reference_output(problem, host, checked_rows(family.reference.output_rows(problem), None), backend)
    reference_s = time.perf_counter() - start
    kernel_s = statistics.median(times)
    workspace = sum(nbytes for _, nbytes in route.allocations())
    return {"shape": name, "backend": route.backend.value, "kernel_ms": 1e3 * kernel_s,
            "reference_ms": 1e3 * reference_s, "reference_over_kernel": reference_s / kernel_s,
            "workspace_bytes": workspace, "kernel_ms_per_gib": 1e3 * kernel_s / max(workspace / 2**30, 1e-9)}


COST_SHAPES = {
    "pmha unfused": (Geometry(Op.PMHA, 2, batch=1, seq=48, heads=1, head_size=16), "unfused"),
    "pmha mea": (Geometry(Op.PMHA, 2, batch=2, seq=32, heads=1, head_size=8), "mea"),
    "pmha flash": (Geometry(Op.PMHA, 2, batch=2, seq=32, heads=1, head_size=8), "flash"),
    "pmha trt": (Geometry(Op.PMHA, 2, batch=2, seq=32, heads=1, head_size=32), "trt"),
    "mha unfused": (Geometry(Op.MHA, 2, batch=1, seq=16, heads=2, head_size=16, kv_seq=24), "unfused"),
    "mha flash": (Geometry(Op.MHA, 2, batch=1, seq=16, heads=2, head_size=16, kv_seq=24), "flash"),
}


def cost_model_ratios() -> dict[str, float]:
    """Return, per route, the budget's simulator estimate over the measured time of one
    validation (after a warm-up run that compiles the kernels)."""
    from attnws.kernels.budget import run_cost
    from attnws.spec import Backend

    ratios = {}
    for name, (geometry, backend) in COST_SHAPES.items():
        validate_shape(geometry, RuntimeConfig(), backend)
        start = time.perf_counter()
        validate_shape(geometry, RuntimeConfig(), backend)
        measured = time.perf_counter() - start
        p = runtime_problem(geometry)
        fp = footprint(p, Backend(backend))
        estimate = run_cost(p, fp, place(p, fp, recipe(p, Backend(backend))), simulator=True).simulator_seconds
        ratios[name] = estimate / measured
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    ns = parser.parse_args(argv)
    device = device_kind()
    results = {"device": device, "tiny_shapes": simulator_rate(), "gpu": []}
    tiny = results["tiny_shapes"]
    print(f"device: {device}")
    print(f"tiny shapes: {tiny['shapes']} validated in {tiny['seconds']:.2f} s = {tiny['shapes_per_second']:.2f} "
          f"shapes/s ({tiny['passed']} passed)")
    if device != CUDA:
        results["cost_model"] = cost_model_ratios()
        print("cost model, estimate / measured: " + ", ".join(f"{k} {v:.2f}" for k, v in results["cost_model"].items()))
    if device == CUDA:
        for name, (geometry, config) in REALISTIC.items():
            row = kernel_timing(name, geometry, config)
            results["gpu"].append(row)
            print(f"{name}: {row['backend']} kernels {row['kernel_ms']:.2f} ms, NumPy reference "
                  f"{row['reference_ms']:.0f} ms (x{row['reference_over_kernel']:.0f}), workspace "
                  f"{row['workspace_bytes'] / 2**20:.1f} MiB ({row['kernel_ms_per_gib']:.1f} ms/GiB)")
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
