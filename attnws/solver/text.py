"""Proof results in words: one line per theorem saying what was shown, then its evidence.

Used by `attnws prove` (and `attnws model --prove`). Bytes are shown with `format_bytes`, shapes as
"B=1 S=15 N=12 H=64 T=15"; nothing here prints (the CLI does).
"""

from __future__ import annotations

from typing import Any, Callable

from attnws.spec.families import family_of
from attnws.spec.problem import Op
from attnws.spec.units import bytes_more, format_bytes

from .gateway import Verdict
from .results import ProofResult
from attnws.spec.families import shape_words

VERDICT_WORDS = {Verdict.PROVED: "PROVED", Verdict.REFUTED: "REFUTED", Verdict.UNKNOWN: "UNKNOWN",
                 Verdict.VACUOUS: "VACUOUS", Verdict.NOT_APPLICABLE: "N/A"}


def estimator(r: ProofResult) -> str:
    """Whose estimate the theorem meets: ORT's for the packed operators, attnws's own for
    MultiHeadAttention (ORT declares none)."""
    return family_of(Op(r.op)).estimate.WHOSE


def _backends(names: Any) -> str:
    return ", ".join(names) if isinstance(names, (list, tuple)) else str(names)


def _safe_bound(r: ProofResult) -> str:
    return f"the runtime workspace never exceeds {estimator(r)} estimate of {format_bytes(r.details.get('bound_bytes'))}"


def _reachability(r: ProofResult) -> str:
    d = r.details
    text = f"dispatch picks only backends {estimator(r)} estimate sizes"
    if d.get("witnesses"):
        text += "; picked somewhere: " + ", ".join(sorted(d["witnesses"]))
    if d.get("over_approximation"):
        text += f"; it also sizes {_backends(d['over_approximation'])}, which no valid shape reaches"
    return text


def _monotonicity(r: ProofResult) -> str:
    routes = r.details.get("routes")
    return ("growing any one dimension never shrinks a route's workspace"
            + (f" (routes {_backends(routes)})" if routes else ""))


def _tightness(r: ProofResult) -> str:
    d = r.details
    witness = d.get("witness") or {}
    who = "any valid shape on a route with a recipe" if d.get("left_out") else "any valid shape"
    text = (f"the largest workspace {who} needs is {format_bytes(d.get('max_runtime_bytes'))}"
            + (f", at {shape_words(witness)} ({_backends(witness.get('backends', []))})" if witness else ""))
    estimate = d.get("estimate_bytes")
    if estimate is not None:
        ratio = d.get("ratio")
        text += (f"; {estimator(r)} estimate {format_bytes(estimate)} is {ratio:.1f}x that" if ratio
                 else f"; {estimator(r)} estimate {format_bytes(estimate)} is all slack")
    return text


def _pattern(r: ProofResult) -> str:
    d = r.details
    text = (f"pattern {d['pattern']} ({', '.join(f'{k} {v}' for k, v in d['dims'].items())}): its largest workspace "
            f"{'on a route with a recipe ' if d.get('left_out') else ''}is {format_bytes(d['max_runtime_bytes'])}, at {shape_words(d['witness'])} "
            f"({_backends(d['witness'].get('backends', []))})")
    if d.get("ratio"):
        text += f"; {estimator(r)} estimate over the whole target {format_bytes(d['estimate_bytes'])} is {d['ratio']:.1f}x that"
    return text


def _abi(r: ProofResult) -> str:
    return "every valid shape passes each reachable route's ABI checks"


def _composition(r: ProofResult) -> str:
    d = r.details
    op = Op(r.op)
    parts = "align256(projection) + the largest" if family_of(op).estimate.has_projection(op) else "the largest"
    return (f"{estimator(r)} root {format_bytes(d.get('ort_total_bytes'))} is {parts} of its routes "
            f"({_backends(d.get('routes', []))}), never their sum")


SUMMARIES: dict[str, Callable[[ProofResult], str]] = {
    "safe_bound": _safe_bound, "tight_bound": _safe_bound, "reachability": _reachability,
    "route_monotonicity": _monotonicity, "tightness": _tightness, "abi_domain": _abi, "composition": _composition,
    "pattern_maximum": _pattern,
}


