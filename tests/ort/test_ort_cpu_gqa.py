"""attnws's GroupQueryAttention builder against ONNX Runtime 1.31.1's CPU kernel.

The CPU and CUDA kernels share `group_query_attention_helper::CheckInputs` and
`CheckCustomAttentionInputs` (docs/research/gqa-inputs-dispatch.md §2.3), so on the seeded random
nodes of `gqa_cases.py` attnws (which specifies the CUDA kernel) must accept what the CPU kernel
runs and reject what it refuses, except where the CPU verdict comes from a check the two kernels
do not share. Those cases are excluded by name (`EXCLUSIONS`, first match wins):

| name | why the CPU verdict says nothing about CUDA | source (onnxruntime/contrib_ops/) |
|---|---|---|
| cpu_rejects_qk_norm | the CPU kernel refuses q_norm_weight / k_norm_weight before CheckInputs; CUDA implements them | cpu/bert/group_query_attention.cc Compute (note §2.5 3) |
| cpu_quantization_attributes | the CPU kernel wants k_quant_type == v_quant_type, a bit width of 4 or 8 with quantization and 0 without, before CheckInputs; CUDA checks only 0, 4 or 8 (H2) | cpu/bert/group_query_attention.cc Compute (§2.5 1, 2) |
| cpu_seqlens_k_values | the CPU kernel reads seqlens_k's values on the host; on CUDA they live on the device and are never checked | cpu/bert/group_query_attention.cc Compute after CheckInputs; helper H42 (§2.5) |
| cpu_windowed_requires_present | the CPU kernel refuses a windowed cache without the present outputs; CUDA borrows a non-quantized past (D6) | cpu/bert/group_query_attention.cc Compute (not in the note; text only in the core binary) |
| cuda_local_window_size_range | CUDA's constructor wants local_window_size -1 or in (0, INT_MAX] (K4); the CPU's does not check | cuda/bert/group_query_attention.cc constructor |
| cuda_qk_norm_epsilon | CUDA's constructor wants qk_norm_epsilon finite and positive (K7); the CPU's does not check | cuda/bert/group_query_attention.cc constructor |
| cuda_num_heads_max_threads_per_block | CUDA calls CheckInputs with the device's max threads per block (H0); the CPU passes 0 | cuda/bert/group_query_attention.cc ComputeInternal |
| cuda_attention_bias_quantized | CUDA does not implement attention_bias with a quantized cache (C5); the CPU runs it | cuda/bert/group_query_attention.cc ComputeInternal, before CheckInputs |
| cuda_attention_bias_smooth_softmax | CUDA does not implement attention_bias with smooth softmax or head_sink (C6); the CPU runs it | cuda/bert/group_query_attention.cc ComputeInternal, before CheckInputs |
| cuda_attention_bias_windowed | CUDA's CheckCustomAttentionInputs refuses attention_bias with a windowed cache (X3); the CPU runs it | cpu/bert/group_query_attention_helper.h, CUDA-enabled branch |
| cuda_windowed_capacity_equals_window | CUDA wants the windowed cache's capacity equal to local_window_size (D1); the CPU allows C >= W | cuda/bert/group_query_attention.cc ComputeInternal, after CheckInputs |
| cuda_present_required | CUDA needs the present outputs unless it borrows a non-quantized past (D6); the CPU makes them optional | cuda/bert/group_query_attention.cc ComputeInternal, after CheckInputs |
| cuda_borrowed_capacity | a borrowed past must hold total_sequence_length (D8); the CPU allocates its own present | cuda/bert/group_query_attention.cc ComputeInternal, after CheckInputs |

The `cuda_*` cases are ones the CUDA kernel rejects, so attnws must reject them too (checked
apart). attnws's `Unsupported` (a query hidden size the head count does not divide) and ORT's
crashes (the child process died) are counted apart, not compared. Where both reject with a
shared check, the texts must be the same.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Sequence

import pytest

from attnws.spec.errors import InvalidArgument, Unsupported
from attnws.spec.gqa import builder

from . import agreement
from .agreement import AttnwsVerdict, Exclusion, Report, accepted_and, has, rejected_with
from .engine import OrtVerdict
from .gqa_cases import CASE_COUNT, INPUT_NAMES, MUTATIONS, SEED, GqaCase, generate_cases, ort_verdicts



def _past_length(case: GqaCase) -> int:
    past_key = case.shape("past_key")
    return past_key[2] if past_key is not None and len(past_key) > 2 else 0


def _windowed(case: GqaCase) -> bool:
    return case.attribute("sliding_window_cache") == 1


def attnws_verdict(case: GqaCase) -> AttnwsVerdict:
    """attnws's answer for the case as a CUDA node whose past and present share one buffer where
    they can (a windowed cache, or T <= P); the builder is looked up at call time (monkeypatchable)."""
    shapes = {name: None if shape is None else list(shape) for name, shape in zip(INPUT_NAMES, case.shapes)}
    total_shape = shapes.pop("total_sequence_length")
    share = _windowed(case) or case.total <= _past_length(case)
    try:
        builder.build_gqa_problem(
            **shapes, total_sequence_length=case.total, total_sequence_length_shape=total_shape,
            num_heads=case.num_heads, kv_num_heads=case.kv_num_heads, **dict(case.attributes),
            cache_dtype=case.cache_dtype, has_present=case.has_present, kv_share_buffer=share)
    except InvalidArgument as error:
        return AttnwsVerdict("reject", str(error))
    except Unsupported as error:
        return AttnwsVerdict("unsupported", str(error))
    except Exception as error:  # noqa: BLE001  (a builder crash is a disagreement, never excused)
        return AttnwsVerdict("crash", f"{type(error).__name__}: {error}")
    return AttnwsVerdict("accept")




def _quantized(case: GqaCase) -> bool:
    return "NONE" not in (case.attribute("k_quant_type").upper(), case.attribute("v_quant_type").upper())


def _window_out_of_range(case: GqaCase) -> bool:
    window = case.attribute("local_window_size")
    return window != -1 and not 0 < window <= 2**31 - 1


def _epsilon_invalid(case: GqaCase) -> bool:
    epsilon = case.attribute("qk_norm_epsilon")
    return not (math.isfinite(epsilon) and epsilon > 0)



CPU_OP = "onnxruntime/contrib_ops/cpu/bert/group_query_attention.cc Compute"
CUDA_OP = "onnxruntime/contrib_ops/cuda/bert/group_query_attention.cc"

EXCLUSIONS: tuple[Exclusion, ...] = (
    Exclusion("cpu_rejects_qk_norm", "the CPU kernel refuses q/k norm weights; CUDA implements them",
              CPU_OP + " (before CheckInputs)",
              rejected_with("q_norm_weight / k_norm_weight inputs are not supported")),
    Exclusion("cpu_quantization_attributes", "the CPU's own k/v quant type and bit width rules",
              CPU_OP + " (before CheckInputs)",
              rejected_with("when quantization is disabled", "when quantization is enabled",
                             "requires k_quant_type == v_quant_type")),
    Exclusion("cpu_seqlens_k_values", "seqlens_k's values are checked on the host by the CPU kernel only",
              CPU_OP + " (after CheckInputs); group_query_attention_helper.h H42",
              rejected_with("is out of range [0,", "is too small for sequence_length", "past KV rows, which exceeds",
                             "is out of range for rotary cache dimension 0")),
    Exclusion("cpu_windowed_requires_present", "the CPU kernel wants the present outputs for a windowed cache",
              CPU_OP, rejected_with("sliding_window_cache=1 requires the present_key and present_value outputs.")),
    Exclusion("cuda_local_window_size_range", "K4: local_window_size -1 or in (0, INT_MAX]", CUDA_OP + " constructor",
              accepted_and(_window_out_of_range), attnws_must_reject=True),
    Exclusion("cuda_qk_norm_epsilon", "K7: qk_norm_epsilon finite and positive", CUDA_OP + " constructor",
              accepted_and(_epsilon_invalid), attnws_must_reject=True),
    Exclusion("cuda_num_heads_max_threads_per_block", "H0: num_heads <= max threads per block (1024)",
              CUDA_OP + " ComputeInternal, CheckInputs(..., maxThreadsPerBlock)",
              accepted_and(lambda case: case.num_heads > 1024), attnws_must_reject=True),
    Exclusion("cuda_attention_bias_quantized", "C5: attention_bias with a quantized cache is NOT_IMPLEMENTED",
              CUDA_OP + " ComputeInternal, before CheckInputs",
              accepted_and(lambda case: has("attention_bias")(case) and _quantized(case)), attnws_must_reject=True),
    Exclusion("cuda_attention_bias_smooth_softmax", "C6: attention_bias with smooth softmax or head_sink",
              CUDA_OP + " ComputeInternal, before CheckInputs",
              accepted_and(lambda case: has("attention_bias")(case) and (
                  case.attribute("smooth_softmax") == 1 or has("head_sink")(case))), attnws_must_reject=True),
    Exclusion("cuda_attention_bias_windowed", "X3: attention_bias with a windowed cache",
              "onnxruntime/contrib_ops/cpu/bert/group_query_attention_helper.h CheckCustomAttentionInputs (CUDA)",
              accepted_and(lambda case: has("attention_bias")(case) and _windowed(case)), attnws_must_reject=True),
    Exclusion("cuda_windowed_capacity_equals_window", "D1: a windowed cache's capacity equals local_window_size",
              CUDA_OP + " ComputeInternal, after CheckInputs",
              accepted_and(lambda case: _windowed(case) and _past_length(case) != case.attribute("local_window_size")),
              attnws_must_reject=True),
    Exclusion("cuda_present_required", "D6: present outputs unless borrowing a non-quantized past",
              CUDA_OP + " ComputeInternal, after CheckInputs",
              accepted_and(lambda case: not case.has_present and (not has("past_key")(case) or _quantized(case))),
              attnws_must_reject=True),
    Exclusion("cuda_borrowed_capacity", "D8: a borrowed past holds total_sequence_length",
              CUDA_OP + " ComputeInternal, after CheckInputs",
              accepted_and(lambda case: not case.has_present and case.total > _past_length(case)),
              attnws_must_reject=True),
)

# Every shared check's text (H, X), each of which the comparison must see refused by both.
# H1 (num_heads % kv_num_heads) is shared but unreachable on CUDA, whose constructor (K2) refuses first.
SHARED_TEXTS = (
    "Input 'query' is expected to have 3 dimensions, got ",
    "head_size must be a multiple of 8. Got head_size % 8 == ",
    "Input 'key' and 'value' shall be both present, or both absent in the case of packed qkv.",
    "Input 'key' is expected to have 3 dimensions, got ",
    "Input 'query' and 'key' shall have same dim 0 (batch size)",
    "kv_hidden_size must be a multiple of kv_num_heads. Got kv_hidden_size % kv_num_heads == ",
    "kv_hidden_size / kv_num_heads must be equal to head_size. Got kv_hidden_size / kv_num_heads == ",
    "Input 'value' is expected to have 3 dimensions, got ",
    "Input 'query' and 'value' shall have same dim 0 (batch size)",
    "Input 'key' and 'value' shall have same dim 1 (sequence length)",
    "Input 'value' is expected to have same hidden size as key.",
    "Input 'past_key' is expected to have 4 dimensions, got ",
    "Input 'past_value' is expected to have 4 dimensions, got ",
    "Input 'past_key' dimension 0 should be batch_size, got ",
    "Input 'past_value' dimension 0 should be batch_size, got ",
    "BNSH Input 'past_key' and 'past_value' should have same dimension 2",
    "Input 'past_key' shall have kv_num_heads",
    "Input 'past_value' shall have kv_num_heads",
    "Input 'past_key' dimension 3 should match the packed KV head dimension, got ",
    "Input 'past_value' dimension 3 should match the packed KV head dimension, got ",
    "query and key must have the same sequence length when past_key is provided",
    "query and key must have the same sequence length when past_key is not provided.",
    "seqlens_k must be at least 1D, got scalar.",
    "seqlens_k must have batch_size (",
    "seqlens_k has unexpected shape. Each dimension must be 1 or batch_size (",
    "total_sequence_length tensor must be of one element.",
    "total_sequence_length must be positive, got ",
    "total_sequence_length must be at least kv_sequence_length for a non-sliding cache.",
    "total_sequence_length must equal past_sequence_length + kv_sequence_length for a dynamic cache",
    "sliding_window_cache=1 requires past_key and past_value to be present.",
    "sliding_window_cache=1 is not supported when kv_sequence_length == 0 (shared KV).",
    "must be a multiple of 16 for an 8-bit KV cache.",
    "sliding_window_cache: KV cache capacity (",
    "cos_cache and sin_cache must have the same shape. Got cos_cache shape ",
    "cos_cache dimension 0 shall not be less than total_sequence_length.",
    "cos_cache dimension 1 must be <= head_size / 2 and a multiple of 8.",
    "Input 'cos_cache' and 'sin_cache' shall be both present or both absent.",
    "batch_size must be 1 when sequence_length > 1 and past context is given.",
    "sequence_length shall be 1 when it is not prompt.",
    "position_ids dimension 0 must be equal to the batch size, got ",
    "position_ids dimension 1 must be at least sequence length, got ",
    "attention_bias must be a 4D tensor, got ",
    "attention_bias dimension 0 must be equal to the batch size or 1, got ",
    "attention_bias dimension 1 must be equal to the num heads or 1, got ",
    "attention_bias dimension 2 must be equal to the sequence length, got ",
    "attention_bias dimension 3 must be equal to total_sequence_length, got ",
    "head_sink must be a 1D tensor",
    "head_sink dimension 0 must be equal to the num heads, got ",
)


def _shared_text(message: str) -> str | None:
    return next((text for text in SHARED_TEXTS if text in message), None)


def compare(cases: Sequence[GqaCase], verdicts: Sequence[OrtVerdict], exclusions: Sequence[Exclusion]) -> Report:
    """The shared comparison with this operator's builder (looked up at call time)."""
    return agreement.compare(cases, verdicts, exclusions, lambda case: attnws_verdict(case), "GroupQueryAttention")


