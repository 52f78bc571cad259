"""MultiHeadAttention recipes against hand-derived literals: per backend and per input format it
serves, the workspace bytes ORT allocates and every range of it the route touches.

Every number below was worked out by hand from ONNX Runtime's code (never from attnws). The rules
were first read at 008eeb96a1e2e8d5c23519a81a837f52b54d384b; they are unchanged in the versions
cited here, the newest read that hold in ONNX Runtime 1.31.1 (docs/ort-version.md):

- IMPL: onnxruntime/contrib_ops/cuda/bert/attention_impl.cu @ 1817f4a81072c49dea2984853edca412674d66fb
  GetAttentionWorkspaceSize: qkv = e*B*N*((S + L)*H + L*Hv), 0 when NoQkvWorkspace holds; then the
  first of flash -> qkv, MEA -> qkv + (Hv > 128 and not fp32 ? 4*B*S*N*Hv : 0), fused runner ->
  qkv + align256(4*(2B + 1)), TRT cross -> qkv + 2*align256(4*(2B + 1)), cuDNN -> qkv, else
  qkv + 2*align256(e*B*N*S*T). FusedTrtCrossAttention puts the kv offsets align256(4*(B + 1))
  bytes after the q offsets; UnfusedAttention puts the softmax align256(e*B*N*S*T) after Q*K'.
- PREP: onnxruntime/contrib_ops/cuda/bert/attention_prepare_qkv.cu @ 25a6fdcaab9901c6822aaec64bae9daf24d4fa68
  PrepareQkv carves q at 0, k after B*N*S*H elements, v after B*N*L*H more, scratch after
  B*N*L*Hv more; NoQkvWorkspace_* and PrepareQkv_MHA_* say which of q, k, v each route writes.
- MEAH: onnxruntime/contrib_ops/cuda/bert/cutlass_fmha/memory_efficient_attention.h @
  d1857d12230dcf7c6e04b325b12e8cf95b121714 (first read at index id 1363929900): need_workspace =
  Hv > 128 and not fp32.

Views are compared as {name: (offset, bytes)}, zero-byte views left out (an empty range is no
range). Names are attnws's: q / k / v copies, qkv_packed (the fused runner's BSN3H), kv_packed
(the cross kernel's BSN2H), sequence offsets, unfused scores / probabilities, MEA accumulator.
"""

from __future__ import annotations

import pytest

from attnws.spec import Backend, recipe

from .helpers import mha_problem

IMPL = "onnxruntime/contrib_ops/cuda/bert/attention_impl.cu@1817f4a81072c49dea2984853edca412674d66fb"
PREP = "onnxruntime/contrib_ops/cuda/bert/attention_prepare_qkv.cu@25a6fdcaab9901c6822aaec64bae9daf24d4fa68"
MEAH = "onnxruntime/contrib_ops/cuda/bert/cutlass_fmha/memory_efficient_attention.h (id 1363929900)"


mha = mha_problem


def views(r):
    return {v.name: (v.offset, v.nbytes) for v in r.view_list if v.nbytes}


# Families (hand arithmetic, bytes):
#   A  fp16 B=2 S=3 L=5 N=2 H=Hv=8:    q = 2*2*2*3*8 = 192, k = v = 2*2*2*5*8 = 320, qkv = 832
#   A' the same with Hv = 16:            v = 2*2*2*5*16 = 640, qkv = 1152
#   F  fp32 B=2 S=3 L=5 N=2 H=Hv=8:    q = 384, k = v = 640, qkv = 1664
#   F' fp32 with Hv = 16:                v = 1280, qkv = 2304
#   Q  packed QKV fp16 B=2 S=L=3 N=2 H=8: q = k = v = 192, qkv = 576
#   W  fp16 B=1 S=2 L=3 N=1 H=8 Hv=136: q = 32, k = 48, v = 2*3*136 = 816, qkv = 896;
#      MEA accumulator 4*1*2*1*136 = 1088
A_QKV = {"q": (0, 192), "k": (192, 320), "v": (512, 320)}
A_KV = {"k": (192, 320), "v": (512, 320)}
Q_QKV = {"q": (0, 192), "k": (192, 192), "v": (384, 192)}
F_QKV = {"q": (0, 384), "k": (384, 640), "v": (1024, 640)}

