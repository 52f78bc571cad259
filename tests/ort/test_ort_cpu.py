"""attnws's MultiHeadAttention builder against ONNX Runtime 1.31.1's CPU kernel.

The CPU and CUDA kernels share their input checks (`contrib_ops/cpu/bert/multihead_attention_helper.h`
CheckInputs), so on the seeded random cases of `cases.py` attnws must accept exactly what the CPU
kernel runs and reject what it refuses, except where the CPU verdict is a check the two kernels do
not share. Those cases are excluded by name (`EXCLUSIONS`, first match wins):

| name | why the CPU verdict says nothing about CUDA | source (onnxruntime/contrib_ops/) |
|---|---|---|
| cpu_packed_qkv_not_implemented | the CPU kernel refuses query [B, S, N, 3, H] before CheckInputs | cpu/bert/multihead_attention.cc Compute (ORT_NOT_IMPLEMENTED) |
| cpu_packed_kv_not_implemented | the CPU kernel refuses key [B, L, N, 2, H] before CheckInputs | cpu/bert/multihead_attention.cc Compute (ORT_NOT_IMPLEMENTED) |
| cpu_bnsh_needs_n_to_divide_hidden | CheckInputs takes H = D / N without a divisibility check; the CPU kernel then reshapes [B, S, D] to [B, S, N, H] (fp16: broadcasts the bias over it) and fails when N does not divide D or Dv | cpu/bert/attention_utils.cc MaybeTransposeToBNSHAndAddBias |
| attnws_unmodelled_shared_buffer | with past_key and past_sequence_length ORT shares the past/present buffer and takes P from input 8's value; attnws models separate buffers only (Unsupported, after shape checks that take P = past_key dim 2) | cpu/bert/multihead_attention_helper.h CheckPast |
| cuda_past_present_arity | CUDA accepts past/present only as all four or present only; the CPU kernel makes present optional | cuda/bert/multihead_attention.cc ComputeInternal, after CheckInputs |
| cuda_past_present_format | CUDA rejects past/present for the BNSH (cross) key/value format; the CPU kernel fills present for it | cuda/bert/multihead_attention.cc ComputeInternal, after CheckInputs |
| cuda_num_heads_max_threads_per_block | CUDA calls the CheckInputs overload that bounds N by the device's max threads per block; the CPU kernel calls the one without | cuda/bert/multihead_attention.cc, cpu/bert/multihead_attention.cc |

The `cuda_*` cases are ones the CUDA kernel rejects, so attnws must reject them too (checked apart).
"""

from __future__ import annotations

from collections import Counter

import pytest

from attnws.spec.mha import builder

from .agreement import Exclusion, Report, accepted_and, attnws_verdict, compare, has, rejected_with
from .cases import CASE_COUNT, MUTATIONS, SEED, MhaCase, generate_cases
from .engine import OrtVerdict, ort_verdicts





def _hidden_not_divisible(case: MhaCase) -> bool:
    """Whether num_heads fails to divide the hidden size of a rank-3 query or value."""
    hidden = [shape[2] for shape in (case.shape("query"), case.shape("value")) if shape is not None and len(shape) == 3]
    return case.num_heads > 0 and any(d % case.num_heads for d in hidden)



CPU = "onnxruntime/contrib_ops/cpu/bert/"
CUDA_MHA = "onnxruntime/contrib_ops/cuda/bert/multihead_attention.cc ComputeInternal, after CheckInputs"

EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion("cpu_packed_qkv_not_implemented", "the CPU kernel refuses packed QKV before CheckInputs",
              CPU + "multihead_attention.cc Compute",
              rejected_with("Packed QKV of shape (B, L, N, 3, H) not implemented for CPU")),
    Exclusion("cpu_packed_kv_not_implemented", "the CPU kernel refuses packed KV before CheckInputs",
              CPU + "multihead_attention.cc Compute", rejected_with("Packed KV not implemented for CPU")),
    Exclusion("cpu_bnsh_needs_n_to_divide_hidden",
              "the CPU kernel reshapes [B, S, D] to [B, S, N, D / N]; CheckInputs does not need N | D",
              CPU + "attention_utils.cc MaybeTransposeToBNSHAndAddBias",
              lambda case, ort: (rejected_with("Tensor::Reshape", "BroadcastIterator")(case, ort)
                                 and _hidden_not_divisible(case))),
    Exclusion("attnws_unmodelled_shared_buffer",
              "ORT shares the past/present buffer and takes P from input 8; attnws does not model it",
              CPU + "multihead_attention_helper.h CheckPast",
              lambda case, ort: has("past_key", "past_sequence_length")(case)),
    Exclusion("cuda_past_present_arity", "CUDA needs all four of past/present or present only",
              CUDA_MHA, accepted_and(lambda case: has("past_key", "past_value")(case) and not case.has_present),
              attnws_must_reject=True),
    Exclusion("cuda_past_present_format", "CUDA rejects past/present for BNSH key/value (cross)",
              CUDA_MHA, accepted_and(lambda case: (has("past_key")(case) or case.has_present)
                                      and len(case.shape("key") or ()) == 4),
              attnws_must_reject=True),
    Exclusion("cuda_num_heads_max_threads_per_block", "CUDA bounds num_heads by max threads per block",
              "onnxruntime/contrib_ops/cuda/bert/multihead_attention.cc CheckInputs(..., max_threads_per_block)",
              accepted_and(lambda case: case.num_heads > 1024), attnws_must_reject=True),
)

