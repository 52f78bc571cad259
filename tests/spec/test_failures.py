"""ORT 1.31.1's run-time failures: where each kind happens and where it must not, the committed
document, and the estimate's note (true for the problem it is printed on).

Sources (docs/research/ort-1.31.1-pin.md, paths under onnxruntime/contrib_ops/cuda/bert/):
add_bias_transpose.cu @ c34d9b07a010d872d17350b3d055cddba5807157 (formats 4 and 5 have no large
kernel: (H / w) * N > max threads per block throws); cutlass_fmha/kernel_forward.h @ 4de31529
(check_supported: bias row stride % alignment); attention_softmax.cu @ 1817f4a81072c49dea2984853edca412674d66fb
(ComputeSoftmaxWithMask1D refuses causal over T > 1024; the large softmax kernels take 4 * T + 64
bytes of shared memory); the 1.31.1 binary's EfficientAttention (B * S or B * T >= 2^31 with the
[3B + 2] mask).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attnws.spec import Backend, RuntimeConfig, dispatch
from attnws.spec import runtime_failures as rf
from attnws.spec.mha import failures as mha_failures
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InternalError
from attnws.spec.failures import EXAMPLES, failure_markdown, failure_row, failure_table
from attnws.spec.problem import Op
from attnws.spec.packed.problem import QkvFormat

from .helpers import mha_problem

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "ort-runtime-failures.md"


def failed(p, sm=80, **kw):
    return dispatch(p, RuntimeConfig.make(sm=sm, **kw))


@pytest.mark.parametrize("sm", [75, 80, 86, 89])
@pytest.mark.parametrize("head", [32, 64])
def test_head_sizes_32_and_64_find_their_trt_kernel_on_every_device(sm, head):
    assert failure_row("PA", Op.PA, lambda seq: {"tokens": seq}, sm, head, 512).ranges == ()
    assert failure_row("PMHA", Op.PMHA, lambda seq: {"tokens": seq, "pmha_format": QkvFormat.PACKED}, sm, head,
                       512).ranges == ()


@pytest.mark.parametrize("fmt", ["packed_kv", "packed_qkv"])
@pytest.mark.parametrize("h, n, fails", [(128, 33, True), (128, 32, False), (64, 65, True), (64, 64, False),
                                         (12, 342, True), (12, 341, False)])
def test_unpacking_needs_at_most_1024_threads_per_block(fmt, h, n, fails):
    # w = 4 for H % 4 == 0: (128 / 4) * 33 = 1056; H = 12: 3 * 342 = 1026.
    outcome = failed(mha_problem(fmt, s=4, l=4, h=h, n=n), env={"ORT_DISABLE_FUSED_CROSS_ATTENTION": "1"})
    assert (outcome.failure_kind == "unpack_block_limit") is fails, outcome.failure


def test_trt_cross_attention_reads_packed_kv_without_unpacking():
    outcome = failed(mha_problem("packed_kv", s=4, l=4, h=12, n=342))
    assert outcome.backend is Backend.TRT_CROSS and not outcome.failure


def test_unpacking_odd_head_sizes_moves_one_element_per_thread():
    outcome = failed(mha_problem("packed_qkv", s=4, h=9, n=114), env={"ORT_DISABLE_FLASH_ATTENTION": "1"})
    assert outcome.backend is Backend.UNFUSED and outcome.failure_kind == "unpack_block_limit"  # 9 * 114 = 1026
    assert "format 5" in outcome.failure
    assert not failed(mha_problem("packed_qkv", s=4, h=9, n=113)).failure


def test_separate_inputs_never_hit_the_unpack_limit():
    assert not failed(mha_problem(s=4, l=4, h=128, n=64)).failure


@pytest.mark.parametrize("e, sm, l, fails", [(2, 80, 9, True), (2, 80, 16, False), (4, 80, 258, True),
                                             (4, 80, 260, False), (4, 75, 258, False)])
def test_mea_bias_rows_must_be_aligned(e, sm, l, fails):
    s = 8 if e == 2 else 256
    outcome = failed(mha_problem(e=e, s=s, l=l, attn_bias=True), sm=sm)
    assert outcome.backend is Backend.MEA
    assert (outcome.failure_kind == "mea_bias_alignment") is fails, outcome.failure


@pytest.mark.parametrize("mask", ["B", "3B+2"])
def test_causal_unfused_with_a_1d_mask_over_1024_keys_fails(mask):
    env = {"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}
    outcome = failed(mha_problem(s=1, l=1025, mask=mask, causal=True), env=env)
    assert outcome.backend is Backend.UNFUSED and outcome.failure_kind == "causal_mask_1d"
    assert not failed(mha_problem(s=1, l=1024, mask=mask, causal=True), env=env).failure
    assert not failed(mha_problem(s=1, l=1025, mask=mask), env=env).failure  # not causal


@pytest.mark.parametrize("mask, causal", [("BT", False), ("BST", False), (None, True)])
def test_the_large_unfused_softmax_runs_out_of_shared_memory(mask, causal):
    # fp32 with S = L = 1 keeps MEA away (its fp32 threshold); the keys are a cache of P.
    outcome = failed(mha_problem(e=4, s=1, l=1, past=12272, mask=mask, causal=causal))
    assert outcome.backend is Backend.UNFUSED and outcome.failure_kind == "softmax_shared_memory"
    assert not failed(mha_problem(e=4, s=1, l=1, past=12271, mask=mask, causal=causal)).failure


def test_mea_sequence_starts_are_int32():
    assert failed(mha_problem(b=65535, s=32769, l=1, mask="3B+2")).failure_kind == "mea_offsets_int32"
    assert not failed(mha_problem(b=65535, s=32768, l=1, mask="3B+2")).failure


def test_every_kind_has_a_checked_example_in_the_table():
    assert [e.kind for e in EXAMPLES] == [k for k in rf.FAILURE_KINDS if k != "trt_no_kernel"]
    for example in EXAMPLES:
        route, running_route, message = example.check()
        assert message.startswith("ORT fails at run time")
        # the same route fails past the threshold; with no route at all, the neighbour's runs
        assert route == running_route or (example.kind == "no_route" and route == "no route" and running_route)


def test_an_example_that_does_not_fail_is_refused(monkeypatch):
    """The planted bug: a threshold moved by one makes the example's running neighbour fail."""
    monkeypatch.setattr(mha_failures, "CAUSAL_MASK_1D_MAX_KEYS", 1023)
    example = next(e for e in EXAMPLES if e.kind == "causal_mask_1d")
    with pytest.raises(InternalError, match="does not fail where stated"):
        example.check()


