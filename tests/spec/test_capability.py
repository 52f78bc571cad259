"""The TRT kernel tables, pinned to ONNX Runtime's source (paths under
onnxruntime/contrib_ops/cuda/bert/tensorrt_fused_multihead_attention/):
- fused_multihead_attention_v2.h @ a069e6096ec25899845b298b412001732dc6a7c6, sMhaKernelMetaInfosV2:
  non-causal fp16 XMMA kernels sm70 d64 S {64, 96, 128, 256, 384}; sm75 d32 and d64, sm80 d64 (no
  kSM_80 d32 entry), sm86 d32 and d64 at S {32, 64, 96, 128, 192, 256, 384}; sm89 causal only.
- fused_multihead_attention.h @ 76c70c570d0ea2a56b10daa9a007ad8e58e2a1cc, loadXMMAKernels: sm86 and
  sm89 also load the kSM_80 kernels; isValid(s) is membership in the S of every loaded kernel.
- mha_runner.cu: NormalizeSequenceLength's buckets; IsSupported's head sizes {32, 64} (sm70: 64).
"""

from __future__ import annotations

import pytest

from attnws.spec import capability as cap
from attnws.spec.domain import CONCRETE

BUCKETS = (32, 64, 96, 128, 192, 256, 384)


def test_the_non_causal_xmma_kernels_after_the_loader():
    assert cap.TRT_XMMA_KERNELS == {
        70: {64: (64, 96, 128, 256, 384)},
        75: {32: BUCKETS, 64: BUCKETS},
        80: {64: BUCKETS},
        86: {32: BUCKETS, 64: BUCKETS},
        89: {64: BUCKETS},
    }


def test_validity_is_any_loaded_kernels_sequence_length():
    assert cap.TRT_XMMA_VALID_SEQUENCES[70] == (0, 64, 96, 128, 256, 384)
    assert all(cap.TRT_XMMA_VALID_SEQUENCES[sm] == (0, *BUCKETS) for sm in (75, 80, 86, 89))


@pytest.mark.parametrize("sm, seq, bucket", [
    (80, 1, 32), (80, 32, 32), (80, 33, 64), (80, 97, 128), (80, 129, 192), (80, 193, 256), (80, 257, 384),
    (80, 385, 385), (70, 1, 64), (70, 129, 256),
])
def test_sequence_buckets(sm, seq, bucket):
    assert cap.trt_normalized_seq(CONCRETE, sm, seq) == bucket


def test_heads_that_isvalid_admits_without_a_kernel():
    assert {sm: cap.trt_heads_without_kernels(sm) for sm in (70, 75, 80, 86, 89)} == {
        70: (), 75: (), 80: (32,), 86: (), 89: (32,)}
