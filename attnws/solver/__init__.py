"""attnws.solver: Z3 proofs over the specification's own code (see README.md in this package).

Public API; the submodules are the implementation. Only `gateway` creates solvers.
"""

from .counterexamples import naive_cascade_shapes, nonmonotonic_pairs, shapes_document
from .domain import SymbolicDomain
from .encode import encode
from .gateway import Answer, Limits, Verdict
from .ledger import compute_ledger, ledger_differences
from .results import ProofResult, combined_verdict
from .theorems import DEFAULT_THEOREMS, FINDINGS, THEOREMS, prove_target
from .tight import TightPolicy, tight_policy, tight_report

__all__ = [
    "Answer", "DEFAULT_THEOREMS", "FINDINGS", "Limits", "ProofResult", "SymbolicDomain", "THEOREMS", "TightPolicy",
    "Verdict", "combined_verdict", "compute_ledger", "encode", "ledger_differences", "naive_cascade_shapes",
    "nonmonotonic_pairs", "prove_target", "shapes_document", "tight_policy", "tight_report",
]