# (id, problem, backend, attention_workspace_bytes, no_qkv_workspace, views, sources)
FLASH = [
    ("flash separate", mha(), Backend.FLASH, 0, True, {}, (IMPL, PREP)),
    ("flash separate + bias", mha(bias=True), Backend.FLASH, 832, False, A_QKV, (IMPL, PREP)),
    # no past, present: K and V go straight into present_key / present_value.
    ("flash present", mha(present=True), Backend.FLASH, 0, True, {}, (IMPL, PREP)),
    ("flash present + bias", mha(bias=True, present=True), Backend.FLASH, 832, False, {"q": (0, 192)}, (IMPL, PREP)),
    # P = 4 > 0: K, V transposed to BNSH in the workspace, then concatenated into present; qkv uses L, not T.
    ("flash past P=4", mha(past=4), Backend.FLASH, 832, False, A_KV, (IMPL, PREP)),
    ("flash past P=4 + bias", mha(past=4, bias=True), Backend.FLASH, 832, False, A_QKV, (IMPL, PREP)),
    ("flash cross", mha("cross"), Backend.FLASH, 0, True, {}, (IMPL, PREP)),
    ("flash cross + bias", mha("cross", bias=True), Backend.FLASH, 832, False, {"q": (0, 192)}, (IMPL, PREP)),
    ("flash packed kv", mha("packed_kv"), Backend.FLASH, 832, False, A_KV, (IMPL, PREP)),
    ("flash packed qkv", mha("packed_qkv", l=3), Backend.FLASH, 576, False, Q_QKV, (IMPL, PREP)),
    ("flash packed qkv + bias", mha("packed_qkv", l=3, bias=True), Backend.FLASH, 576, False, Q_QKV, (IMPL, PREP)),
]

CUDNN = [
    ("cudnn separate", mha(hv=16), Backend.CUDNN, 0, True, {}, (IMPL, PREP)),
    ("cudnn separate + bias, Hv=16", mha(hv=16, bias=True), Backend.CUDNN, 1152, False,
     {"q": (0, 192), "k": (192, 320), "v": (512, 640)}, (IMPL, PREP)),
    ("cudnn past P=4, Hv=16", mha(hv=16, past=4), Backend.CUDNN, 1152, False, {"k": (192, 320), "v": (512, 640)},
     (IMPL, PREP)),
    ("cudnn present + bias", mha(bias=True, present=True), Backend.CUDNN, 832, False, {"q": (0, 192)}, (IMPL, PREP)),
    ("cudnn cross", mha("cross"), Backend.CUDNN, 0, True, {}, (IMPL, PREP)),
    ("cudnn cross + bias", mha("cross", bias=True), Backend.CUDNN, 832, False, {"q": (0, 192)}, (IMPL, PREP)),
    ("cudnn packed kv", mha("packed_kv"), Backend.CUDNN, 832, False, A_KV, (IMPL, PREP)),
    ("cudnn packed qkv + bias", mha("packed_qkv", l=3, bias=True), Backend.CUDNN, 576, False, Q_QKV, (IMPL, PREP)),
]

# TRT cross, X: fp16 B=40 S=2 L=3 N=1 H=8: q = 2*40*2*8 = 1280, packed KV = 2 * 2*40*3*8 = 3840, qkv = 5120;
# allocation 2 * align256(4*(2*40 + 1) = 324) = 1024; q offsets at scratch, kv offsets at
# scratch + align256(4*(40 + 1) = 164) = +256.
X_VIEWS = {"q": (0, 1280), "kv_packed": (1280, 3840), "q_sequence_offsets": (5120, 256),
           "kv_sequence_offsets": (5376, 256)}
TRT_CROSS = [
    ("trt_cross separate B=40", mha(b=40, s=2, l=3, n=1), Backend.TRT_CROSS, 6144, False, X_VIEWS, (IMPL, PREP)),
    ("trt_cross separate + bias B=40", mha(b=40, s=2, l=3, n=1, bias=True), Backend.TRT_CROSS, 6144, False, X_VIEWS,
     (IMPL, PREP)),
    ("trt_cross packed kv B=40", mha("packed_kv", b=40, s=2, l=3, n=1), Backend.TRT_CROSS, 1024, True,
     {"q_sequence_offsets": (0, 256), "kv_sequence_offsets": (256, 256)}, (IMPL, PREP)),
    # A: 832 + 2 * align256(4*5 = 20) = 1344; offsets 256 bytes apart.
    ("trt_cross separate B=2", mha(), Backend.TRT_CROSS, 1344, False,
     {"q": (0, 192), "kv_packed": (192, 640), "q_sequence_offsets": (832, 256), "kv_sequence_offsets": (1088, 256)},
     (IMPL, PREP)),
]

