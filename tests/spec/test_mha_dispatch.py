"""MultiHeadAttention's runtime cascade against ONNX Runtime's ComputeInternal: a shape each backend
is picked for, and for every gate a shape where exactly that gate is why the backend is skipped
(the reason in `Dispatch.skipped`). Plus the thresholds: MEA's fp32 S-or-L >= 256, the fused
runner's S == L, the cross kernel's L <= 128, the masks [B] / [3B + 2] / [B, T], and packed QKV
taking Flash at every S (the 513 threshold compares against a format MHA never has).

Upstream (microsoft/onnxruntime):
- CC: onnxruntime/contrib_ops/cuda/bert/multihead_attention.cc (index id 7446068643): the cascade
  Flash, cuDNN, TRT cross, TRT fused runner, MEA, unfused, and each gate.
- CROSS: .../tensorrt_fused_multihead_attention/cross_attention/fmha_cross_attention.h (id 2616572466):
  has_fused_cross_attention_kernel: sm in {75, 80, 86, 89}, 0 < H <= (sm75 ? 64 : 256), L <= 128.
- FLASH: .../flash_attention/flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03: is_supported:
  compute capability major >= 8 (since #24584), H % 8 == 0, H <= 256.
- MEAH: .../cutlass_fmha/memory_efficient_attention.h (id 1363929900): sm >= 53 (fp16) / 50 (fp32),
  H and Hv multiples of 8 and <= 1024.
- CUDNN: .../cudnn_fmha/cudnn_flash_attention.cu (id 65766615615): major >= 8, H, Hv % 8 == 0 and <= 256.
- COMMON: contrib_ops/cpu/bert/attention_common.h (id 58208764897): the environment variable names and
  kDefaultMinSeqLenForEfficientAttentionFp32 = 256.
"""

from __future__ import annotations

from functools import partial

import re

import pytest

from attnws.spec import Backend, RuntimeConfig, dispatch
from attnws.spec.dispatch import runner_validity
from attnws.spec.errors import InvalidArgument
from attnws.spec.domain import CONCRETE
from attnws.spec.mha.dispatch import cascade_gates

from .helpers import mha_problem

