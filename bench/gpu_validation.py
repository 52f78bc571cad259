"""One prepared validation run for a lent H200 (15 minutes of device time, every try included).

On the device machine, from the repository root:
    python3 bench/gpu_validation.py --out "$OUT"            # run with the device tool's timeout_s >= 540

Steps, each bounded so that the whole run stays inside --budget-s (default 480 s):
0. preflight: one one-line kernel (sentinel_fill) launched and its bytes checked, in a fresh process; when it
   fails (no driver, Numba fell back to the simulator, a CUDA error) the run stops here with a
   message and exit code 2 rather than spend the budget;
1. environment.json: GPU, driver, Python, numba / numba-cuda versions;
2. pytest_kernels.txt: `pytest tests/kernels` on the GPU (gpu-marked tests included), <= PYTEST_S;
3. gpu_validation.json: the validator over realistic shapes, in a worker process that is killed and
   restarted past a shape's --shape-timeout-s: first the counterexample pairs of bench/gpu_shapes.json
   (a solver snapshot: z3 is not on the device image), then every committed proof target's maximum
   geometry, halved (batch first, then sequence) until its attention is at most ATTENTION_FMA_LIMIT
   multiply-adds (the naive kernels' and the float64 reference's cost); each report records how its
   shape was scaled; the reference checks REFERENCE_TOKENS sampled rows. One line per shape is
   printed as it finishes and appended to results.txt; workers' output goes to workers.txt;
4. bench_kernels.json / .txt: bench/bench_kernels.py, <= BENCH_S.
Every file is written as soon as its step ends, so a run cut short still returns what it finished.
Exit code: 0 when every step and every shape passed, 1 when any failed or ORT rejects a shape before
any kernel runs (its line says REJ, counted apart from the failures), 2 when the preflight failed.
`--shapes FILE` validates that shapes document instead of step 3's shapes; `--no-pytest` and
`--no-bench` skip steps 2 and 4 (for a quick rerun, or to try the script on the simulator with
NUMBA_ENABLE_CUDASIM=1, which the preflight then accepts).
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
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = ROOT / "bench" / "gpu_shapes.json"
PREFLIGHT_S = 120  # a cold CUDA context plus one JIT compile takes seconds; more means something is wrong
PYTEST_S = 150
BENCH_S = 90
REFERENCE_TOKENS = 1024
ATTENTION_FMA_LIMIT = 4e11  # B * N * S^2 * (H + Hv); about a second of the naive kernels on an H200
POLL_S = 0.2
EXIT_FAILED, EXIT_PREFLIGHT = 1, 2
SIMULATOR_VARIABLE = "NUMBA_ENABLE_CUDASIM"
GQA = "gqa"  # a GroupQueryAttention shape record's op (its committed targets are not bounded here: target_records)


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
    """Return each committed proof target's maximum geometry as a (bounded) shape record, but
    GroupQueryAttention's: `bounded` halves a shape by the packed operators' attention cost
    B * N * S^2 * (H + Hv), not GroupQueryAttention's over its cache's T keys, so its shapes are
    gpu_shapes.json's, picked to fit."""
    from attnws.spec.command_line import TARGETS_DIR
    from attnws.spec.shapes_file import shape_record
    from attnws.spec.target import load_target

    records = []
    for path in sorted(TARGETS_DIR.glob("*.json")):
        target = load_target(path)
        if target.op.value == GQA:
            continue
        records.append(bounded(shape_record(target.max_geometry(), target.config, dict(target.env),
                                            label=f"max:{target.name}")))
    return records


def preflight_worker() -> int:
    """Fill a device array with the one-line sentinel_fill kernel, check it on the host and print
    one JSON line {device, ok, detail}."""
    facts = {"device": "unknown", "ok": False, "detail": ""}
    try:
        import numpy as np

        import attnws.kernels  # noqa: F401  (chooses the device before numba loads)
        from attnws.kernels import sentinel_fill
        from attnws.kernels.device import device_kind
        from numba import cuda

        facts["device"] = device_kind()
        values = cuda.device_array(4096, np.uint8)
        sentinel_fill.launch(values, 0xA5)
        facts["ok"] = bool((values.copy_to_host() == 0xA5).all())
        facts["detail"] = "" if facts["ok"] else "the kernel ran but wrote the wrong bytes"
    except Exception as error:  # reported, not raised: the supervisor turns it into a clear message
        facts["detail"] = f"{type(error).__name__}: {error}"
    print(json.dumps(facts))
    return 0