# TRT fused runner, R: fp16 B=40 S=L=2 N=1 H=8: BSN3H = 3 * 2*40*2*8 = 3840; offsets align256(4*81 = 324) = 512.
TRT = [
    ("trt separate B=40", mha(b=40, s=2, l=2, n=1), Backend.TRT, 4352, False,
     {"qkv_packed": (0, 3840), "sequence_offsets": (3840, 512)}, (IMPL, PREP)),
    ("trt separate + bias B=40", mha(b=40, s=2, l=2, n=1, bias=True), Backend.TRT, 4352, False,
     {"qkv_packed": (0, 3840), "sequence_offsets": (3840, 512)}, (IMPL, PREP)),
    ("trt packed qkv B=40", mha("packed_qkv", b=40, s=2, l=2, n=1), Backend.TRT, 512, True,
     {"sequence_offsets": (0, 512)}, (IMPL, PREP)),
    ("trt packed qkv + bias B=40", mha("packed_qkv", b=40, s=2, l=2, n=1, bias=True), Backend.TRT, 4352, False,
     {"qkv_packed": (0, 3840), "sequence_offsets": (3840, 512)}, (IMPL, PREP)),
    # Q: 576 + align256(4*5 = 20) = 832.
    ("trt packed qkv + bias B=2", mha("packed_qkv", l=3, bias=True), Backend.TRT, 832, False,
     {"qkv_packed": (0, 576), "sequence_offsets": (576, 256)}, (IMPL, PREP)),
]

W = dict(b=1, s=2, l=3, n=1, h=8, hv=136)
MEA = [
    ("mea fp16 separate", mha(), Backend.MEA, 0, True, {}, (IMPL, PREP)),
    ("mea fp16 separate + bias", mha(bias=True), Backend.MEA, 832, False, A_QKV, (IMPL, PREP)),
    ("mea fp32 separate, Hv=16", mha(e=4, hv=16), Backend.MEA, 0, True, {}, (IMPL, PREP)),
    ("mea fp32 separate + bias, Hv=16", mha(e=4, hv=16, bias=True), Backend.MEA, 2304, False,
     {"q": (0, 384), "k": (384, 640), "v": (1024, 1280)}, (IMPL, PREP)),
    # The fp32 accumulator: fp16 and Hv = 136 > 128.
    ("mea fp16 Hv=136 + bias (accumulator)", mha(bias=True, **W), Backend.MEA, 1984, False,
     {"q": (0, 32), "k": (32, 48), "v": (80, 816), "mea_accumulator": (896, 1088)}, (IMPL, PREP, MEAH)),
    ("mea fp16 Hv=136 (accumulator only)", mha(**W), Backend.MEA, 1088, True, {"mea_accumulator": (0, 1088)},
     (IMPL, PREP, MEAH)),
    ("mea fp16 Hv=136 present + bias", mha(bias=True, present=True, **W), Backend.MEA, 1984, False,
     {"q": (0, 32), "mea_accumulator": (896, 1088)}, (IMPL, PREP, MEAH)),
    # Hv = 128 is not > 128: no accumulator; 2*(5*8 + 3*128) = 848.
    ("mea fp16 Hv=128 + bias (no accumulator)", mha(bias=True, **{**W, "hv": 128}), Backend.MEA, 848, False,
     {"q": (0, 32), "k": (32, 48), "v": (80, 768)}, (IMPL, PREP, MEAH)),
    # fp32 never has it: 4*(5*8 + 3*136) = 1792.
    ("mea fp32 Hv=136 + bias (no accumulator)", mha(e=4, bias=True, **W), Backend.MEA, 1792, False,
     {"q": (0, 64), "k": (64, 96), "v": (160, 1632)}, (IMPL, PREP, MEAH)),
    ("mea fp32 past P=4", mha(e=4, past=4), Backend.MEA, 1664, False, {"k": (384, 640), "v": (1024, 640)},
     (IMPL, PREP)),
    ("mea fp32 present", mha(e=4, present=True), Backend.MEA, 0, True, {}, (IMPL, PREP)),
    ("mea fp32 past P=4 + bias", mha(e=4, past=4, bias=True), Backend.MEA, 1664, False, F_QKV, (IMPL, PREP)),
    ("mea fp32 cross", mha("cross", e=4), Backend.MEA, 0, True, {}, (IMPL, PREP)),
    ("mea fp32 cross + bias", mha("cross", e=4, bias=True), Backend.MEA, 1664, False, {"q": (0, 384)}, (IMPL, PREP)),
    ("mea fp32 packed kv", mha("packed_kv", e=4), Backend.MEA, 1664, False, {"k": (384, 640), "v": (1024, 640)},
     (IMPL, PREP)),
    ("mea fp16 packed qkv", mha("packed_qkv", l=3), Backend.MEA, 576, False, Q_QKV, (IMPL, PREP)),
]