@pytest.fixture(scope="module")
def gqa_cases() -> list[GqaCase]:
    return generate_cases(SEED, CASE_COUNT)


@pytest.fixture(scope="module")
def gqa_verdicts(onnxruntime_version: str, gqa_cases: list[GqaCase]) -> list[OrtVerdict]:
    return ort_verdicts(gqa_cases)


@pytest.fixture(scope="module")
def report(gqa_cases: list[GqaCase], gqa_verdicts: list[OrtVerdict]) -> Report:
    return compare(gqa_cases, gqa_verdicts, EXCLUSIONS)


REQUIRED_TAGS = ("prompt", "decode", "static_decode", "chunk", "static_chunk", "shared_kv", "windowed", "packed_qkv",
                 "empty_past", "rotary", "rotary_caches_only", "position_ids", "attention_bias", "head_sink",
                 "smooth_softmax", "softcap", "non_causal", "local_window", "quant_int8", "quant_int4",
                 "quant_per_channel", "no_present", "qk_norm", *(f"mut_{name}" for name in MUTATIONS))


def test_generator_is_seeded_and_covers_every_feature(gqa_cases: list[GqaCase]) -> None:
    assert len(gqa_cases) >= 1000
    assert generate_cases(SEED, CASE_COUNT) == gqa_cases
    assert len({case.ident for case in gqa_cases}) == len(gqa_cases)
    tags = Counter(tag for case in gqa_cases for tag in case.tags)
    assert [tag for tag in REQUIRED_TAGS if tags[tag] < 3] == []
    assert {case.cache_dtype for case in gqa_cases} == {"same", "int8", "uint8"}


