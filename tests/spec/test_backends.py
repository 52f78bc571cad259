"""The TRT kernel tables, held against ONNX Runtime 1.31.1's source and its shipped binary.

Source (paths under onnxruntime/contrib_ops/cuda/bert/tensorrt_fused_multihead_attention/):
- fused_multihead_attention_v2.h @ 0b87bccca826d31ca5550db5f6fd8ceada29e6a0 (2025-01-01; #29143,
  2026-06-18, then removed its causal entries), sMhaKernelMetaInfosV2: non-causal fp16 XMMA kernels
  sm70 d64 S {64, 96, 128, 256, 384}; sm75, sm80 and sm86 d32 and d64 at S {32, ..., 384} (kSM_80
  has d = 32 since 44101e877, 2023-08-31).
- fused_multihead_attention.h, loadXMMAKernels: sm86 and sm89 also load the kSM_80 kernels;
  isValid(s) is membership in the S of every loaded kernel.
- mha_runner.cu: NormalizeSequenceLength's buckets; IsSupported's head sizes {32, 64} (sm70: 64).
Binary: tests/data/ort-1.31.1-trt-kernels.txt, the kernel names in the onnxruntime-gpu 1.31.1
wheel's libonnxruntime_providers_cuda.so (tools/list_ort_wheel_kernels.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnws.spec.backends import trt
from attnws.spec.domain import CONCRETE

BUCKETS = (32, 64, 96, 128, 192, 256, 384)
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "ort-1.31.1-trt-kernels.txt"
CUBIN_SM = {70: 70, 75: 75, 80: 80, 86: 80, 89: 80}  # sm86 and sm89 run the kSM_80 cubins


def shipped_kernels() -> set[str]:
    return {line for line in SHIPPED.read_text().splitlines() if line and not line.startswith("#")}


def xmma_name(sm: int, head: int, seq: int) -> str:
    """Return the function name ORT looks up for a non-causal XMMA kernel (sm70 has its own scheme)."""
    cubin = CUBIN_SM[sm]
    if cubin == 70:
        return f"fused_multihead_attention_v2_fp16_{seq}_{head}_kernel_sm70"
    return f"fmha_v2_fp16_{seq}_{head}_sm{cubin}_kernel"


def test_the_non_causal_xmma_kernels_after_the_loader():
    assert trt.XMMA_KERNELS == {
        70: {64: (64, 96, 128, 256, 384)},
        75: {32: BUCKETS, 64: BUCKETS},
        80: {32: BUCKETS, 64: BUCKETS},
        86: {32: BUCKETS, 64: BUCKETS},
        89: {32: BUCKETS, 64: BUCKETS},
    }


def test_every_tabled_xmma_kernel_ships_in_the_wheel():
    shipped = shipped_kernels()
    missing = [xmma_name(sm, head, seq) for sm, heads in trt.XMMA_KERNELS.items()
               for head, seqs in heads.items() for seq in seqs if xmma_name(sm, head, seq) not in shipped]
    assert missing == []


def test_the_wheel_ships_no_xmma_kernel_the_table_lacks():
    tabled = {xmma_name(sm, head, seq) for sm, heads in trt.XMMA_KERNELS.items()
              for head, seqs in heads.items() for seq in seqs}
    pattern = re.compile(r"fmha_v2_fp16_\d+_\d+_sm\d+_kernel|fused_multihead_attention_v2_fp16_\d+_\d+_kernel_sm70")
    assert {k for k in shipped_kernels() if pattern.fullmatch(k)} <= tabled


def test_no_causal_kernel_ships():
    assert not [k for k in shipped_kernels() if "Causal" in k]


def test_trt_flash_head_sizes_are_the_shipped_flash_kernels():
    heads: dict[int, set[int]] = {}
    for name in shipped_kernels():
        m = re.fullmatch(r"fmha_v2_flash_attention_fp16_(?:\d+_\d+_S_(\d+)|0_(\d+))_sm(\d+)_kernel", name)
        if m:
            heads.setdefault(int(m.group(3)), set()).add(int(m.group(1) or m.group(2)))
    assert {sm: tuple(sorted(h)) for sm, h in heads.items()} == {
        sm: tuple(sorted(h)) for sm, h in trt.FLASH_HEAD_SIZES.items()}


def test_trt_cross_head_limits_are_the_shipped_cross_kernels():
    limits: dict[int, int] = {}
    for name in shipped_kernels():
        m = re.fullmatch(r"fmha_mhca_fp16_128_(\d+)_sm(\d+)_kernel", name)
        if m:
            limits[int(m.group(2))] = max(limits.get(int(m.group(2)), 0), int(m.group(1)))
    assert limits == {sm: trt.cross_max_head_size(sm) for sm in trt.CROSS_SMS}


def test_validity_is_any_loaded_kernels_sequence_length():
    assert trt.XMMA_VALID_SEQUENCES[70] == (64, 96, 128, 256, 384)
    assert all(trt.XMMA_VALID_SEQUENCES[sm] == BUCKETS for sm in (75, 80, 86, 89))


@pytest.mark.parametrize("sm, seq, bucket", [
    (80, 1, 32), (80, 32, 32), (80, 33, 64), (80, 97, 128), (80, 129, 192), (80, 193, 256), (80, 257, 384),
    (80, 385, 385), (70, 1, 64), (70, 129, 256),
])
def test_sequence_buckets(sm, seq, bucket):
    assert trt.normalized_seq(CONCRETE, sm, seq) == bucket


def test_isvalid_admits_no_head_size_without_a_kernel():
    assert {sm: trt.heads_without_kernels(sm) for sm in (70, 75, 80, 86, 89)} == {
        70: (), 75: (), 80: (), 86: (), 89: ()}


def test_a_table_without_an_entry_shows_the_runtime_failure(monkeypatch):
    """The planted bug: drop sm80's d = 32 kernels and the missing kernel is found again."""
    monkeypatch.setitem(trt.XMMA_KERNELS, 80, {64: BUCKETS})
    assert trt.heads_without_kernels(80) == (32,)
    assert not trt.kernel_found(CONCRETE, 80, 32, 128, True)
