"""The proof ledger: committed verdicts, counterexamples, witnesses and bytes for every committed
target (`attnws/proofs/targets/*.json`, shipped as package data), so that a change in the spec or in Z3 that moves any of them is
seen. Timings and rlimit counts are left out (they vary by machine and Z3 build).

`compute_ledger` runs every theorem (the findings included) and the tight policy; `write_ledger` stores it as
`attnws/proofs/ledger.json`; `ledger_differences` compares a fresh run with the stored one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from attnws.spec.command_line import PROOFS_DIR
from attnws.spec.errors import UsageError
from attnws.spec.ort_version import ORT_VERSION
from attnws.spec.target import Target, load_target

from .gateway import Limits
from .parallel import in_processes
from .theorems import THEOREMS, context, run_theorems
from .tight import pattern_report, tight_policy

LEDGER_PATH = PROOFS_DIR / "ledger.json"
TARGETS_DIR = PROOFS_DIR / "targets"
LEDGER_VERSION = 3


def in_source_checkout(path: Path = LEDGER_PATH) -> bool:
    """Return whether the ledger at `path` belongs to a source checkout (a pyproject.toml two
    levels above attnws/proofs/), where `--write-ledger` may rewrite it; an installed copy in
    site-packages is package data, never rewritten."""
    return (path.parent.parent.parent / "pyproject.toml").is_file()


def committed_targets(directory: Path = TARGETS_DIR) -> list[Target]:
    """Return the committed targets of every family, sorted by file name."""
    return [load_target(path) for path in sorted(directory.glob("*.json"))]


def target_entry(target: Target, limits: Limits | None = None) -> dict[str, Any]:
    """Return one target's ledger entry: every theorem's result (the findings included) and the
    tight policy (with its bytes saved)."""
    ctx = context(target, limits)
    entry = {
        "theorems": {r.theorem: r.as_dict(timing=False) for r in run_theorems(target, limits, list(THEOREMS), ctx)},
        "tight": tight_policy(target, limits, ctx).as_dict(timing=False),
    }
    if target.patterns:
        entry["patterns"] = pattern_report(target, limits, timing=False, whole=ctx)
    return entry


def compute_ledger(targets: list[Target], limits: Limits | None = None,
                   progress: Callable[[str], None] = lambda _: None, jobs: int = 1) -> dict[str, Any]:
    """Return the ledger document for the targets, proving `jobs` targets at once (forked
    processes; each target's entry is its own, so the document is the same for any `jobs`)."""
    if jobs <= 1:
        entries = {}
        for target in targets:
            progress(f"proving {target.name}")
            entries[target.name] = target_entry(target, limits)
    else:
        entries = dict(zip((t.name for t in targets), in_processes(target_entry, [(t, limits) for t in targets],
                                                                  jobs, lambda i: progress(f"proved {targets[i].name}"))))
    return {"version": LEDGER_VERSION, "ort_version": ORT_VERSION, "targets": entries}


def write_ledger(document: dict[str, Any], path: Path = LEDGER_PATH) -> None:
    """Store the ledger as stable, sorted JSON."""
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


def read_ledger(path: Path = LEDGER_PATH) -> dict[str, Any]:
    """Return the stored ledger, or raise UsageError when it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise UsageError(f"cannot read the ledger {path}: {error}") from None


def _without_unasked_opinion(stored: Any, fresh: Any) -> Any:
    """Return the stored entry without the second opinions the fresh run did not ask for (at
    any depth: a theorem's result, the tight policy's proof, each pattern's maximum in a list)."""
    if isinstance(stored, list) and isinstance(fresh, list) and len(stored) == len(fresh):
        return [_without_unasked_opinion(a, b) for a, b in zip(stored, fresh)]
    if not (isinstance(stored, dict) and isinstance(fresh, dict)):
        return stored
    return {k: _without_unasked_opinion(v, fresh.get(k)) for k, v in stored.items()
            if k != "second_opinion" or k in fresh}


def ledger_differences(stored: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """Return a line per difference between two ledgers ('' when they agree)."""
    lines: list[str] = []
    old, new = stored.get("targets", {}), fresh.get("targets", {})
    for name in sorted(set(old) | set(new)):
        if name not in old or name not in new:
            lines.append(f"{name}: {'missing from the ledger' if name not in old else 'no longer a committed target'}")
            continue
        for section in sorted(set(old[name]) | set(new[name])):
            a, b = _without_unasked_opinion(old[name].get(section), new[name].get(section)), new[name].get(section)
            if section == "theorems" and isinstance(a, dict) and isinstance(b, dict):
                lines += [f"{name}/{t}: {a.get(t)} != {b.get(t)}" for t in sorted(set(a) | set(b)) if a.get(t) != b.get(t)]
            elif a != b:
                lines.append(f"{name}/{section}: {a} != {b}")
    return lines
