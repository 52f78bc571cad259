"""Compile recorded kernel signatures to PTX for sm_80 and sm_90 without a GPU (run as a script, simulator off).

Reads a pickle of [(module, kernel name, argument types)] from argv[1]; exits 0 when all compile for
every target, 77 when the CUDA compiler toolchain (NVVM / NVRTC) cannot be loaded, 1 on a compile
error. Numba asks the current device for its compute capability when it compiles a device-function
call, so that query is answered with the target's capability here.
"""

from __future__ import annotations

import importlib
import pickle
import sys
import types

TOOLCHAIN_MISSING = 77
TARGETS = ((8, 0), (9, 0))  # A100 and H100 / H200: the capabilities the validator's GPU runs use


def main(path: str) -> int:
    import numba.cuda.dispatcher as dispatcher
    from numba import cuda

    with open(path, "rb") as f:
        launches = pickle.load(f)
    for cc in TARGETS:
        dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
        for module, name, signature in launches:
            kernel = getattr(importlib.import_module(module), name)
            try:
                cuda.compile_ptx(kernel.py_func, signature, cc=cc)
            except Exception as error:  # the toolchain reports missing libraries with several exception types
                if "nvrtc" in str(error).lower() or "nvvm" in str(error).lower():
                    print(f"toolchain unavailable: {error}")
                    return TOOLCHAIN_MISSING
                print(f"sm_{cc[0]}{cc[1]} {module}.{name}{signature}: {error}")
                return 1
        print(f"sm_{cc[0]}{cc[1]}: {len(launches)} kernel signatures compiled")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
