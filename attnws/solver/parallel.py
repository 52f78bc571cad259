"""The theorems of one target and its memory patterns, on several processes at once.

Each theorem decides its own queries in fresh Z3 contexts, so its verdict and witness do not
depend on what ran before it or beside it: running them at once changes the time, never a result.
The workers are forked from the process that encoded the target (they inherit its context; a
result comes back as a `ProofResult`). The patterns run after the theorems, each handed the
whole target's proven maximum once `tightness` found it (as `pattern_maximum` takes it from the
context in one process). The ledger proves whole targets at once the same way (`in_processes`).
Ctrl-C stops the workers, and KeyboardInterrupt reaches the caller.
"""

from __future__ import annotations

import multiprocessing
import os
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Callable, Iterator

from attnws.spec.target import Pattern, Target

from .claims import DEFAULT_THEOREMS, THEOREM_NAMES
from .gateway import Limits, Verdict
from .results import Context, ProofResult, context
from .theorems import run_theorems
from .tight import pattern_maximum

_SHARED: dict[str, Any] = {}  # the target's context, set before the workers fork


def default_jobs() -> int:
    """Return the processes a proof uses by default: the cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _theorem(name: str) -> ProofResult:
    return next(run_theorems(_SHARED["ctx"].target, _SHARED["ctx"].limits, [name], _SHARED["ctx"]))


def _pattern(pattern: Pattern, known: Any) -> ProofResult:
    ctx: Context = _SHARED["ctx"]
    if known is not None:
        ctx.memo["maximum"] = known
    return pattern_maximum(ctx.target, pattern, ctx.limits, ctx)


@contextmanager
def forked_pool(jobs: int) -> Iterator[ProcessPoolExecutor]:
    """Yield a pool of `jobs` processes forked from this one; on an exception (Ctrl-C among them)
    the queued calls are cancelled before it propagates."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork"))
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)


def in_processes(function: Callable[..., Any], calls: list[tuple[Any, ...]], jobs: int,
                 done: Callable[[int], None] = lambda _: None) -> list[Any]:
    """Return `function(*call)` for each call, in order, computed on `jobs` forked processes;
    `done(i)` is told as each result arrives in order."""
    with forked_pool(jobs) as pool:
        futures = [pool.submit(function, *call) for call in calls]
        results = []
        for index, future in enumerate(futures):
            results.append(future.result())
            done(index)
        return results


def prove_all(target: Target, limits: Limits, names: list[str] | None, jobs: int,
              ctx: Context | None = None) -> Iterator[ProofResult]:
    """Yield the named theorems' results (the default ones when None), in their order, then each
    memory pattern's `pattern_maximum`, decided on `jobs` processes (one: in this process)."""
    ctx = ctx or context(target, limits)
    if jobs <= 1:
        yield from run_theorems(target, limits, names, ctx)
        for pattern in target.patterns:
            yield pattern_maximum(target, pattern, limits, ctx)
        return
    ordered = [n for n in THEOREM_NAMES if n in set(DEFAULT_THEOREMS if names is None else names)]
    _SHARED["ctx"] = ctx
    try:
        with forked_pool(jobs) as pool:
            futures: list[Future] = [pool.submit(_theorem, name) for name in ordered]
            known = None
            for future in futures:
                result = future.result()
                if result.theorem == "tightness" and result.verdict is Verdict.PROVED:
                    known = (result.details["max_runtime_bytes"], result.details["witness"])
                    ctx.memo["maximum"] = known
                yield result
            for future in [pool.submit(_pattern, pattern, known) for pattern in target.patterns]:
                yield future.result()
    finally:
        _SHARED.clear()