def preflight(limit_s: float) -> tuple[bool, str]:
    """Return (passed, message) of the preflight in a fresh process. The simulator passes only when
    NUMBA_ENABLE_CUDASIM=1 was asked for explicitly."""
    try:
        done = subprocess.run([sys.executable, __file__, "--preflight"], cwd=ROOT, capture_output=True, text=True,
                              timeout=limit_s)
    except subprocess.TimeoutExpired:
        return False, f"the one-line kernel did not finish within {limit_s:.0f} s"
    try:
        facts = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return False, f"the preflight process died (exit {done.returncode}): {done.stderr[-2000:]}"
    if not facts["ok"]:
        return False, f"the one-line kernel failed on {facts['device']}: {facts['detail']}"
    if facts["device"] != "cuda" and os.environ.get(SIMULATOR_VARIABLE) != "1":
        return False, (f"Numba sees no usable GPU and fell back to the {facts['device']} (set "
                       f"{SIMULATOR_VARIABLE}=1 to run on the simulator on purpose)")
    return True, f"one-line kernel ok on {facts['device']}"


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


def entry_passed(entry: dict) -> bool:
    """Return whether a shape's entry ran and none of its reports failed or was rejected (a shape not
    run, too large or without kernels here for its route, is not a failure)."""
    return entry["event"] == "done" and all(r["passed"] for r in entry["reports"])


def entry_rejected(entry: dict) -> bool:
    """Return whether ORT rejects the shape before any kernel runs (a report `"status": "rejected"`)
    and no report of it failed: nothing ran, so it is not a kernel fault, though it still exits 1."""
    statuses = {r["status"] for r in entry.get("reports", [])}
    return entry["event"] == "done" and "rejected" in statuses and "failed" not in statuses


def entry_name(entry: dict) -> str:
    """Return the shape as `attnws validate` names it, or its raw fields when no report came back."""
    from attnws.kernels.commands import shape_name

    if entry.get("reports"):
        return shape_name(entry["reports"][0]["shape"])
    record = entry["record"]
    return " ".join(f"{key}={record[key]}" for key in ("label", "op", "dtype", "tokens", "batch", "seq", "total_seq",
                                                        "heads", "kv_heads", "head_size", "sm")
                    if record.get(key) is not None)


def result_line(entry: dict, total: int) -> str:
    """Return the one line a finished shape gets: verdict (`attnws validate`'s words), shape, backend(s)
    and failed checks or the event."""
    from attnws.kernels.commands import VERDICT

    verdict = VERDICT["passed" if entry_passed(entry) else "rejected" if entry_rejected(entry) else "failed"]
    head = f"{entry['index'] + 1}/{total} {verdict} {entry_name(entry)}"
    seconds = f" ({entry['seconds']:.1f} s)" if "seconds" in entry else ""
    if entry["event"] != "done":
        return f"{head}: {entry['event']}{seconds}"
    outcomes = [f"rejected: {r['error']}" if r["status"] == "rejected" else
                (r["backend"] or "empty output") + (f" ({r['route']})" if r["route"] else "")
                + (f" failed {', '.join(r['failures'])}" if r["failures"] else "")
                + (f" not run: {r['refused']}" if r["refused"] else "")
                for r in entry["reports"]]
    return f"{head}: {'; '.join(outcomes)}{seconds}"


def supervise(records: list[dict], out: Path, deadline: float, shape_timeout: float, results: IO[str]) -> list[dict]:
    """Run the worker over every record, restarting it past a stuck or crashed shape; print and
    append to `results` one line per shape as it finishes; return one entry each."""
    shapes_path, events_path, log_path = out / "gpu_shapes_run.json", out / "gpu_events.jsonl", out / "workers.txt"
    shapes_path.write_text(json.dumps(records))
    events_path.write_text("")
    entries: dict[int, dict] = {}

    def finish(event: dict) -> None:
        entry = entries[event["index"]] = {**event, "record": records[event["index"]]}
        line = result_line(entry, len(records))
        print(line, flush=True)
        results.write(line + "\n")
        results.flush()

    seen, next_index = 0, 0
    with open(log_path, "a") as log:
        while next_index < len(records) and time.monotonic() < deadline:
            log_start = log.tell()
            worker_process = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(shapes_path), str(events_path), str(next_index)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            current, started = None, time.monotonic()
            while True:
                lines = events_path.read_text().splitlines()
                for line in lines[seen:]:
                    event = json.loads(line)
                    if event["event"] == "start":
                        current, started = event["index"], time.monotonic()
                    else:
                        finish(event)
                        current, next_index = None, event["index"] + 1
                seen = len(lines)
                stuck = current is not None and time.monotonic() - started > shape_timeout
                if worker_process.poll() is not None or stuck or time.monotonic() > deadline:
                    if worker_process.poll() is None:
                        os.killpg(worker_process.pid, signal.SIGKILL)
                    worker_process.wait()
                    if current is not None:
                        why = "timeout" if stuck else "budget" if time.monotonic() > deadline else "crashed"
                        log.flush()
                        with open(log_path) as written:
                            written.seek(log_start)
                            output = written.read()[-4000:]
                        finish({"event": why, "index": current, "seconds": time.monotonic() - started,
                                "output": output})
                        next_index = current + 1
                    break
                time.sleep(POLL_S)
    shapes_path.unlink()
    for index in range(len(records)):
        if index not in entries:
            finish({"event": "not run (budget)", "index": index})
    return [entries[index] for index in range(len(records))]