# Unfused: qkv + 2 * align256(e*B*N*S*T), scores at qkv, probabilities one region later.
UNFUSED = [
    # A, T = L = 5: align256(2*2*2*3*5 = 120) = 256; 832 + 512 = 1344.
    ("unfused fp16 separate", mha(), Backend.UNFUSED, 1344, False,
     {**A_QKV, "scores": (832, 256), "probabilities": (1088, 256)}, (IMPL, PREP)),
    ("unfused fp16 separate + bias", mha(bias=True), Backend.UNFUSED, 1344, False,
     {**A_QKV, "scores": (832, 256), "probabilities": (1088, 256)}, (IMPL, PREP)),
    # fp32 B=1 S=3 L=5 N=2 H=16 Hv=8: q = 4*1*2*3*16 = 384, k = 640, v = 4*1*2*5*8 = 320, qkv = 1344;
    # align256(4*1*2*3*5 = 120) = 256; 1344 + 512 = 1856.
    ("unfused fp32 H=16 Hv=8 + bias", mha(b=1, h=16, hv=8, e=4, bias=True), Backend.UNFUSED, 1856, False,
     {"q": (0, 384), "k": (384, 640), "v": (1024, 320), "scores": (1344, 256), "probabilities": (1600, 256)},
     (IMPL, PREP)),
    # F with P = 4, T = 9: align256(4*2*2*3*9 = 432) = 512; 1664 + 1024 = 2688.
    ("unfused fp32 past P=4", mha(e=4, past=4), Backend.UNFUSED, 2688, False,
     {**F_QKV, "scores": (1664, 512), "probabilities": (2176, 512)}, (IMPL, PREP)),
    # fp16 B=1 S=5 L=7 P=6 (T = 13) N=3 H=8: q = 2*3*5*8 = 240, k = v = 2*3*7*8 = 336, qkv = 912;
    # align256(2*1*3*5*13 = 390) = 512; 912 + 1024 = 1936.
    ("unfused fp16 past P=6 + bias", mha(b=1, s=5, l=7, n=3, past=6, bias=True), Backend.UNFUSED, 1936, False,
     {"q": (0, 240), "k": (240, 336), "v": (576, 336), "scores": (912, 512), "probabilities": (1424, 512)},
     (IMPL, PREP)),
    # Cross: only Q is transposed into the workspace; K, V are read in place (BNSH).
    ("unfused fp16 cross", mha("cross"), Backend.UNFUSED, 1344, False,
     {"q": (0, 192), "scores": (832, 256), "probabilities": (1088, 256)}, (IMPL, PREP)),
    ("unfused fp16 packed kv", mha("packed_kv"), Backend.UNFUSED, 1344, False,
     {**A_QKV, "scores": (832, 256), "probabilities": (1088, 256)}, (IMPL, PREP)),
    # Q, T = 3: align256(2*2*2*3*3 = 72) = 256; 576 + 512 = 1088.
    ("unfused fp16 packed qkv", mha("packed_qkv", l=3), Backend.UNFUSED, 1088, False,
     {**Q_QKV, "scores": (576, 256), "probabilities": (832, 256)}, (IMPL, PREP)),
]

ROWS = FLASH + CUDNN + TRT_CROSS + TRT + MEA + UNFUSED


