"""A second opinion: the queries behind a verdict re-decided by cvc5 from their SMT-LIB text.

Every decided query of a theorem's session (Z3 said sat or unsat) is handed to cvc5 as the very
SMT-LIB 2 script `--smt2-dir` writes, so what is checked is what another tool could check, under
its own deterministic resource limit (cvc5's `rlimit-per`, `Limits.second_rlimit`; cvc5's units
cost far more time than Z3's, so the number differs). An unsat must stay
unsat; a sat must stay sat, and Z3's model, asserted as equalities, must satisfy the script in
cvc5 too. cvc5 answering unknown leaves the query undecided; any other answer is a
DISAGREEMENT, whose script is kept on disk for a report. cvc5 is an optional dependency
(`pip install attnws[cvc5]`).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from attnws.spec.errors import UsageError

from .gateway import Answer, Limits, write_smt2
from .settings import SOLVERS
CONFIRMED, UNDECIDED, DISAGREEMENT = "confirmed", "undecided", "DISAGREEMENT"


@dataclass(frozen=True)
class Opinion:
    """What the second solver said of a theorem's decided queries. `undecided` and
    `disagreements` are one line each ("query: what"); seconds are the second solver's."""

    solver: str
    queries: int
    confirmed: int
    undecided: tuple[str, ...] = ()
    disagreements: tuple[str, ...] = ()
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return DISAGREEMENT if self.disagreements else UNDECIDED if self.undecided else CONFIRMED

    def describe(self) -> str:
        """Return the opinion in words, as `prove` prints it; an undecided query is said to be
        unconfirmed, never counted as agreement."""
        if self.disagreements:
            return f"DISAGREEMENT with {self.solver}: " + "; ".join(self.disagreements)
        if self.undecided:
            return (f"{self.solver} confirmed {self.confirmed} of {self.queries} queries; {len(self.undecided)} "
                    f"undecided, not confirmed (they rest on Z3 alone): {self.undecided[0]}")
        return f"confirmed by {self.solver} ({self.queries} queries)"

    def as_dict(self, timing: bool = True) -> dict[str, Any]:
        out = {"solver": self.solver, "verdict": self.verdict, "queries": self.queries, "confirmed": self.confirmed,
               "undecided": list(self.undecided), "disagreements": list(self.disagreements)}
        if timing:
            out["seconds"] = round(self.seconds, 3)
        return out


def require_solver(name: str) -> None:
    """Raise UsageError unless the named second solver can be used."""
    if name not in SOLVERS:
        raise UsageError(f"--second-opinion {name!r}: the solvers known are {', '.join(SOLVERS)}")
    try:
        import cvc5  # noqa: F401
    except ImportError:
        raise UsageError("--second-opinion cvc5 needs the cvc5 package: pip install 'attnws[cvc5]'") from None


def _with_model(script: str, model: dict[str, int]) -> str:
    """Return the script with Z3's model asserted before its check-sat."""
    equalities = "".join(f"(assert (= {name} {value if value >= 0 else f'(- {-value})'}))\n"
                         for name, value in sorted(model.items()))
    head, sep, tail = script.rpartition("(check-sat)")
    return f"{head}{equalities}{sep}{tail}" if sep else script + equalities


def cvc5_check(script: str, limits: Limits, name: str = "query") -> tuple[str, str]:
    """Return cvc5's answer to an SMT-LIB 2 script: ("sat" | "unsat" | "unknown", reason)."""
    import cvc5

    solver = cvc5.Solver()
    solver.setOption("rlimit-per", str(limits.second_rlimit))
    if limits.timeout_ms is not None:
        solver.setOption("tlimit-per", str(limits.timeout_ms))
    solver.setOption("seed", str(limits.seed))
    solver.setLogic("QF_NIA")
    parser = cvc5.InputParser(solver)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, script, name)
    symbols = parser.getSymbolManager()
    answer = ""
    while True:
        command = parser.nextCommand()
        if command.isNull():
            break
        answer = command.invoke(solver, symbols).strip() or answer
    if answer in ("sat", "unsat"):
        return answer, ""
    reason = (f"cvc5 answered {answer or 'nothing'} (its resource limit {limits.second_rlimit:,} per query: "
              "raise --second-opinion-rlimit)")
    return "unknown", reason


def _keep(directory: Path | None, answer: Answer) -> Path:
    target = directory or Path(tempfile.mkdtemp(prefix="attnws-disagreement-"))
    return write_smt2(target, answer.name, answer.smt2)


def second_opinion(answers: Sequence[Answer], limits: Limits, solver: str = "cvc5") -> Opinion:
    """Re-decide every decided query of a theorem with the second solver (see the module doc)."""
    decided = [a for a in answers if a.status in ("sat", "unsat")]
    confirmed = 0
    undecided: list[str] = []
    disagreements: list[str] = []
    start = time.perf_counter()
    for answer in decided:
        if not answer.smt2:
            raise UsageError("a second opinion needs the queries' SMT-LIB text (set Limits.second_opinion)")
        status, reason = cvc5_check(answer.smt2, limits, answer.name)
        if status == answer.status == "sat" and answer.model is not None:
            status, reason = cvc5_check(_with_model(answer.smt2, answer.model), limits, answer.name)
            if status == "unsat":
                kept = _keep(limits.smt2_dir, answer)
                disagreements.append(f"{answer.name}: Z3's model does not satisfy the query in cvc5 (kept in {kept})")
                continue
        if status == "unknown":
            undecided.append(f"{answer.name}: {reason}")
        elif status == answer.status:
            confirmed += 1
        else:
            kept = _keep(limits.smt2_dir, answer)
            disagreements.append(f"{answer.name}: Z3 said {answer.status}, cvc5 said {status} (kept in {kept})")
    return Opinion(solver, len(decided), confirmed, tuple(undecided), tuple(disagreements),
                   time.perf_counter() - start)
