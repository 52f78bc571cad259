"""attnws: proven workspace bounds for ONNX Runtime's packed attention kernels.

Layers (imports go one way): `attnws.spec` (pure Python specification) <- `attnws.solver` (Z3)
and `attnws.spec` <- `attnws.kernels` (Numba CUDA). `attnws.cli` is the only module that prints.
"""

__version__ = "0.1.0"