@pytest.mark.parametrize("p,backend,total,direct,expected,sources", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_mha_recipe_matches_hand_derived_ort_layout(p, backend, total, direct, expected, sources):
    r = recipe(p, backend)
    assert r.attention_workspace_bytes == total
    assert r.no_qkv_workspace is direct
    assert views(r) == expected
    assert all(s.startswith("onnxruntime/contrib_ops/cuda/bert/") for s in sources)


def test_every_backend_has_rows():
    assert {r[2] for r in ROWS} == {Backend.FLASH, Backend.CUDNN, Backend.TRT_CROSS, Backend.TRT, Backend.MEA,
                                    Backend.UNFUSED}


# PrepareQkv_MHA_WithPast_NoBias / _WithPast_Bias (PREP): with present and no past, k and v are set
# to present_key / present_value BEFORE the unfused transposes, so only Q is written to the
# workspace (the K and V ranges are allocated but untouched).
@pytest.mark.parametrize("bias", [False, True])
def test_unfused_present_without_past_writes_only_q(bias):
    r = recipe(mha(present=True, bias=bias), Backend.UNFUSED)
    assert r.attention_workspace_bytes == 1344
    assert views(r) == {"q": (0, 192), "scores": (832, 256), "probabilities": (1088, 256)}


# UnfusedAttention (IMPL) writes the P*V product, B*N*S*Hv elements, to temp_output = data.q, i.e.
# [0, e*B*N*S*Hv) of the workspace, before transposing it into the output.
def _covered(r, start, end):
    spans = sorted((v.offset, v.offset + v.nbytes) for v in r.view_list if v.nbytes)
    reach = start
    for lo, hi in spans:
        if lo <= reach < hi:
            reach = hi
    return reach >= end


def test_unfused_context_write_lies_in_the_q_view_when_hv_le_h():
    # fp32 B=1 S=3 L=5 N=2 H=16 Hv=8: context 4*1*2*3*8 = 192 bytes at 0, inside q [0, 384).
    r = recipe(mha(b=1, h=16, hv=8, e=4), Backend.UNFUSED)
    assert _covered(r, 0, 192)
    assert not _covered(r, 0, r.attention_workspace_bytes + 1)  # the helper can say no


def test_unfused_allocation_with_hv_far_above_h_is_orts():
    # fp32 B=1 S=16 L=1 N=1 H=8 Hv=1024 (MEA needs S or L >= 256 in fp32, so ORT runs unfused):
    # qkv = 4*(17*8 + 1*1024) = 4640, scratch 2 * align256(4*16*1 = 64) = 512: 5152 bytes.
    r = recipe(mha(b=1, s=16, l=1, n=1, h=8, hv=1024, e=4), Backend.UNFUSED)
    assert r.attention_workspace_bytes == 5152


# The recipe stays ORT's (the 5,152 bytes above); the kernel contract, stated independently in the
# footprint, is what flags ORT's context write past its own allocation.
def test_unfused_context_write_past_the_allocation_is_flagged_by_the_kernel_contract():
    from attnws.solver.contract import kernel_conditions
    from attnws.spec.domain import CONCRETE
    from attnws.spec.target import target_from_dict

    # context 4*1*1*16*1024 = 65536 bytes from offset 0, into a 5152-byte workspace.
    p = mha(b=1, s=16, l=1, n=1, h=8, hv=1024, e=4)
    r = recipe(p, Backend.UNFUSED)
    assert not _covered(r, 0, 65536)
    target = target_from_dict({"op": "mha", "dtype": "fp32", "batch": "1..1", "seq": "16..16", "kv_seq": "1..1",
                               "heads": "1..1", "head_size": "8..8", "v_head_size": "1024..1024", "sm": 80})
    failing = [name for name, cond in kernel_conditions(CONCRETE, p, r, target) if not cond]
    assert "context lies inside the attention allocation" in failing, failing


# The shared entry point (Geometry -> runtime_problem -> dispatch -> recipe) gives the same literals.
@pytest.mark.parametrize("geometry,backend,total", [
    # A + bias on sm80: Flash, 832 (row "flash separate + bias").
    (dict(element_size=2, kv_seq=5, qkv_bias=True), Backend.FLASH, 832),
    # F with P = 4: fp32 S, L < 256 takes unfused, 2688 (row "unfused fp32 past P=4").
    (dict(element_size=4, kv_seq=5, past=4, with_past=True, with_present=True), Backend.UNFUSED, 2688),
])
def test_estimate_exact_uses_the_mha_recipe(geometry, backend, total):
    from attnws.spec import Geometry, Op
    from attnws.spec.estimate import estimate_exact

    e = estimate_exact(Geometry(Op.MHA, batch=2, seq=3, heads=2, head_size=8, **geometry))
    assert [r.backend for r in e.routes] == [backend]
    assert e.attention_workspace_bytes == total
