"""Fuzzing `plot --at` and `--sweep` (hypothesis, derandomized by tests/conftest.py): any list of
NAME=VALUE pairs on any sweep is a usage error or a line whose every shape lies inside the target's
box, where the runtime never exceeds the proven maximum over the target, and where every shape
inside a memory pattern's box (and only those) lies in the pattern's drawn range, its runtime at
most the pattern's proven maximum."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from hypothesis import given, settings
from hypothesis import strategies as st

from attnws.spec.command_line import load_target_arg
from attnws.plot.series import FOREIGN, HELD, SWEEPS, compute_series, parse_at, proven_values
from attnws.solver.tight import pattern_maximum
from attnws.spec.errors import UsageError
from attnws.spec.problem import Op
from attnws.spec.target import DEFAULT_TARGET, DimRange, Pattern, Target
from tests.cli.helpers import attnws

# A small GroupQueryAttention decoder: S <= T over a 64-token cache, N, H, Nk and P fixed.
SMALL_GQA = Target(op=Op.GQA, element_size=2, batch=DimRange(1, 2), seq=DimRange(1, 8), heads=DimRange(8, 8),
                   head_size=DimRange(128, 128), kv_heads=DimRange(2, 2), total_seq=DimRange(1, 64),
                   past=DimRange(64, 64), max_total_seq=64, name="gqa-small")
TARGETS = {  # packed, MultiHeadAttention and GroupQueryAttention, declared and implicit Hv, L, P and T
    "default": DEFAULT_TARGET,
    "gqa-small": SMALL_GQA,
    "declared-tokens": replace(DEFAULT_TARGET, tokens=DimRange(64, 4096), name="declared-tokens"),
    "whisper-cross": "mha-whisper-decoder-cross-fp16-sm75",
    "decoder-past": "mha-decoder-past-fp32-sm80",
    "past-without-range": "mha-bert-encoder-fp16-sm80",
    "pa-v-wider": "pa-fp16-sm80-v-hidden-wider",
}
PATTERNS = {  # memory patterns over the swept and the held dimensions, the tokens that follow B*S among them
    "default": ["short:seq=1..64", "packed:tokens=100..2000", "mid:batch=2..16,seq=100..300"],
    "declared-tokens": ["few:tokens=64..1000", "wide:batch=8..32"],
    "whisper-cross": ["cross-short:kv_seq=1..128", "one:batch=1,seq=1..8"],
    "decoder-past": ["decode:seq=1", "prefill:past=0", "mid:batch=2..4,past=100..800"],
    "gqa-small": ["decode:seq=1", "prefill:seq=2..8", "mid:batch=2,total_seq=10..30"],
    "past-without-range": ["decode:seq=1", "small:batch=1..4,seq=64..512"],
    "pa-v-wider": ["pair:batch=1..2"],
}


@lru_cache(maxsize=None)
def target(name: str) -> Target:
    value = TARGETS[name]
    if name == "past-without-range":
        value = replace(load_target_arg(value), with_past=True, with_present=True)
    t = value if isinstance(value, Target) else load_target_arg(value)
    return replace(t, patterns=tuple(Pattern.parse(text) for text in PATTERNS[name]))


@lru_cache(maxsize=None)
def proven_max(name: str) -> int | None:
    return proven_values(target(name)).max_bytes


@lru_cache(maxsize=None)
def pattern_max(name: str, index: int) -> int:
    """The pattern's proven maximum (each of these patterns is decided)."""
    result = pattern_maximum(target(name), target(name).patterns[index])
    assert result.verdict.value == "PROVED", (name, index, result.verdict)
    return result.details["max_runtime_bytes"]


def in_box(g, pattern: Pattern) -> bool:
    """Whether a shape lies in a pattern's box, stated here: T the tokens (B*S unless given), L the
    key length (S unless given), P the past (0 unless given), GroupQueryAttention's T its own."""
    at = {"batch": g.batch, "seq": g.seq, "tokens": g.batch * g.seq if g.tokens is None else g.tokens,
          "kv_seq": g.seq if g.kv_seq is None else g.kv_seq, "past": g.past, "total_seq": g.total_seq}
    return all(r.lo <= at[dim] <= r.hi for dim, r in pattern.dims)


GARBAGE = ["", "-1", "x", "1_0", "\u0668", " 7", "64.0", "99999999999"]


@st.composite
def value_of(draw, t: Target, dim: str) -> str:
    """A value for --at: mostly inside a declared range, else at its edges; for an implicit
    dimension its relation's usual values (H, S, 0) or anything; now and then text that is no integer."""
    box = getattr(t, dim)
    kind = draw(st.sampled_from(["usual"] * 6 + ["edge", "garbage"]))
    if kind == "garbage":
        return draw(st.sampled_from(GARBAGE))
    if box is None:
        return str(draw(st.sampled_from([0, 1, 8, 64, 128, 256, 448]) if kind == "usual" else st.integers(0, 5000)))
    if kind == "usual":
        return str(draw(st.integers(box.lo, box.hi)))
    return str(draw(st.sampled_from([max(0, box.lo - 1), box.hi + 1])))


