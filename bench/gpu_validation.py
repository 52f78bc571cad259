"""One prepared validation run for a lent H200 (15 minutes of device time, every try included).

On the device machine, from the repository root:
    python3 bench/gpu_validation.py --out "$OUT"            # run with the device tool's timeout_s >= 540

Steps, each bounded so that the whole run stays inside --budget-s (default 480 s):
1. environment.json: GPU, driver, Python, numba / numba-cuda versions;
2. pytest_kernels.txt: `pytest tests/kernels` on the GPU (gpu-marked tests included), <= PYTEST_S;
3. gpu_validation.json: the validator over realistic shapes, in a worker process that is killed and
   restarted past a shape's --shape-timeout-s: first the counterexample pairs of bench/gpu_shapes.json
   (a solver snapshot: z3 is not on the device image), then every committed proof target's maximum
   geometry, halved (batch first, then sequence) until its attention is at most ATTENTION_FMA_LIMIT
   multiply-adds (the naive kernels' and the float64 reference's cost); each report records how its
   shape was scaled; the reference checks REFERENCE_TOKENS sampled rows;
4. bench_kernels.json / .txt: bench/bench_kernels.py, <= BENCH_S.
Every file is written as soon as its step ends, so a run cut short still returns what it finished.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = ROOT / "bench" / "gpu_shapes.json"
TARGETS = ROOT / "proofs" / "targets"
PYTEST_S = 150
BENCH_S = 90
REFERENCE_TOKENS = 1024
ATTENTION_FMA_LIMIT = 4e11  # B * N * S^2 * (H + Hv); about a second of the naive kernels on an H200
POLL_S = 0.2


def attention_fma(record: dict) -> float:
    """Return B * N * S^2 * (H + Hv) for a shape record."""
    return record["batch"] * record["heads"] * record["seq"] ** 2 * (record["head_size"] + record["v_head_size"])


def bounded(record: dict) -> dict:
    """Return the record halved (batch, then sequence) until its attention cost is within the limit."""
    scaled = dict(record)
    while attention_fma(scaled) > ATTENTION_FMA_LIMIT:
        key = "batch" if scaled["batch"] > 1 else "seq"
        scaled[key] = (scaled[key] + 1) // 2
        scaled["tokens"] = scaled["batch"] * scaled["seq"]
    if scaled != record:
        scaled["scaled_from"] = {k: record[k] for k in ("batch", "seq", "tokens")}
    return scaled


def target_records() -> list[dict]:
    """Return each committed proof target's maximum geometry as a (bounded) shape record."""
    from attnws.spec.shapes_file import shape_record
    from attnws.spec.target import load_target

    records = []
    for path in sorted(TARGETS.glob("*.json")):
        target = load_target(path)
        records.append(bounded(shape_record(target.max_geometry(), target.config, dict(target.env),
                                            label=f"max:{target.name}")))
    return records


