"""On a real GPU: Numba allocates through the recording memory manager, nothing escapes the count,
and a realistic shape validates."""

from __future__ import annotations

import pytest

from attnws.kernels import validate_shape
from attnws.spec import Op, RuntimeConfig
from attnws.spec.hints import Geometry


@pytest.mark.gpu
@pytest.mark.parametrize("geometry, sm", [
    (Geometry(Op.PMHA, 2, batch=4, seq=128, heads=12, head_size=64, tokens=400), 80),
    (Geometry(Op.PA, 2, batch=4, seq=128, heads=12, head_size=64, tokens=400), 90),
    (Geometry(Op.PA, 4, batch=2, seq=64, heads=4, head_size=32, tokens=100), 90),
], ids=["pmha-fp16-trt-sm80", "pa-fp16-mea-sm90", "pa-fp32-unfused-sm90"])
def test_realistic_shape_on_the_gpu(geometry, sm):
    report = validate_shape(geometry, RuntimeConfig.make(sm=sm))
    assert report.device == "cuda"
    assert report.observed_untagged == 0, "the recording memory manager is not active"
    assert report.passed, report.as_dict()
