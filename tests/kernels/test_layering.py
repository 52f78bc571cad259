"""Imports go one way (spec <- kernels), and the device is chosen before numba loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from attnws.kernels.device import driver_present

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run([sys.executable, "-c", code], env={**clean, "PYTHONPATH": str(ROOT), **env},
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip()


def test_spec_loads_no_numba_and_registering_validate_loads_none_either():
    assert python("import sys, attnws.spec, attnws.kernels.commands; print('numba' in sys.modules)") == "False"


def test_kernels_import_only_the_spec_layer():
    code = ("import sys, attnws.kernels.validate; print(sorted(m for m in sys.modules "
            "if m.startswith('attnws.') and m.split('.')[1] not in ('spec', 'kernels')))")
    assert python(code) == "[]"


def test_simulator_is_chosen_without_a_driver_and_an_explicit_setting_wins():
    expected = "None" if driver_present() else "1"
    assert python("import os, attnws.kernels; print(os.environ.get('NUMBA_ENABLE_CUDASIM'))") == expected
    explicit = python("import os, attnws.kernels; print(os.environ['NUMBA_ENABLE_CUDASIM'])", NUMBA_ENABLE_CUDASIM="0")
    assert explicit == "0"