def test_ort_cpu_agrees_with_attnws(report: Report, ort_summary: list[str]) -> None:
    ort_summary.extend(report.summary_lines())
    assert report.compared >= 1000, report.summary_lines()
    assert report.agreed_accepts >= 300 and report.agreed_rejects >= 300, report.summary_lines()
    assert not report.disagreements, (
        f"{len(report.disagreements)} disagreement(s) with ONNX Runtime:\n"
        + "\n".join(d.describe() for d in report.disagreements[:30]))


def test_shared_checks_fail_with_ort_s_text(report: Report) -> None:
    """Where both refuse a node through a check they share, attnws names the same check, with the
    same values: its message is ORT's (ORT adds the node preamble)."""
    differ = [r.describe() for r in report.both_reject
              if _shared_text(r.ort.message) and _shared_text(r.attnws.message) and r.attnws.message not in r.ort.message]
    assert differ == []


def test_every_shared_check_is_exercised(report: Report) -> None:
    seen = Counter(_shared_text(r.ort.message) for r in report.both_reject if r.attnws.message in r.ort.message)
    assert [text for text in SHARED_TEXTS if not seen[text]] == []


def test_cases_excluded_as_cuda_only_checks_are_rejected_by_attnws(report: Report) -> None:
    accepted = [f"{case.ident} ({e.name}): {attnws_verdict(case)}" for e in EXCLUSIONS if e.attnws_must_reject
                for case in report.excluded[e.name] if attnws_verdict(case).outcome != "reject"]
    assert accepted == []


