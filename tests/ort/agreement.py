"""Compare an attnws builder with ONNX Runtime's verdicts, case by case (MultiHeadAttention's
`attnws_verdict` here; each operator's test passes its own).

attnws's answer for a case is accept (the builder returned), reject (`InvalidArgument`),
unsupported (`Unsupported`: not compared, counted apart) or crash (any other exception: always a
disagreement). Cases on which ORT's process crashed have no verdict and are counted apart. A case
is excluded, by the name of the first matching `Exclusion`, when ORT's CPU answer cannot stand for
the CUDA kernel's; every other case is compared accept-for-accept.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from attnws.spec.errors import InvalidArgument, Unsupported
from attnws.spec.mha import builder

from .cases import MhaCase
from .engine import ORT_VERSION, OrtVerdict


@dataclass(frozen=True)
class AttnwsVerdict:
    """attnws's answer: `outcome` is "accept", "reject", "unsupported" or "crash"; `message` is
    the exception's text (with its type for a crash)."""

    outcome: str
    message: str = ""


@dataclass(frozen=True)
class Exclusion:
    """A check ORT's CPU kernel does not share with the CUDA kernel (or an input attnws does not
    model). `applies(case, ort)` says whether the CPU verdict of the case is that check's, so it
    says nothing about CUDA; `attnws_must_reject` marks checks by which CUDA rejects the case."""

    name: str
    reason: str
    source: str
    applies: Callable[[Any, OrtVerdict], bool]
    attnws_must_reject: bool = False


Applies = Callable[[Any, OrtVerdict], bool]


def rejected_with(*fragments: str) -> Applies:
    """Return a predicate: ORT rejected the case with a message containing one of the fragments."""
    return lambda case, ort: not ort.accepted and any(f in ort.message for f in fragments)


def accepted_and(condition: Callable[[Any], bool]) -> Applies:
    """Return a predicate: ORT accepted the case and the condition holds for it."""
    return lambda case, ort: ort.accepted and condition(case)


def has(*names: str) -> Callable[[Any], bool]:
    """Return a condition: the case has every named input."""
    return lambda case: all(case.shape(name) is not None for name in names)


@dataclass(frozen=True)
class Disagreement:
    """One compared case where ORT and attnws disagree."""

    case: Any
    ort: OrtVerdict
    attnws: AttnwsVerdict

    def describe(self) -> str:
        """Return the case's shapes and attributes and both answers, on a few lines."""
        ort = "accept" if self.ort.accepted else f"reject ({self.ort.stage}): {self.ort.message}"
        return f"{self.case.describe()}\n    ORT {ort}\n    attnws {self.attnws.outcome}: {self.attnws.message}"


@dataclass
class Report:
    """The comparison of a list of cases: counts by category, the excluded cases by exclusion
    name, every disagreement, and the compared cases both refuse (to compare their messages).
    `label` names the operator in the summary."""

    label: str = ""
    compared: int = 0
    agreed: int = 0
    agreed_accepts: int = 0
    unsupported: int = 0
    ort_crashed: int = 0
    excluded: defaultdict[str, list[Any]] = field(default_factory=lambda: defaultdict(list))
    shape_inference: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    both_reject: list[Disagreement] = field(default_factory=list)

    @property
    def agreed_rejects(self) -> int:
        return self.agreed - self.agreed_accepts

    def summary_lines(self) -> list[str]:
        """Return the `ORT <version> CPU: X/Y agree` line and the counts of what was not compared."""
        excluded = ", ".join(f"{name} {len(cases)}" for name, cases in sorted(self.excluded.items())) or "none"
        return [
            f"ORT {ORT_VERSION} CPU{' ' + self.label if self.label else ''}: {self.agreed}/{self.compared} agree",
            f"  agreed: both accept {self.agreed_accepts}, both reject {self.agreed_rejects}",
            f"  not compared: attnws Unsupported {self.unsupported}; ORT crashed {self.ort_crashed}; "
            f"excluded {sum(len(cases) for cases in self.excluded.values())} "
            f"({excluded})",
            f"  ONNX type/shape inference rejected {self.shape_inference} static-shape models "
            f"(judged again with shapeless inputs)",
        ]


def attnws_verdict(case: MhaCase) -> AttnwsVerdict:
    """Return attnws's answer for the case (the builder is looked up at call time, so that a test
    can monkeypatch it)."""
    try:
        builder.build_mha_problem(
            *case.shapes, element_size=case.element_size, num_heads=case.num_heads,
            has_present=case.has_present, unidirectional=case.unidirectional,
        )
    except InvalidArgument as error:
        return AttnwsVerdict("reject", str(error))
    except Unsupported as error:
        return AttnwsVerdict("unsupported", str(error))
    except Exception as error:  # noqa: BLE001  (a builder crash is a disagreement to report, not a test error)
        return AttnwsVerdict("crash", f"{type(error).__name__}: {error}")
    return AttnwsVerdict("accept")


def compare(cases: Sequence[Any], ort_verdicts: Sequence[OrtVerdict], exclusions: Sequence[Exclusion],
            verdict_of: Callable[[Any], AttnwsVerdict] | None = None, label: str = "") -> Report:
    """Return the report of attnws against ORT over the cases (ort_verdicts in the same order);
    `verdict_of` gives attnws's answer for a case (MultiHeadAttention's `attnws_verdict` when None)."""
    report = Report(label)
    for case, ort in zip(cases, ort_verdicts, strict=True):
        report.shape_inference += ort.shape_inference is not None
        mine = (verdict_of or attnws_verdict)(case)
        if mine.outcome == "crash":  # never excused: the builder must answer every case
            report.compared += 1
            report.disagreements.append(Disagreement(case, ort, mine))
            continue
        if mine.outcome == "unsupported":
            report.unsupported += 1
            continue
        if ort.stage == "crash":
            report.ort_crashed += 1
            continue
        excluded = next((e.name for e in exclusions if e.applies(case, ort)), None)
        if excluded is not None:
            report.excluded[excluded].append(case)
            continue
        report.compared += 1
        if mine.outcome == ("accept" if ort.accepted else "reject"):
            report.agreed += 1
            report.agreed_accepts += ort.accepted
            if not ort.accepted:
                report.both_reject.append(Disagreement(case, ort, mine))
        else:
            report.disagreements.append(Disagreement(case, ort, mine))
    return report