def test_the_committed_document_is_current():
    """Regenerate with `attnws ort-failures --markdown > docs/ort-runtime-failures.md`."""
    assert DOCUMENT.read_text() == failure_markdown(failure_table(1024), 1024)


@pytest.mark.parametrize("max_seq", ["0", "4097"])
def test_max_seq_out_of_range_is_a_usage_error(max_seq, capsys):
    from attnws import cli

    assert cli.run(["ort-failures", "--max-seq", max_seq]) == 2
    assert "--max-seq" in capsys.readouterr().err


@pytest.mark.parametrize("fields, noted", [
    ({"op": "mha", "seq": "1..1", "kv_seq": "1..2048", "mask": "1d_key_seq_len", "unidirectional": True}, "causal_mask_1d"),
    ({"op": "mha", "seq": "1..1", "kv_seq": "1..1024", "mask": "1d_key_seq_len", "unidirectional": True}, ""),
    ({"op": "mha", "seq": "1..1", "kv_seq": "1..2048", "mask": "1d_key_seq_len"}, ""),
    ({"op": "mha", "seq": "1..64", "kv_seq": "1..64", "attn_bias": True}, "mea_bias_alignment"),
    ({"op": "mha", "seq": "1..64", "kv_seq": "1..64", "format": "packed_kv", "heads": "33..33",
      "head_size": "128..128"}, "unpack_block_limit"),
    ({"op": "mha", "seq": "1..64", "kv_seq": "1..64", "format": "packed_kv", "heads": "32..32",
      "head_size": "128..128"}, ""),
    ({"op": "pa", "sm": 80, "head_size": "32..32"}, ""),
    ({"op": "pmha", "sm": 89, "head_size": "1..64", "format": "packed"}, ""),
], ids=["causal 1d mask T 2048", "T 1024", "not causal", "bias", "unpack N 33", "unpack N 32", "pa d32 sm80",
        "pmha d<=64 sm89"])
def test_the_estimate_notes_only_failures_the_range_can_hit(fields, noted):
    from attnws.spec.estimate import estimate_geometry
    from attnws.spec.target import target_from_dict

    target = target_from_dict({"name": "t", "dtype": "fp16", "batch": "1..4", "seq": "1..512", "heads": "2..2",
                               "head_size": "64..64", **fields})
    estimate = estimate_geometry(target.max_geometry(), target.config)
    assert estimate.ok, estimate.message
    assert ("may make ORT fail at run time" in estimate.note) is bool(noted), estimate.note
    assert noted in estimate.note


def test_the_trt_condition_still_fires_where_a_kernel_is_missing(monkeypatch):
    """The planted bug: sm80's d = 32 kernels dropped from the table bring the old failure back."""
    from attnws.spec.backends import trt

    monkeypatch.setitem(trt.XMMA_KERNELS, 80, {64: trt.XMMA_KERNELS[80][64]})
    row = failure_row("PA", Op.PA, lambda seq: {"tokens": seq}, 80, 32, 512)
    assert row.ranges == ((1, 384),) and "Failed to find kernel" in row.message
    kinds = [f.kind for f in rf.route_failures(CONCRETE, failed(mha_problem()).problem, RuntimeConfig(), Backend.TRT)]
    assert kinds == ["trt_no_kernel"]
