"""Every kernel, with the argument types the validator really launches it with (the packed routes'
and MultiHeadAttention's: strided views, masks, causality, the LSE, the accumulator, int32
offsets; GroupQueryAttention's routes: the Flash split-KV forward and combine at one split and at
two, XQA, MEA, unfused and the preparation's kernels; PagedAttention's routes: the paged decode and
its reduce, the dense gather under MEA with its accumulator, the paged Flash forward at one split
and at two with the unpadded combine, the cache kernels and the rotary prologue),
compiles to PTX for sm_80 and sm_90: the simulator runs kernels as Python and never
type-checks them. Skipped only
where the CUDA compiler toolchain (NVVM + NVRTC) is not installed (numba-cuda[cu13] brings it)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numba
import pytest
from numba import config

from attnws.kernels import validate_shape
from attnws.spec.options import RuntimeConfig

from gqa_shapes import gqa_geometry as gqa
from kernel_cases import BIAS_ROUTES, ROUTES
from test_gqa_routes import CASES as GQA_ROUTES
from test_mha_routes import ROUTES as MHA_ROUTES
from test_paged_routes import CASES as PAGED_ROUTES

SCRIPT = Path(__file__).with_name("ptx_compile.py")
EVERY_KERNEL_MODULE = {f"attnws.kernels.{name}" for name in (
    "backends.flash", "backends.mea", "backends.trt", "backends.unfused", "backends.strided", "packed.layouts",
    "sentinel_fill", "strided_copy", "backends.flash_split", "backends.xqa", "gqa.mea_route", "gqa.preparation", "gqa.unfused_route",
    "paged.paging", "paged.decode_route", "paged.flash_route", "paged.prologue")}
EVERY_KERNEL = {"trt_fused_attention", "trt_cross_attention", "trt_sequence_offsets", "flash_attention",
                "mea_attention", "strided_attention", "scaled_scores", "masked_softmax", "masked_softmax_keys",
                "attention_context", "projection_gemm", "qkv_materialize", "transpose_remove_padding", "fill_bytes",
                "strided_copy", "flash_fwd_splitkv", "flash_combine", "right_padded_rows", "cache_rows",
                "compaction_pass", "seq_lengths", "unpack_rotate", "windowed_softmax", "xqa_decode", "key_length_sums",
                "cache_new_rows", "gather_rows", "paged_decode_split_kv", "paged_decode_reduce", "paged_flash_splitkv",
                "rotary_prologue"}
# GroupQueryAttention's Flash route at one split (accumulators None) with a window, and at two with a softcap.
GQA_FLASH = ((gqa(1, 1, 4, 2, 8, 20, window=8), RuntimeConfig.make(sm=80, sm_count=16)),
             (gqa(1, 2, 2, 1, 8, 264, softcap=2.0), RuntimeConfig.make(sm=80, sm_count=16)))
# One route case per kernel the GQA routes add (the set EVERY_KERNEL checks): XQA with rotary Q,
# MEA's accumulator, a windowed cache's staging on unfused and its compaction.
GQA_KERNEL_CASES = ("xqa-rotary-two-batch-entries", "mea-accumulator-h136", "windowed-prompt-unfused",
                    "windowed-decode-compacts")
# One PagedAttention case per kernel signature: the decode route at two splits, MEA over the gather with
# its accumulator, Flash at one split and at two (accumulators and the unpadded combine), the rotary prologue.
PAGED_KERNEL_CASES = ("decode-empty-split", "mea-accumulator-h136", "flash-prefill", "flash-split-decode",
                      "decode-rotary")
ROOT = Path(__file__).resolve().parents[2]


def argument_type(value):
    return numba.typeof(value._ary if hasattr(value, "_ary") else value)


@pytest.mark.skipif(not config.ENABLE_CUDASIM, reason="records launches through the simulator's kernel wrapper")
def test_every_launched_kernel_compiles_for_sm80_and_sm90(monkeypatch, tmp_path):
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    launches = set()
    real_call = FakeCUDAKernel.__call__

    def recording_call(self, *args):
        if not self._device and self.fn.__module__.startswith("attnws."):
            launches.add((self.fn.__module__, self.fn.__name__, tuple(argument_type(a) for a in args)))
        return real_call(self, *args)

    monkeypatch.setattr(FakeCUDAKernel, "__call__", recording_call)
    for geometry, cfg, backend, _ in [*ROUTES.values(), *BIAS_ROUTES.values(), *MHA_ROUTES.values()]:
        validate_shape(geometry, cfg, backend)
    for geometry, cfg in [*GQA_FLASH, *(GQA_ROUTES[name][:2] for name in GQA_KERNEL_CASES),
                          *(PAGED_ROUTES[name][:2] for name in PAGED_KERNEL_CASES)]:
        validate_shape(geometry, cfg)
    path = tmp_path / "launches.pkl"
    path.write_bytes(pickle.dumps(sorted(launches, key=str)))
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(SCRIPT), str(path)], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode == 77:
        pytest.skip(done.stdout.strip()[:200])
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert {module for module, _, _ in launches} >= EVERY_KERNEL_MODULE
    assert {name for _, name, _ in launches} >= EVERY_KERNEL
