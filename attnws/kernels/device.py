"""Which device the kernels run on: a real GPU when Numba sees one, the CUDA simulator otherwise.

`select_mode` must run before anything imports numba: Numba reads `NUMBA_ENABLE_CUDASIM` once, at
import. It never overrides an explicit setting; without one, a machine with no NVIDIA driver
(no /dev/nvidiactl and no libcuda) gets the simulator.
"""

from __future__ import annotations

import ctypes.util
import os
import sys

from ..spec.errors import UsageError

SIMULATOR_VARIABLE = "NUMBA_ENABLE_CUDASIM"
CUDA = "cuda"
SIMULATOR = "simulator"


def driver_present() -> bool:
    """Return whether an NVIDIA driver is installed (device node or driver library)."""
    return os.path.exists("/dev/nvidiactl") or ctypes.util.find_library("cuda") is not None


def select_mode() -> None:
    """Set NUMBA_ENABLE_CUDASIM=1 when it is unset, numba is not yet imported and no driver exists."""
    if SIMULATOR_VARIABLE in os.environ or "numba" in sys.modules:
        return
    if not driver_present():
        os.environ[SIMULATOR_VARIABLE] = "1"


def device_kind() -> str:
    """Return "simulator" or "cuda"; raise UsageError when Numba runs for a GPU it cannot use."""
    from numba import config, cuda

    if config.ENABLE_CUDASIM:
        return SIMULATOR
    if not cuda.is_available():
        raise UsageError(
            f"Numba targets a real GPU ({SIMULATOR_VARIABLE} is off, or numba was imported before "
            f"attnws.kernels could choose) but finds none usable; set {SIMULATOR_VARIABLE}=1 for the simulator"
        )
    return CUDA