def counterexample_text(ce: dict[str, Any], whose: str = "ORT's") -> str:
    """Return a counterexample record in words: the shape(s), the bytes (with the exact difference
    where two are compared), what fails; `whose` estimate a comparison names."""
    if "smaller" in ce and "larger" in ce:
        p, q = ce["smaller"], ce["larger"]
        p_dims, q_dims = p.get("dims", p), q.get("dims", q)
        p_bytes = p.get("runtime_bytes", p.get("bytes"))
        q_bytes = q.get("runtime_bytes", q.get("bytes"))
        why = "; ".join(ce.get("discontinuity", [])) or ce.get("backend", "")
        return (f"{shape_words(p_dims)} needs {format_bytes(p_bytes)}"
                + (f" ({_backends(p['backends'])})" if p.get("backends") else "")
                + f", more than {shape_words(q_dims)} needs: {format_bytes(q_bytes)}"
                + (f" ({_backends(q['backends'])})" if q.get("backends") else "")
                + (f" {bytes_more(p_bytes, q_bytes)}" if None not in (p_bytes, q_bytes) else "")
                + (f" [{why}]" if why else ""))
    dims = ce.get("dims", ce)
    parts = [shape_words(dims)]
    runtime = ce.get("runtime_bytes")
    if runtime is not None:
        parts.append(f"needs {format_bytes(runtime)}")
    for key, words in (("bound_bytes", "over the bound"), ("naive_bytes", "over the naive"),
                       ("estimate_bytes", f"while {whose} estimate is")):
        if ce.get(key) is not None:
            parts.append(f"{words} {format_bytes(ce[key])}"
                         + (f" {bytes_more(runtime, ce[key])}" if runtime is not None and runtime > ce[key] else ""))
    if ce.get("backends"):
        parts.append(f"({_backends(ce['backends'])})")
    if ce.get("route"):
        parts.append(f"on {ce['route']}")
    if ce.get("failing"):
        parts.append("breaks: " + "; ".join(ce["failing"]))
    if ce.get("message"):
        parts.append(f"({ce['message']})")
    return " ".join(parts)


def result_text(r: ProofResult, timing: bool = True) -> str:
    """Return one theorem's result: the verdict and what it means, then the evidence indented."""
    head = f"{VERDICT_WORDS[r.verdict]:8} {r.theorem:22}"
    if r.verdict is Verdict.PROVED:
        head += " " + SUMMARIES.get(r.theorem, lambda x: x.claim)(r)
    else:
        head += f" claim: {r.claim}"
    if timing:
        head += f"  ({r.seconds:.2f} s, {r.rlimit:,} resource units)"
    lines = [head]
    if r.counterexample is not None:
        lines.append(f"         counterexample: {counterexample_text(r.counterexample, estimator(r))}")
    if r.expected and r.verdict is Verdict.REFUTED:
        lines.append(f"         a finding about ORT, as the target declares (not a failure): {r.expected_because}")
    if r.reason:
        lines.append(f"         {'not applicable' if r.verdict is Verdict.NOT_APPLICABLE else 'undecided'}: {r.reason}")
    if r.vacuous_because:
        lines.append(f"         vacuous{' (as the target declares)' if r.expected else ''}: {r.vacuous_because}")
    for backend, out in (r.details.get("left_out") or {}).items():
        shape = f", such as {shape_words(out['witness'])}" if out.get("witness") else ""
        lines.append(f"         left out: the shapes that take {backend}{shape} ({out['why']})")
    first = r.details.get("first_failing")
    if first:
        lines.append(f"         first failing shape: {counterexample_text(first, estimator(r))}")
    if r.opinion is not None:
        lines.append(f"         second opinion: {r.opinion.describe()}")
    return "\n".join(lines)


def opinions_text(results: list[ProofResult]) -> str:
    """Return the second opinions of a prove run in one line: how many of the decided queries the
    second solver confirmed and, where it left some undecided, that those are not confirmations
    ('' when no second opinion was asked)."""
    opinions = [r.opinion for r in results if r.opinion is not None]
    if not opinions:
        return ""
    queries, confirmed = sum(o.queries for o in opinions), sum(o.confirmed for o in opinions)
    undecided, disagreements = sum(len(o.undecided) for o in opinions), sum(len(o.disagreements) for o in opinions)
    text = f"second opinion ({opinions[0].solver}): {confirmed:,} of {queries:,} decided queries confirmed"
    if disagreements:
        text += f"; {disagreements:,} in DISAGREEMENT"
    if undecided:
        text += (f"; {undecided:,} undecided, which is not agreement: the verdicts behind them rest on Z3 alone "
                 "(raise --second-opinion-rlimit)")
    return text