@st.composite
def plots(draw):
    """A target, a sweep (mostly one of its own) and up to three --at pairs, mostly of its own
    dimensions other than the swept one."""
    name = draw(st.sampled_from(sorted(TARGETS)))
    t = target(name)
    own = [s for s, d in SWEEPS.items() if d not in FOREIGN[t.op]]
    sweep = draw(st.sampled_from(own * 4 + sorted(SWEEPS)))
    dims = [n for n, d in HELD.items() if d not in FOREIGN[t.op] and d != SWEEPS[sweep]]
    chosen = draw(st.lists(st.sampled_from(dims * 6 + sorted(HELD)), max_size=3, unique=True))
    return name, sweep, [f"{n}={draw(value_of(t, HELD[n]))}" for n in chosen]


def shape_of(t: Target, held: dict, sweep_dim: str, x: int) -> dict:
    """The shape of one plotted value, stated here: held dimensions, the swept one, tokens that
    follow B*S up to a declared maximum, and GroupQueryAttention's S that follows T up to its own."""
    dims = {**held, sweep_dim: x}
    if t.op is Op.GQA and "seq" not in dims:
        dims["seq"] = min(t.seq.hi, x)
    if t.op in (Op.PA, Op.PMHA) and "tokens" not in dims and t.tokens is not None:
        dims["tokens"] = min(t.tokens.hi, dims["batch"] * dims["seq"])
    return dims


@settings(max_examples=60)
@given(plots())
def test_every_plotted_shape_is_in_the_target_and_under_the_proven_maxima(case):
    name, sweep, pairs = case
    t = target(name)
    try:
        at = parse_at(pairs, sweep, t)
        s = compute_series(t, sweep, at, proofs=False, max_points=32)
    except UsageError as error:
        assert str(error).startswith(("--at", "--sweep")), error
        return
    assert s.points, "a line that draws nothing is refused, not drawn empty"
    maximum = proven_max(name)
    sweep_dim = SWEEPS[sweep]
    assert sweep_dim not in FOREIGN[t.op]
    for p in s.points:
        dims = shape_of(t, s.held, sweep_dim, p.x)
        assert t.contains(t.geometry(**dims)), (pairs, sweep, p.x)
        # Target.contains lets any L and P pass where the target ties L = S and P = 0; the solver does not
        assert t.kv_seq is not None or "kv_seq" not in dims, (pairs, sweep)
        assert t.past is not None or dims.get("past", 0) == 0, (pairs, sweep)
        if p.runtime is not None and maximum is not None:
            assert p.runtime <= maximum, (pairs, sweep, p.x, p.runtime, maximum)
        if t.op is Op.GQA:  # the model's dimensions at their value, S <= T (the cache is not windowed)
            assert (dims["heads"], dims["head_size"], dims["kv_heads"], dims["past"]) == (8, 128, 2, 64)
            assert dims["seq"] <= dims["total_seq"], (pairs, sweep, p.x)
        assert (p.runtime is None) == bool(p.missing), (pairs, sweep, p.x)  # no bytes: always said why
        g = t.geometry(**dims)
        for index, (pattern, line) in enumerate(zip(t.patterns, s.patterns)):
            inside = in_box(g, pattern)
            drawn = line.x_range is not None and line.x_range[0] <= p.x <= line.x_range[1]
            assert inside == drawn, (pairs, sweep, p.x, pattern.name, line.x_range)
            if inside and p.runtime is not None:
                assert p.runtime <= pattern_max(name, index), (pairs, sweep, p.x, pattern.name, p.runtime)
    assert [line.name for line in s.patterns] == [pattern.name for pattern in t.patterns]
    for pattern, line in zip(t.patterns, s.patterns):  # a drawn range is every x of the line in the box
        if line.x_range is None:
            continue
        lo, hi = line.x_range
        assert s.x[0] <= lo <= hi <= s.x[-1]
        box = {x: in_box(t.geometry(**shape_of(t, s.held, sweep_dim, x)), pattern) for x in (lo - 1, lo, hi, hi + 1)}
        assert box[lo] and box[hi], (pairs, sweep, pattern.name, line.x_range)
        assert (lo == s.x[0] or not box[lo - 1]) and (hi == s.x[-1] or not box[hi + 1]), (pairs, sweep, pattern.name)


@settings(max_examples=12)
@given(st.sampled_from(sorted(SWEEPS)), st.lists(st.sampled_from(sorted(HELD)), min_size=1, max_size=2, unique=True),
       st.data())
def test_the_command_answers_every_at_and_sweep_with_a_line_or_a_usage_error(sweep, names, data):
    """Through the CLI (a target the solver proves fast): exit 0 with a JSON series under the
    proven maximum, or exit 2 with a usage error; never an internal error (exit 4) or a traceback."""
    t = load_target_arg("vit-b16-pmha-fp32-sm80")
    argv = ["plot", "--target", "vit-b16-pmha-fp32-sm80", "--sweep", sweep, "--json"]
    for name in names:
        argv += ["--at", f"{name}={data.draw(value_of(t, HELD[name]))}"]
    run = attnws(*argv)
    assert run.code in (0, 2), (argv, run.code, run.err)
    assert "Traceback" not in run.out + run.err
    if run.code == 2:
        assert "usage error" in run.err
    else:
        doc = run.json()
        maximum = doc["series"]["proven_max_bytes"]
        assert all(y <= maximum for y in doc["series"]["runtime_bytes"] if y is not None)
