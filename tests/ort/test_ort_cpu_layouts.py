"""attnws's GroupQueryAttention cache layouts against ONNX Runtime 1.31.1's CPU engine.

Each step of `layout_cases.py` runs on ORT's CPU kernel in its layout: past and present bound to
one buffer (shared) or present a new tensor (separate). attnws reads the same step through the
path every command takes (`Geometry` -> `runtime_problem`, its `cache_layout` given, and left to T
and P) and must accept exactly what ORT runs. Where both refuse with one of the checks the CPU and
CUDA kernels share, the texts are the same; a shared buffer too short for T (present is max(T, P)
rows) is refused by ORT's output allocation, which attnws words as its own. The inputs carry no
option the two kernels check apart (docs/research/gqa-inputs-dispatch.md §2.5), so no case is
excluded.
"""

from __future__ import annotations

import pytest

from attnws.spec.errors import InvalidArgument
from attnws.spec.gqa import builder
from attnws.spec.gqa.inputs import runtime_problem
from attnws.spec.hints import Geometry
from attnws.spec.problem import Op

from .engine import OrtVerdict
from .layout_cases import CASE_COUNT, SEED, LayoutCase, generate_cases, ort_verdicts

ORT_SHARED_TOO_SHORT = "The output OrtValue provided for output 'present_key'"
ATTNWS_SHARED_TOO_SHORT = "cannot share the past buffer"


def geometry(case: LayoutCase, layout: str | None) -> Geometry:
    return Geometry(op=Op.GQA, element_size=2, batch=case.batch, seq=case.seq, heads=case.num_heads,
                    head_size=case.head_size, kv_heads=case.kv_num_heads, total_seq=case.total, past=case.past,
                    cache_layout=layout)


def attnws_message(case: LayoutCase, layout: str | None) -> str | None:
    """None where attnws accepts the step in the layout, else its error's text."""
    try:
        runtime_problem(geometry(case, layout))
    except InvalidArgument as error:
        return str(error)
    return None


@pytest.fixture(scope="module")
def verdicts(onnxruntime_version: str) -> list[tuple[LayoutCase, OrtVerdict]]:
    cases = generate_cases(SEED, CASE_COUNT)
    return list(zip(cases, ort_verdicts(cases)))


def _disagreements(verdicts: list[tuple[LayoutCase, OrtVerdict]]) -> list[str]:
    out = []
    for case, ort in verdicts:
        ours = attnws_message(case, case.layout)
        if (ours is None) != ort.accepted:
            out.append(f"{case.describe()}: ORT {'ran' if ort.accepted else ort.message!r}, attnws {ours or 'ran'}")
        elif ours is not None and ORT_SHARED_TOO_SHORT in ort.message:
            if ATTNWS_SHARED_TOO_SHORT not in ours:
                out.append(f"{case.describe()}: ORT's output allocation refused it, attnws said {ours!r}")
        elif ours is not None and ours != ort.message:
            out.append(f"{case.describe()}: ORT said {ort.message!r}, attnws {ours!r}")
    return out


def test_both_layouts_are_drawn_on_both_sides_of_every_rule(verdicts: list[tuple[LayoutCase, OrtVerdict]]) -> None:
    kinds = {(case.layout, ort.accepted, ORT_SHARED_TOO_SHORT in ort.message, case.total == case.past + case.seq,
              case.past == 0) for case, ort in verdicts}
    for needed in [("shared", True, False, False, False), ("shared", False, True, True, False),
                   ("separate", True, False, True, False), ("separate", True, False, True, True),
                   ("separate", False, False, False, False)]:
        assert needed in kinds, needed


def test_attnws_accepts_exactly_what_ort_runs_in_each_layout(verdicts: list[tuple[LayoutCase, OrtVerdict]]) -> None:
    assert _disagreements(verdicts) == []


def test_the_layout_left_to_t_and_p_is_shared_up_to_p_and_separate_beyond(
        verdicts: list[tuple[LayoutCase, OrtVerdict]]) -> None:
    """With no layout given, a step runs where ORT runs it in the layout T and P imply."""
    ort = {(c.batch, c.seq, c.past, c.total, c.num_heads, c.kv_num_heads, c.head_size, c.layout): v.accepted
           for c, v in verdicts}
    checked = 0
    for case, _ in verdicts:
        implied = "shared" if case.total <= case.past else "separate"
        key = (case.batch, case.seq, case.past, case.total, case.num_heads, case.kv_num_heads, case.head_size, implied)
        if case.layout == implied and key in ort:
            assert (attnws_message(case, None) is None) == ort[key], case.describe()
            checked += 1
    assert checked > CASE_COUNT // 4


def test_a_planted_layout_bug_is_caught(verdicts: list[tuple[LayoutCase, OrtVerdict]],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A builder that lets a shared buffer hold any T (the check this comparison exists for) disagrees."""
    real = builder.build_gqa_problem
    monkeypatch.setattr("attnws.spec.gqa.inputs.build_gqa_problem",
                        lambda *a, **k: real(*a, **{**k, "kv_share_buffer": False}))
    assert any(ATTNWS_SHARED_TOO_SHORT not in line and "ORT" in line for line in _disagreements(verdicts))


def test_a_windowed_cache_takes_fewer_keys_than_new_tokens(onnxruntime_version: str) -> None:
    """A windowed cache does not compare T with S (the windowed target's prefill peaks at S 8,192,
    T 1): ORT's CPU engine runs B 1, S 8, P = W = 4, T 1 (seqlens_k 7, the CPU's value check met),
    and attnws accepts it."""
    import numpy as np
    import onnxruntime

    from .gqa_cases import GqaCase, feeds, model

    b, s, p, w, n, nk, h = 1, 8, 4, 4, 4, 2, 16
    shapes = ((b, s, n * h), (b, s, nk * h), (b, s, nk * h), (b, nk, p, h), (b, nk, p, h), (b,), ()) + (None,) * 9
    case = GqaCase("windowed T < S", n, nk, (("local_window_size", w), ("sliding_window_cache", 1)), "same", shapes, 1,
                   True, frozenset())
    inputs = {**feeds(case), "seqlens_k": np.full((b,), s - 1, dtype=np.int32)}
    onnxruntime.InferenceSession(model(case), providers=["CPUExecutionProvider"]).run(None, inputs)
    problem = runtime_problem(Geometry(op=Op.GQA, element_size=2, batch=b, seq=s, heads=n, head_size=h, kv_heads=nk,
                                       total_seq=1, past=p, window=w, sliding_window_cache=True))
    assert problem.total_sequence_length < problem.sequence_length