def test_every_exclusion_is_needed(report: Report) -> None:
    assert [e.name for e in EXCLUSIONS if not report.excluded[e.name]] == []


def test_exclusions_are_named_with_a_reason_and_a_source() -> None:
    names = [e.name for e in EXCLUSIONS]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"(cpu|cuda)_[a-z0-9_]+", e.name) and e.reason and "onnxruntime/" in e.source
               for e in EXCLUSIONS)
    assert all(e.attnws_must_reject == e.name.startswith("cuda_") for e in EXCLUSIONS)


def test_a_planted_builder_bug_is_caught(gqa_cases: list[GqaCase], gqa_verdicts: list[OrtVerdict],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop the static-or-dynamic cache rule (H31) from the builder: the comparison must report
    the cases that only that rule refuses."""
    honest = {d.case.ident for d in compare(gqa_cases, gqa_verdicts, EXCLUSIONS).disagreements}
    check = builder._check_total

    def without_h31(d, total, total_shape, windowed, p, kv):  # type: ignore[no-untyped-def]
        return check(d, total, total_shape, windowed, max(p, total), kv)

    monkeypatch.setattr(builder, "_check_total", without_h31)
    caught = [d for d in compare(gqa_cases, gqa_verdicts, EXCLUSIONS).disagreements if d.case.ident not in honest]
    assert all(not d.ort.accepted and d.attnws.outcome == "accept" for d in caught)
    assert sum("for a dynamic cache" in d.ort.message for d in caught) >= 3