def environment() -> dict:
    """Return the facts of the machine this run is on."""
    facts: dict = {"python": sys.version}
    for command in (["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],):
        try:
            facts["nvidia_smi"] = subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as error:
            facts["nvidia_smi"] = f"unavailable: {error}"
    for module in ("numba", "numba_cuda", "numpy"):
        try:
            facts[module] = __import__(module).__version__
        except Exception as error:  # a missing or broken package is a fact to report, not a reason to stop
            facts[module] = f"unavailable: {error}"
    return facts


def run_bounded(command: list[str], limit_s: float, log: Path) -> dict:
    """Run a command with a time limit, writing its output to `log`; return its outcome."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=max(limit_s, 1))
        log.write_text(done.stdout + done.stderr)
        outcome = {"returncode": done.returncode}
    except subprocess.TimeoutExpired as expired:
        log.write_text(f"timed out after {limit_s:.0f} s\n{expired.stdout or ''}{expired.stderr or ''}")
        outcome = {"returncode": None, "timed_out": True}
    return {**outcome, "seconds": time.monotonic() - start}


def worker(shapes_path: str, events_path: str, start: int) -> int:
    """Validate records[start:], appending one JSON event per line to events_path; stop after a
    shape raised (exit 1), leaving the rest to a fresh worker."""
    from attnws.kernels import validate_document

    records = json.loads(Path(shapes_path).read_text())
    with open(events_path, "a") as events:
        for index in range(start, len(records)):
            events.write(json.dumps({"event": "start", "index": index}) + "\n")
            events.flush()
            began = time.monotonic()
            try:
                reports = validate_document([records[index]], lambda message: None, reference_tokens=REFERENCE_TOKENS)
                entry = {"event": "done", "reports": [r.as_dict() for r in reports]}
            except Exception:  # recorded; a CUDA fault poisons this process's context, so a fresh worker goes on
                entry = {"event": "error", "error": traceback.format_exc()[-4000:]}
            events.write(json.dumps({**entry, "index": index, "seconds": time.monotonic() - began}) + "\n")
            events.flush()
            if entry["event"] == "error":
                return 1
    return 0


def supervise(records: list[dict], out: Path, deadline: float, shape_timeout: float) -> list[dict]:
    """Run the worker over every record, restarting it past a stuck or crashed shape; return one entry each."""
    shapes_path, events_path = out / "gpu_shapes_run.json", out / "gpu_events.jsonl"
    shapes_path.write_text(json.dumps(records))
    events_path.write_text("")
    entries: dict[int, dict] = {}
    seen, next_index = 0, 0
    while next_index < len(records) and time.monotonic() < deadline:
        worker_process = subprocess.Popen(
            [sys.executable, __file__, "--worker", str(shapes_path), str(events_path), str(next_index)],
            cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True)
        current, started = None, time.monotonic()
        while True:
            lines = events_path.read_text().splitlines()
            for line in lines[seen:]:
                event = json.loads(line)
                if event["event"] == "start":
                    current, started = event["index"], time.monotonic()
                else:
                    entries[event["index"]] = event
                    current, next_index = None, event["index"] + 1
            seen = len(lines)
            stuck = current is not None and time.monotonic() - started > shape_timeout
            if worker_process.poll() is not None or stuck or time.monotonic() > deadline:
                if worker_process.poll() is None:
                    os.killpg(worker_process.pid, signal.SIGKILL)
                worker_process.wait()
                if current is not None:
                    why = "timeout" if stuck else "budget" if time.monotonic() > deadline else "crashed"
                    entries[current] = {"event": why, "index": current,
                                        "stderr": (worker_process.stderr.read() or "")[-4000:]}
                    next_index = current + 1
                break
            time.sleep(POLL_S)
        worker_process.stderr.close()
    shapes_path.unlink()
    return [entries.get(i, {"event": "not run (budget)", "index": i}) | {"record": records[i]}
            for i in range(len(records))]


def summarize(entries: list[dict]) -> dict:
    """Return pass counts and the non-monotonic pairs as seen on real allocations."""
    from attnws.kernels.report import pair_comparisons

    reports = [r for e in entries for r in e.get("reports", [])]
    views = [types.SimpleNamespace(shape=r["shape"], backend=r["backend"], allocated_bytes=r["allocated_bytes"])
             for r in reports]
    return {"reports": len(reports), "passed": sum(r["passed"] for r in reports),
            "not_validated": [e["index"] for e in entries if e["event"] != "done"],
            "pairs": pair_comparisons(views)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_out")))
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--shape-timeout-s", type=float, default=120.0)
    ns = parser.parse_args()
    begin = time.monotonic()
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "environment.json").write_text(json.dumps(environment(), indent=1))
    steps = {"pytest": run_bounded([sys.executable, "-m", "pytest", "-q", "tests/kernels", "-p", "no:cacheprovider",
                                    "-rs"], min(PYTEST_S, ns.budget_s / 4), ns.out / "pytest_kernels.txt")}
    document = json.loads(SHAPES.read_text())
    records = document["shapes"] + target_records()
    deadline = begin + ns.budget_s - BENCH_S
    entries = supervise(records, ns.out, deadline, ns.shape_timeout_s)
    result = {"budget_s": ns.budget_s, "summary": summarize(entries), "steps": steps, "entries": entries}
    (ns.out / "gpu_validation.json").write_text(json.dumps(result, indent=1))
    left = begin + ns.budget_s - time.monotonic()
    bench = [sys.executable, "bench/bench_kernels.py", "--json", str(ns.out / "bench_kernels.json")]
    steps["bench"] = run_bounded(bench, min(BENCH_S, left), ns.out / "bench_kernels.txt")
    result["seconds"] = time.monotonic() - begin
    (ns.out / "gpu_validation.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    sys.exit(main())