REQUIRED_TAGS = (
    "separate", "cross", "packed_kv", "packed_qkv", "packed_qkv_3d", "past", "past_no_present", "present",
    "no_present", "past_value_hv", "mask_b", "mask_3b2", "mask_bt", "mask_bst", "mask_b_l", "mask_bad_1d",
    "mask_bad_2d", "mask_bad_3d", "mask_rank4", "abias", "abias_broadcast", "abias_bad_dim0", "abias_bad_dim1",
    "abias_bad_dim2", "abias_bad_dim3", "abias_rank3", "bias", "bias_wrong_length", "bias_rank2", "hv_ne_h",
    "hidden_not_divisible", "v_hidden_not_divisible", "unidirectional", "zero_dim", "num_heads_zero",
    "num_heads_over_1024", "past_sequence_length", "cache_indirection",
    *(f"mut_{name}" for name in MUTATIONS),
)


def _report(cases: list[MhaCase], verdicts: list[OrtVerdict]) -> Report:
    """Return the comparison of attnws with ORT under `EXCLUSIONS`."""
    return compare(cases, verdicts, EXCLUSIONS)


def test_generator_is_seeded_and_covers_every_feature(mha_cases: list[MhaCase]) -> None:
    assert len(mha_cases) >= 1000
    assert generate_cases(SEED, CASE_COUNT) == mha_cases
    assert len({case.ident for case in mha_cases}) == len(mha_cases)
    tags = Counter(tag for case in mha_cases for tag in case.tags)
    assert [tag for tag in REQUIRED_TAGS if tags[tag] < 3] == []
    assert {case.dtype for case in mha_cases} == {"fp32", "fp16"}


def test_ort_cpu_agrees_with_attnws(mha_cases: list[MhaCase], mha_verdicts: list[OrtVerdict],
                                    ort_summary: list[str]) -> None:
    report = _report(mha_cases, mha_verdicts)
    ort_summary.extend(report.summary_lines())
    assert report.compared >= 700, report.summary_lines()
    assert not report.disagreements, (
        f"{len(report.disagreements)} disagreement(s) with ONNX Runtime:\n"
        + "\n".join(d.describe() for d in report.disagreements))


def test_cases_excluded_as_cuda_only_checks_are_rejected_by_attnws(
        mha_cases: list[MhaCase], mha_verdicts: list[OrtVerdict]) -> None:
    excluded = _report(mha_cases, mha_verdicts).excluded
    accepted = [f"{case.ident} ({e.name})" for e in EXCLUSIONS if e.attnws_must_reject
                for case in excluded[e.name] if attnws_verdict(case).outcome != "reject"]
    assert accepted == []


def test_every_exclusion_is_needed(mha_cases: list[MhaCase], mha_verdicts: list[OrtVerdict]) -> None:
    excluded = _report(mha_cases, mha_verdicts).excluded
    assert [e.name for e in EXCLUSIONS if not excluded[e.name]] == []


def test_a_planted_builder_bug_is_caught(mha_cases: list[MhaCase], mha_verdicts: list[OrtVerdict],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop the builder's attention_bias dim-3 (T) check: the comparison must report the cases
    whose only error is that dim."""
    honest = {d.case.ident for d in _report(mha_cases, mha_verdicts).disagreements}
    check = builder._attention_bias

    def without_dim_3(d, shape, b, n, s, t):  # type: ignore[no-untyped-def]
        return check(d, [*shape[:3], t] if len(shape) == 4 else shape, b, n, s, t)

    monkeypatch.setattr(builder, "_attention_bias", without_dim_3)
    caught = [d for d in _report(mha_cases, mha_verdicts).disagreements if d.case.ident not in honest]
    assert len(caught) >= 3
    assert all("abias_bad_dim3" in d.case.tags and not d.ort.accepted and d.attnws.outcome == "accept"
               and "dimension 3" in d.ort.message for d in caught)


def test_a_kernel_crash_costs_one_case(onnxruntime_version: str) -> None:
    """ORT 1.31.1's CPU kernel segfaults on past_key/past_value without the present outputs when
    L = 0; the child process dies, that case gets a "crash" verdict and the next one still runs."""
    valid = ((2, 8, 16), (2, 1, 16), (2, 1, 16), *(None,) * 7)
    crashing = ((2, 8, 16), (2, 0, 16), (2, 0, 16), None, None, None, (2, 2, 2, 8), (2, 2, 2, 8), None, None)
    cases = [MhaCase(ident, "fp32", 2, False, False, shapes, 2, frozenset())
             for ident, shapes in (("crashing", crashing), ("valid", valid))]
    assert [(v.stage, v.message) for v in ort_verdicts(cases)] == [("crash", "killed by SIGSEGV"), ("ran", "")]
