"""Kernel tests run on the CUDA simulator unless Numba sees a GPU; `gpu` tests need a real one."""

from __future__ import annotations

import pytest

import attnws.kernels  # noqa: F401  (selects the device before numba is imported)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from attnws.kernels.device import CUDA, device_kind

    if device_kind() == CUDA:
        return
    skip = pytest.mark.skip(reason="needs a real CUDA GPU (running on the simulator)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
