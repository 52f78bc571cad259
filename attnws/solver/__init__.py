"""attnws.solver: Z3 proofs over the specification's own code (see README.md in this package).

Public API (loaded on first use: importing the package loads no Z3); the submodules are the
implementation. Only `gateway` creates solvers.
"""

import importlib
from typing import Any

EXPORTS = {
    "naive_cascade_shapes": "counterexamples", "nonmonotonic_pairs": "counterexamples",
    "shapes_document": "counterexamples", "SymbolicDomain": "domain", "encode": "encode", "Answer": "gateway",
    "Limits": "gateway", "Verdict": "gateway", "compute_ledger": "ledger", "ledger_differences": "ledger",
    "ProofResult": "results", "combined_verdict": "results", "DEFAULT_THEOREMS": "claims", "FINDINGS": "claims",
    "THEOREMS": "theorems", "prove_target": "theorems", "TightPolicy": "tight", "tight_policy": "tight",
    "tight_report": "tight",
}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