NO_FLASH = {"ORT_DISABLE_FLASH_ATTENTION": "1"}
NO_CROSS = {"ORT_DISABLE_FUSED_CROSS_ATTENTION": "1"}
NO_TRT = {"ORT_DISABLE_FUSED_ATTENTION": "1"}
CUDNN_ON = {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"}
ONLY_MEA = {**NO_FLASH, **NO_CROSS, **NO_TRT}


mha = partial(mha_problem, s=4, l=6, h=64)  # noqa: E731


def config(sm=80, env=None, **kw):
    return RuntimeConfig.make(sm=sm, env=env, **kw)


def picked(p, **kw):
    return dispatch(p, config(**kw)).backend


# One shape per backend where ORT's cascade picks it.
PICKS = [
    ("flash: fp16 sm80 separate", mha(), {}, Backend.FLASH),
    ("flash: with past and present", mha(past=5), {}, Backend.FLASH),
    ("flash: packed QKV at S = 64 (no 513 threshold for MHA)", mha("packed_qkv", s=64), {}, Backend.FLASH),
    ("flash: sm90", mha(), dict(sm=90), Backend.FLASH),
    ("flash: unidirectional", mha(causal=True), {}, Backend.FLASH),
    ("cudnn: enabled, flash disabled", mha(), dict(env={**CUDNN_ON, **NO_FLASH}), Backend.CUDNN),
    ("cudnn: H != Hv skips flash", mha(hv=32), dict(env=CUDNN_ON), Backend.CUDNN),
    ("cudnn: [B] key-length mask", mha(mask="B"), dict(env=CUDNN_ON), Backend.CUDNN),
    ("cudnn: attention bias and past", mha(attn_bias=True, past=3), dict(env=CUDNN_ON), Backend.CUDNN),
    ("trt_cross: S = 4, L = 6", mha(), dict(env=NO_FLASH), Backend.TRT_CROSS),
    ("trt_cross: L = 128", mha(l=128), dict(env=NO_FLASH), Backend.TRT_CROSS),
    ("trt_cross: packed KV", mha("packed_kv"), dict(env=NO_FLASH), Backend.TRT_CROSS),
    ("trt_cross: sm75 H = 64", mha(), dict(sm=75), Backend.TRT_CROSS),
    ("trt: separate S = L = 256 (L > 128 skips cross)", mha(s=256, l=256), dict(env=NO_FLASH), Backend.TRT),
    ("trt: packed QKV S = 128", mha("packed_qkv", s=128), dict(env=NO_FLASH), Backend.TRT),
    ("trt: [B] mask", mha(s=64, l=64, mask="B"), {}, Backend.TRT),
    ("trt: sm75 packed QKV", mha("packed_qkv", s=64), dict(sm=75), Backend.TRT),
    ("mea: fp16, S != L, L = 200", mha(l=200), dict(env=NO_FLASH), Backend.MEA),
    ("mea: fp16 sm90 (no TRT kernels)", mha(s=64, l=64), dict(sm=90, env=NO_FLASH), Backend.MEA),
    ("mea: fp32 S = 256", mha(e=4, s=256, l=1), {}, Backend.MEA),
    ("mea: fp32 L = 256", mha(e=4, s=1, l=256), {}, Backend.MEA),
    ("mea: [3B + 2] mask", mha(mask="3B+2"), {}, Backend.MEA),
    ("mea: fp16 past and present, flash disabled", mha(past=5), dict(env=NO_FLASH), Backend.MEA),
    ("mea: H != Hv, cuDNN off", mha(hv=32), {}, Backend.MEA),
    ("unfused: fp32 S = L = 255", mha(e=4, s=255, l=255), {}, Backend.UNFUSED),
    ("unfused: [B, T] mask", mha(mask="BT"), {}, Backend.UNFUSED),
    ("unfused: [B, S, T] mask", mha(mask="BST", past=2), {}, Backend.UNFUSED),
    ("unfused: fp32 H = 8, Hv = 1024, S = 16, L = 1", mha(e=4, s=16, l=1, n=1, h=8, hv=1024), {}, Backend.UNFUSED),
]


@pytest.mark.parametrize("p,kw,expected", [r[1:] for r in PICKS], ids=[r[0] for r in PICKS])
def test_backend_is_picked(p, kw, expected):
    assert picked(p, **kw) is expected


def test_every_backend_is_picked_somewhere():
    assert {r[3] for r in PICKS} == {Backend.FLASH, Backend.CUDNN, Backend.TRT_CROSS, Backend.TRT, Backend.MEA,
                                     Backend.UNFUSED}


def failing_gates(p, cfg, backend):
    """The names of the gates of `backend` that fail (to check that the row isolates one gate)."""
    gates = dict(cascade_gates(CONCRETE, p, cfg, runner_validity(CONCRETE, p, cfg)))[backend]
    return [g.name for g in gates if not g.cond]


# (id, problem, config kwargs, backend, reason (regex, after "<backend>: "), gates failing with it)
GATES = [
    # Flash (CC: use_flash_attention; FLASH: is_supported).
    ("flash built", mha(), dict(flash_build=False), Backend.FLASH, r"not compiled in \(USE_FLASH_ATTENTION off\)", 2),
    ("flash fp16", mha(e=4), {}, Backend.FLASH, "needs fp16, element size = 4", 1),
    ("flash enabled", mha(), dict(env=NO_FLASH), Backend.FLASH, "disabled by ORT_DISABLE_FLASH_ATTENTION=1", 1),
    ("flash enabled by mask", mha(), dict(sdpa_kernel=2), Backend.FLASH,
     r"disabled by sdpa_kernel = 2 \(bit 1 not set\)", 1),
    ("flash attention bias", mha(attn_bias=True), {}, Backend.FLASH, "attention bias present", 1),
    ("flash mask [B]", mha(mask="B"), {}, Backend.FLASH, r"key padding mask present \(rank 1\)", 1),
    ("flash mask [3B+2]", mha(mask="3B+2"), {}, Backend.FLASH, r"key padding mask present \(rank 1\)", 1),
    ("flash H != Hv", mha(hv=32), {}, Backend.FLASH, "needs H == Hv, H = 64, Hv = 32", 1),
    ("flash sm75", mha(), dict(sm=75), Backend.FLASH, "sm75, H = 64", 1),
    ("flash H = 12", mha(h=12), {}, Backend.FLASH, "sm80, H = 12", 1),
    ("flash H = 264", mha(h=264), {}, Backend.FLASH, "sm80, H = 264", 1),
    # cuDNN (CC: use_cudnn_sdpa; CUDNN: is_supported).
    ("cudnn fp16", mha(e=4), dict(env=CUDNN_ON), Backend.CUDNN, "needs fp16, element size = 4", 1),
    ("cudnn enabled", mha(), dict(env=NO_FLASH), Backend.CUDNN, "disabled", 1),
    ("cudnn mask [3B+2]", mha(mask="3B+2"), dict(env=CUDNN_ON), Backend.CUDNN,
     r"needs no mask or a \[B\] key-length mask", 1),
    ("cudnn mask [B, T]", mha(mask="BT"), dict(env=CUDNN_ON), Backend.CUDNN, r"needs no mask or a \[B\]", 1),
    ("cudnn sm75", mha(), dict(sm=75, env=CUDNN_ON), Backend.CUDNN, "sm75, H = 64, Hv = 64", 1),
    ("cudnn Hv = 264", mha(hv=264), dict(env=CUDNN_ON), Backend.CUDNN, "sm80, H = 64, Hv = 264", 1),
    # is_supported's causal rule (cuDNN >= 9.6): for S > 1 the query may not be longer than T = P + L.
    ("cudnn causal S > T", mha(s=8, l=6, causal=True), dict(env={**CUDNN_ON, **NO_FLASH}), Backend.CUDNN,
     "causal attention needs S <= 1 or S <= T .*S = 8, T = 6", 1),
    # TRT fused cross attention (CC: use_fused_cross_attention; CROSS).
    ("trt_cross built", mha(), dict(env=NO_FLASH, trt_build=False), Backend.TRT_CROSS,
     r"not compiled in \(USE_TRT_FUSED_ATTENTION off\)", 1),
    ("trt_cross fp16", mha(e=4), {}, Backend.TRT_CROSS, "needs fp16, element size = 4", 1),
    ("trt_cross enabled", mha(), dict(env={**NO_FLASH, **NO_CROSS}), Backend.TRT_CROSS,
     "disabled by ORT_DISABLE_FUSED_CROSS_ATTENTION=1", 1),
    ("trt_cross unidirectional", mha(causal=True), dict(env=NO_FLASH), Backend.TRT_CROSS,
     r"unidirectional \(causal\)", 1),
    ("trt_cross mask [B]", mha(mask="B"), {}, Backend.TRT_CROSS, "key padding mask present", 1),
    ("trt_cross attention bias", mha(attn_bias=True), {}, Backend.TRT_CROSS, "attention bias present", 1),
    ("trt_cross present", mha(present=True), dict(env=NO_FLASH), Backend.TRT_CROSS, "past or present", 1),
    ("trt_cross past", mha(past=2), dict(env=NO_FLASH), Backend.TRT_CROSS, "past or present", 1),
    ("trt_cross cross format", mha("cross"), dict(env=NO_FLASH), Backend.TRT_CROSS, "format cross is not served", 1),
    ("trt_cross packed qkv", mha("packed_qkv"), dict(env=NO_FLASH), Backend.TRT_CROSS,
     "format packed_qkv is not served", 1),
    ("trt_cross H != Hv", mha(hv=32), {}, Backend.TRT_CROSS, "needs H == Hv, H = 64, Hv = 32", 1),
    ("trt_cross L = 129", mha(l=129), dict(env=NO_FLASH), Backend.TRT_CROSS, "sm80, H = 64, L = 129", 1),
    ("trt_cross sm90", mha(), dict(sm=90, env=NO_FLASH), Backend.TRT_CROSS, "sm90, H = 64, L = 6", 1),
    ("trt_cross sm75 H = 128", mha(h=128), dict(sm=75), Backend.TRT_CROSS, "sm75, H = 128, L = 6", 1),
    ("trt_cross sm80 H = 264", mha(h=264), {}, Backend.TRT_CROSS, "sm80, H = 264, L = 6", 1),
    # TRT fused runner (CC: use_fused_runner); cross turned off so that TRT is reached.
    ("trt fp16", mha(e=4, s=64, l=64), {}, Backend.TRT, "needs fp16, element size = 4", 1),
    ("trt enabled", mha(s=64, l=64), dict(env={**NO_FLASH, **NO_CROSS, **NO_TRT}), Backend.TRT,
     "disabled by ORT_DISABLE_FUSED_ATTENTION=1", 1),
    ("trt unidirectional", mha(s=64, l=64, causal=True), dict(env={**NO_FLASH, **NO_CROSS}), Backend.TRT,
     r"unidirectional \(causal\)", 1),
    ("trt built", mha(s=64, l=64), dict(env={**NO_FLASH, **NO_CROSS}, trt_build=False), Backend.TRT,
     r"not compiled in \(USE_TRT_FUSED_ATTENTION off\)", 1),
    ("trt attention bias", mha(s=64, l=64, attn_bias=True), dict(env=NO_CROSS), Backend.TRT, "attention bias present", 1),
    ("trt cross format", mha("cross", s=64, l=64), dict(env=NO_FLASH), Backend.TRT, "format cross is not served", 1),
    ("trt packed kv", mha("packed_kv", s=64, l=64), dict(env={**NO_FLASH, **NO_CROSS}), Backend.TRT,
     "format packed_kv is not served", 1),
    ("trt present", mha(s=64, l=64, present=True), dict(env=NO_FLASH), Backend.TRT, "past or present", 1),
    ("trt mask [3B+2]", mha(s=64, l=64, mask="3B+2"), {}, Backend.TRT, r"needs no mask or a \[B\] key-length mask", 1),
    ("trt mask [B, T]", mha(s=64, l=64, mask="BT"), {}, Backend.TRT, r"needs no mask or a \[B\] key-length mask", 1),
    ("trt H != Hv", mha(s=64, l=64, hv=32), dict(env=NO_CROSS), Backend.TRT, "needs H == Hv, H = 64, Hv = 32", 1),
    ("trt S != L", mha(s=256, l=257), dict(env=NO_FLASH), Backend.TRT, "self attention only: S = 256, L = 257", 1),
    ("trt S != L, L <= 128", mha(s=64, l=65), dict(env={**NO_FLASH, **NO_CROSS}), Backend.TRT,
     "self attention only: S = 64, L = 65", 1),
    ("trt runner support H = 128 S = 64", mha(s=64, l=64, h=128), dict(env={**NO_FLASH, **NO_CROSS}), Backend.TRT,
     "no TRT kernel for sm80, H = 128, S = 64", 1),
    ("trt runner support sm90", mha(s=64, l=64), dict(sm=90, env={**NO_FLASH, **NO_CROSS}), Backend.TRT,
     "no TRT kernel for sm90", 2),
    ("trt runner valid", mha(s=64, l=64), dict(env={**NO_FLASH, **NO_CROSS}, trt_runner="unavailable"), Backend.TRT,
     "no loadable cubin", 1),
    # MEA (CC: use_memory_efficient_attention; MEAH), everything before it switched off.
    ("mea built", mha(), dict(env=ONLY_MEA, mea_build=False), Backend.MEA,
     r"not compiled in \(USE_MEMORY_EFFICIENT_ATTENTION off\)", 2),
    ("mea enabled", mha(), dict(env={**ONLY_MEA, "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "true"}), Backend.MEA,
     "disabled by ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION=true", 1),
    ("mea fp32 S = L = 255", mha(e=4, s=255, l=255), {}, Backend.MEA, "fp32 needs S or L >= 256, S = 255, L = 255", 1),
    ("mea fp32 threshold from env", mha(e=4, s=8, l=9), dict(env={"ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32": "10"}),
     Backend.MEA, "fp32 needs S or L >= 10, S = 8, L = 9", 1),
    ("mea fp16 attention bias S = 12", mha(s=12, attn_bias=True), {}, Backend.MEA,
     "attention bias needs S % 8 == 0, S = 12", 1),
    ("mea fp32 attention bias S = 264", mha(e=4, s=264, attn_bias=True), {}, Backend.MEA,
     "attention bias needs S % 16 == 0, S = 264", 1),
    ("mea mask [B]", mha(mask="B"), dict(env=ONLY_MEA), Backend.MEA, r"needs no mask or the \[3B \+ 2\] key-start mask",
     1),
    ("mea mask [B, T]", mha(mask="BT"), {}, Backend.MEA, r"needs no mask or the \[3B \+ 2\]", 1),
    ("mea H = 12", mha(h=12), dict(env=ONLY_MEA), Backend.MEA, "sm80, H = 12, Hv = 12", 1),
    ("mea Hv = 1032", mha(hv=1032), dict(env=ONLY_MEA), Backend.MEA, "sm80, H = 64, Hv = 1032", 1),
]


@pytest.mark.parametrize("p,kw,backend,reason,count", [r[1:] for r in GATES], ids=[r[0] for r in GATES])
def test_gate_is_the_reason_the_backend_is_skipped(p, kw, backend, reason, count):
    cfg = config(**kw)
    outcome = dispatch(p, cfg)
    skipped = dict(outcome.skipped)
    assert backend in skipped, f"{backend.value} was not skipped: picked {outcome.backends}"
    assert skipped[backend].startswith(f"{backend.value}: ")
    assert re.search(reason, skipped[backend]), skipped[backend]
    # The row isolates the gate: it fails alone, or with the gates it implies (a backend not built
    # is also not enabled; an sm with no TRT kernels has no valid runner either).
    assert len(failing_gates(p, cfg, backend)) == count


def _first_failing(p, cfg, backend):
    gates = dict(cascade_gates(CONCRETE, p, cfg, runner_validity(CONCRETE, p, cfg)))[backend]
    return next(g.name for g in gates if not g.cond)


def test_every_gate_of_the_cascade_has_a_row():
    cfg = config()
    every = {(b, g.name) for b, gates in cascade_gates(CONCRETE, mha(), cfg, True) for g in gates}
    covered = {(backend, _first_failing(p, config(**kw), backend)) for _, p, kw, backend, *_ in GATES}
    assert len(every) >= 38
    assert every <= covered, f"gates without a row: {sorted((b.value, n) for b, n in every - covered)}"


# Thresholds, each side of the boundary.
@pytest.mark.parametrize("s,l,expected", [
    (255, 255, Backend.UNFUSED), (256, 1, Backend.MEA), (1, 256, Backend.MEA), (256, 256, Backend.MEA),
])
def test_mea_fp32_threshold_is_s_or_l_at_least_256(s, l, expected):
    assert picked(mha(e=4, s=s, l=l)) is expected


def test_mea_fp32_threshold_in_bitmask_mode_is_zero():
    # attention_kernel_options.cc: the fp32 threshold defaults to 0 when sdpa_kernel is given.
    assert picked(mha(e=4, s=4, l=6), sdpa_kernel=2) is Backend.MEA  # EFFICIENT_ATTENTION bit


@pytest.mark.parametrize("l,expected", [(128, Backend.TRT_CROSS), (129, Backend.MEA)])
def test_cross_kernel_needs_l_at_most_128(l, expected):
    assert picked(mha(s=4, l=l), env=NO_FLASH) is expected


@pytest.mark.parametrize("s,l,expected", [(256, 256, Backend.TRT), (256, 257, Backend.MEA), (257, 256, Backend.MEA)])
def test_fused_runner_needs_s_equal_l(s, l, expected):
    assert picked(mha(s=s, l=l), env=NO_FLASH) is expected


@pytest.mark.parametrize("mask,expected", [
    (None, Backend.FLASH), ("B", Backend.TRT), ("3B+2", Backend.MEA), ("BT", Backend.UNFUSED), ("BST", Backend.UNFUSED),
])
def test_mask_kind_decides_the_backend(mask, expected):
    # fp16 sm80 S = L = 64 H = 64: Flash takes no mask; cuDNN (when on) and the fused runner take [B];
    # MEA takes [3B + 2]; a 2D / 3D mask leaves only unfused.
    assert picked(mha(s=64, l=64, mask=mask)) is expected


def test_cudnn_takes_b_mask_but_not_3b_plus_2():
    assert picked(mha(s=64, l=64, mask="B"), env=CUDNN_ON) is Backend.CUDNN
    assert picked(mha(s=64, l=64, mask="3B+2"), env=CUDNN_ON) is Backend.MEA


@pytest.mark.parametrize("s", [1, 64, 512, 1024])
def test_packed_qkv_takes_flash_at_every_s(s):
    # multihead_attention.cc compares the packed-QKV threshold against QKV_BS3NH, which CheckInputs
    # rejects for MultiHeadAttention: the threshold never applies, whatever the environment says.
    env = {"ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV": "100000"}
    assert picked(mha("packed_qkv", s=s), env=env) is Backend.FLASH


def test_unknown_runner_reports_both_outcomes():
    outcome = dispatch(mha(s=64, l=64), config(env={**NO_FLASH, **NO_CROSS}, trt_runner="unknown"))
    assert outcome.backends == (Backend.TRT, Backend.MEA)


@pytest.mark.parametrize("sm", [90, 120])
def test_flash_runs_on_sm90_and_newer(sm):
    assert picked(mha(s=64, l=64), sm=sm) is Backend.FLASH


@pytest.mark.parametrize("sm", [70, 100])
def test_devices_the_wheel_has_no_kernels_for_are_refused(sm):
    with pytest.raises(InvalidArgument, match=f"sm = {sm} is not a compute capability attnws models"):
        config(sm=sm)


@pytest.mark.parametrize("sm", [90, 120])
def test_newer_devices_have_no_trt_kernels(sm):
    outcome = dispatch(mha(s=64, l=64), config(sm=sm, env=NO_FLASH))
    assert outcome.backend is Backend.MEA  # cuDNN off, no TRT cross / fused kernels on the sm
    skipped = dict(outcome.skipped)
    assert f"no cross-attention kernel for sm{sm}" in skipped[Backend.TRT_CROSS]
    assert f"no TRT kernel for sm{sm}" in skipped[Backend.TRT]


@pytest.mark.parametrize("s,l,past,picked", [(8, 6, None, Backend.MEA), (6, 8, None, Backend.CUDNN),
                                             (8, 2, 6, Backend.CUDNN), (1, 1, None, Backend.CUDNN)])
def test_cudnn_causal_needs_the_query_no_longer_than_the_keys(s, l, past, picked):
    # Flash off, so cuDNN is first; where its causal rule fails the cascade goes on (cross and the
    # fused runner refuse causal attention; MEA takes it).
    outcome = dispatch(mha(s=s, l=l, past=past, causal=True), config(env={**CUDNN_ON, **NO_FLASH}))
    assert outcome.backends == (picked,)