def summarize(entries: list[dict]) -> dict:
    """Return pass counts and the non-monotonic pairs as seen on real allocations."""
    from attnws.kernels.commands import STATUSES
    from attnws.kernels.report import pair_comparisons

    reports = [r for e in entries for r in e.get("reports", [])]
    views = [types.SimpleNamespace(shape=r["shape"], backend=r["backend"], allocated_bytes=r["allocated_bytes"])
             for r in reports]
    return {"reports": len(reports), "passed": sum(r["passed"] for r in reports),
            "not_validated": [e["index"] for e in entries if e["event"] != "done"],
            "failed_shapes": [e["index"] for e in entries if not entry_passed(e) and not entry_rejected(e)],
            "rejected_shapes": [e["index"] for e in entries if entry_rejected(e)],
            "pairs": pair_comparisons(views),
            "counts": {status: sum(r["status"] == status for r in reports) for status in STATUSES}}


def step_failed(outcome: dict) -> bool:
    """Return whether a bounded step timed out or exited non-zero."""
    return outcome["returncode"] != 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "gpu_out")))
    parser.add_argument("--budget-s", type=float, default=480.0)
    parser.add_argument("--shape-timeout-s", type=float, default=120.0)
    parser.add_argument("--shapes", type=Path, help="validate this shapes document instead of the default shapes")
    parser.add_argument("--no-pytest", action="store_true", help="skip `pytest tests/kernels`")
    parser.add_argument("--no-bench", action="store_true", help="skip bench/bench_kernels.py")
    ns = parser.parse_args()
    begin = time.monotonic()
    ns.out.mkdir(parents=True, exist_ok=True)
    passed, message = preflight(min(PREFLIGHT_S, ns.budget_s / 4))
    (ns.out / "preflight.txt").write_text(message + "\n")
    print(f"preflight: {message}", flush=True)
    if not passed:
        print("gpu_validation: stopping before any step: the device cannot run a kernel", file=sys.stderr)
        return EXIT_PREFLIGHT
    (ns.out / "environment.json").write_text(json.dumps(environment(), indent=1))
    steps: dict[str, dict] = {}
    if not ns.no_pytest:
        steps["pytest"] = run_bounded([sys.executable, "-m", "pytest", "-q", "tests/kernels", "-p", "no:cacheprovider",
                                       "-rs"], min(PYTEST_S, ns.budget_s / 4), ns.out / "pytest_kernels.txt")
        print(f"pytest tests/kernels: {'FAIL' if step_failed(steps['pytest']) else 'ok'}", flush=True)
    if ns.shapes:
        document = json.loads(ns.shapes.read_text())
        records = document["shapes"] if isinstance(document, dict) else document
    else:
        records = json.loads(SHAPES.read_text())["shapes"] + target_records()
    deadline = begin + ns.budget_s - (0 if ns.no_bench else BENCH_S)
    with open(ns.out / "results.txt", "w") as results:
        entries = supervise(records, ns.out, deadline, ns.shape_timeout_s, results)
    result = {"budget_s": ns.budget_s, "summary": summarize(entries), "steps": steps, "entries": entries}
    (ns.out / "gpu_validation.json").write_text(json.dumps(result, indent=1))
    if not ns.no_bench:
        left = begin + ns.budget_s - time.monotonic()
        bench = [sys.executable, "bench/bench_kernels.py", "--json", str(ns.out / "bench_kernels.json")]
        steps["bench"] = run_bounded(bench, min(BENCH_S, left), ns.out / "bench_kernels.txt")
    result["seconds"] = time.monotonic() - begin
    (ns.out / "gpu_validation.json").write_text(json.dumps(result, indent=1))
    summary = result["summary"]
    failed = (bool(summary["failed_shapes"] or summary["rejected_shapes"])
              or any(step_failed(outcome) for outcome in steps.values()))
    failed_steps = ", ".join(name for name, outcome in steps.items() if step_failed(outcome)) or "none"
    not_passed = len(summary["failed_shapes"]) + len(summary["rejected_shapes"])
    print(f"shapes: {len(records) - not_passed}/{len(records)} passed, {len(summary['rejected_shapes'])} rejected "
          f"by ORT before any kernel ran; steps failed: {failed_steps}", flush=True)
    return EXIT_FAILED if failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    if sys.argv[1:] == ["--preflight"]:
        sys.exit(preflight_worker())
    sys.exit(main())
