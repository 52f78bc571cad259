"""`import attnws.spec` loads neither z3, numba nor onnx, and spec modules import only the stdlib."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.imports import imported_packages

SPEC = Path(__file__).resolve().parents[2] / "attnws" / "spec"


def test_importing_the_spec_loads_no_heavy_dependency():
    code = ("import sys, attnws.spec, attnws.spec.estimate, attnws.spec.target; "
            "print(sorted(m for m in ('z3', 'numba', 'onnx', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_spec_modules_import_only_the_standard_library_and_each_other():
    allowed = set(sys.stdlib_module_names)
    for path in SPEC.rglob("*.py"):
        names = imported_packages(path)
        assert names <= allowed, f"{path.name} imports {sorted(names - allowed)}"
