"""On a real GPU: MultiHeadAttention routes at realistic sizes validate, with the recording memory
manager seeing every allocation (skipped on the simulator)."""

from __future__ import annotations

import pytest

from attnws.kernels import validate_shape
from attnws.spec import Geometry, Op, RuntimeConfig
from attnws.spec.mha.problem import MaskType, MhaFormat


@pytest.mark.gpu
@pytest.mark.parametrize("geometry, sm, backend", [
    (Geometry(Op.MHA, 2, batch=2, seq=64, heads=4, head_size=32, v_head_size=64, kv_seq=96,
              mask=MaskType.KEY_PADDING), 80, "unfused"),
    (Geometry(Op.MHA, 2, batch=2, seq=32, heads=4, head_size=64, kv_seq=32, past=64, with_past=True,
              with_present=True, qkv_bias=True, unidirectional=True), 80, "flash"),
    (Geometry(Op.MHA, 2, batch=2, seq=48, heads=4, head_size=64, kv_seq=100, qkv_bias=True), 75, "trt_cross"),
    (Geometry(Op.MHA, 2, batch=2, seq=16, heads=2, head_size=64, v_head_size=192, kv_seq=80,
              mha_format=MhaFormat.SEPARATE, qkv_bias=True), 90, "mea"),
], ids=["unfused-2d-mask-sm80", "flash-past-causal-sm80", "trt-cross-sm75", "mea-accumulator-sm90"])
def test_realistic_mha_shape_on_the_gpu(geometry, sm, backend):
    report = validate_shape(geometry, RuntimeConfig.make(sm=sm))
    assert report.device == "cuda" and report.backend == backend
    assert report.observed_untagged == 0, "the recording memory manager is not active"
    assert report.passed, report.as_dict()
