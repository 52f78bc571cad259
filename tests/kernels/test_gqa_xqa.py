"""GroupQueryAttention's XQA route on the simulator (`attnws.kernels.gqa.xqa_route`): the memset and
the kernel on one guarded root the size of the XQA recipe, against a float64 reference and the
footprint of ORT 1.31.1's XQA scratch (`docs/research/gqa-footprint.md` §5).

Shapes: H = 64 (XQA's smallest head size), G = 2 and 4, capacity 300..700 on 8 SMs, so a sequence
runs 2 or 3 subsequences; the key lengths differ per batch row, so a subsequence may get no tile,
or two (stride P). Cache rows past a key length, and before a sliding window, are NaN: a kernel
reading them poisons its row. The scratch segments are stated here from the research notes:
semaphores [0, 4 B Nk); row max then row sum records of 128 bytes per subsequence at
s0 = align128(4 B Nk); partial outputs, 2 G H bytes per subsequence, at s0 + roundUp(256 n, 2 G H);
every other byte of the root is left alone.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

from attnws.kernels.allocator import GUARD_BYTES, SENTINEL, Allocator
from attnws.kernels.backends import xqa
from attnws.kernels.gqa import xqa_route
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.footprint import xqa_touches
from attnws.spec.gqa.problem import GqaProblem
from attnws.spec.gqa.recipe import XqaConfig, xqa as xqa_recipe
from attnws.spec.options import RuntimeConfig
from attnws.spec.problem import Backend

from tests.kernels.gqa_shapes import gqa

H = 64
TOLERANCE = 4e-3  # fp16 inputs, fp16 partial rows and output; |output| <= max |v| ~ 4
# name: (B, N, Nk, capacity, key lengths, window, SMs) -> P subsequences per sequence
CASES = {
    "b1-g2-three-subsequences": ((1, 4, 2, 700, (650,), 0, 8), 3),
    "b2-g4-tile-stride-and-empty-subsequence": ((2, 8, 2, 600, (530, 200), 0, 8), 2),
    "b2-g2-full-capacity": ((2, 4, 2, 300, (300, 257), 0, 8), 2),
    "b1-g4-one-kv-head-window-skips-a-tile": ((1, 4, 1, 700, (690,), 300, 8), 3),  # 256 n = 768: partials at 1024
    "b1-g2-one-subsequence": ((1, 4, 2, 400, (333,), 0, 2), 1),
}


def problem(batch: int, heads: int, kv_heads: int, capacity: int, lengths: tuple[int, ...], window: int) -> GqaProblem:
    return gqa(batch, 1, heads, kv_heads, H, max(lengths), past=capacity,
               **({"window": window} if window else {}))


def segments(batch: int, heads: int, kv_heads: int, per: int) -> dict[str, tuple[int, int]]:
    """Return the footprint's written segments [start, end) in bytes from the semaphores."""
    n = batch * kv_heads * per
    s0 = -(-4 * batch * kv_heads // 128) * 128
    vector = 2 * (heads // kv_heads) * H
    partials = s0 + -(-256 * n // vector) * vector
    return {"semaphores": (0, 4 * batch * kv_heads), "records": (s0, s0 + 256 * n),
            "partials": (partials, partials + vector * n)}


def subsequence_keys(length: int, window: int, per: int, sub: int) -> list[int]:
    """Return the keys subsequence `sub` of a sequence attends: tiles sub, sub + P, ... of 256 keys
    from the window's first tile, the keys before the window masked."""
    skip = length - window if 0 < window < length else 0
    return [j for t in range(skip // 256 + sub, -(-length // 256), per)
            for j in range(max(256 * t, skip), min(256 * (t + 1), length))]


def softmax_state(q: np.ndarray, k: np.ndarray, v: np.ndarray, keys: list[int]) -> tuple[float, float, np.ndarray]:
    """Return (max score, sum of exp(score - max), the normalized output row) over `keys`, float64;
    (-inf, 0, zeros) without a key."""
    if not keys:
        return -math.inf, 0.0, np.zeros(H)
    x = k[keys].astype(np.float64) @ q.astype(np.float64) / math.sqrt(H)
    e = np.exp(x - x.max())
    return float(x.max()), float(e.sum()), e @ v[keys].astype(np.float64) / e.sum()


def inputs(batch: int, heads: int, kv_heads: int, capacity: int, lengths: tuple[int, ...], window: int, seed: int = 0):
    """Return fp16 q [B, N, H], k and v [B, Nk, C, H] (rows outside the attended keys NaN)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, heads, H)).astype(np.float16)
    k, v = (rng.standard_normal((batch, kv_heads, capacity, H)).astype(np.float16) for _ in range(2))
    for b, length in enumerate(lengths):
        skip = length - window if 0 < window < length else 0
        for cache in (k, v):
            cache[b, :, length:] = np.nan
            cache[b, :, :skip] = np.nan
    return q, k, v


def run(p: GqaProblem, sm_count: int, lengths: tuple[int, ...], q, k, v, memset: bool = True, launches: int = 1):
    """Run the route (the memset when asked, then the kernel `launches` times) on a root of the XQA
    recipe's bytes; return (workspace bytes with guards, output bytes with guards, recipe bytes)."""
    nbytes = xqa_recipe(p.workspace_problem(CONCRETE), XqaConfig(sm=80, sm_count=sm_count)).total_backend_bytes
    with Allocator() as allocator:
        workspace = allocator.root("attention", nbytes)
        output = allocator.root("output", 2 * q.size)
        memset_stage, kernel_stage = xqa_route.xqa_stages(
            p, sm_count, workspace.pointer(0, np.uint8), allocator.upload("query", q.ravel()),
            allocator.upload("key", k.ravel()), allocator.upload("value", v.ravel()),
            allocator.upload("key_lengths", np.array(lengths, np.int32)), output.pointer(0, np.float16))
        if memset:
            memset_stage.enqueue()
        for _ in range(launches):
            kernel_stage.enqueue()
        cuda.synchronize()
        return workspace.raw.copy_to_host(), output.raw.copy_to_host(), nbytes


def reference(q, k, v, lengths, window: int) -> np.ndarray:
    """Return the float64 output [B, N, H]: each query head over its KV head's attended keys."""
    batch, heads, _ = q.shape
    group = heads // k.shape[1]
    out = np.zeros(q.shape)
    for b, length in enumerate(lengths):
        keys = subsequence_keys(length, window, 1, 0)
        for n in range(heads):
            out[b, n] = softmax_state(q[b, n], k[b, n // group], v[b, n // group], keys)[2]
    return out


def payload(raw: np.ndarray, nbytes: int) -> np.ndarray:
    """Return the bytes between the guard bands, after checking the bands still hold the sentinel."""
    assert (raw[:GUARD_BYTES] == SENTINEL).all() and (raw[GUARD_BYTES + nbytes:] == SENTINEL).all()
    return raw[GUARD_BYTES:GUARD_BYTES + nbytes]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_xqa_matches_the_reference_and_writes_exactly_its_footprint(case):
    (batch, heads, kv_heads, capacity, lengths, window, sm_count), per = CASES[case]
    p = problem(batch, heads, kv_heads, capacity, lengths, window)
    assert select(p, RuntimeConfig.make(sm=80, sm_count=sm_count)).route.backend is Backend.XQA
    q, k, v = inputs(batch, heads, kv_heads, capacity, lengths, window)
    raw, out_raw, nbytes = run(p, sm_count, lengths, q, k, v)

    out = payload(out_raw, 2 * q.size).view(np.float16).astype(np.float64).reshape(q.shape)
    assert np.abs(out - reference(q, k, v, lengths, window)).max() < TOLERANCE

    ws = payload(raw, nbytes)
    written = segments(batch, heads, kv_heads, per) if per > 1 else {"semaphores": (0, 4 * batch * kv_heads)}
    untouched = np.ones(nbytes, bool)
    for start, end in written.values():
        untouched[start:end] = False
    assert (ws[untouched] == SENTINEL).all()
    sem = written["semaphores"]
    assert (ws[sem[0]:sem[1]].view(np.uint32) == 0).all()  # zeroed, and the wrapping increments end at 0
    if per == 1:
        return
    records = ws[slice(*written["records"])].view(np.uint32)
    partials = ws[slice(*written["partials"])].view(np.uint16)
    assert (records != 0xFFFFFFFF).all() and (partials != 0xFFFF).all()  # every element written
    check_scratch(ws, written, q, k, v, lengths, window, per)


def check_scratch(ws, written, q, k, v, lengths, window, per):
    """Each subsequence's records (row r of a 32-row record at float (r mod 8) * 4 + (r div 8) mod 4)
    and partial rows ([H / 64][G][64] fp16) against its float64 softmax state."""
    batch, heads, _ = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    n = batch * kv_heads * per
    records = ws[slice(*written["records"])].view(np.float32).reshape(2, n, 8, 4)
    partials = ws[slice(*written["partials"])].view(np.float16).reshape(n, H // 64, group, 64)
    for b, length in enumerate(lengths):
        for kv in range(kv_heads):
            for sub in range(per):
                buf = (b * kv_heads + kv) * per + sub
                keys = subsequence_keys(length, window, per, sub)
                for r in range(32):
                    row_max, row_sum = records[0, buf, r % 8, r // 8 % 4], records[1, buf, r % 8, r // 8 % 4]
                    if r >= group:
                        continue  # padding rows: written, values unspecified (ORT's are)
                    m, l, o = softmax_state(q[b, kv * group + r], k[b, kv], v[b, kv], keys)
                    assert row_max == pytest.approx(m, abs=1e-4) and row_sum == pytest.approx(l, rel=1e-4)
                    assert np.abs(partials[buf, :, r].reshape(H) - o).max() < TOLERANCE


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_launch_carves_the_scratch_the_footprint_states(case):
    (batch, heads, kv_heads, capacity, lengths, window, sm_count), per = CASES[case]
    p = problem(batch, heads, kv_heads, capacity, lengths, window)
    memset, kernel = xqa_touches(CONCRETE, p.workspace_problem(CONCRETE), sm_count)
    kernel_per, layout = xqa_route.xqa_geometry(p, sm_count)
    assert kernel_per == per
    assert (xqa_route.MEMSET, xqa_route.EPILOGUE) == (memset.writer, kernel.writer)
    assert (memset.start, memset.nbytes) == (0, layout.semaphores)
    assert (kernel.start, kernel.nbytes) == (0, layout.end)  # with P = 1 the scratch base: nothing past it
    if per > 1:
        seg = segments(batch, heads, kv_heads, per)
        assert (layout.row_max, layout.records_end, layout.partials, layout.end) == (*seg["records"], *seg["partials"])


SMALL = ((1, 4, 2, 300, (270,), 0, 8), 2)  # two subsequences, the second of 14 keys


def test_the_semaphores_wrap_to_zero_so_a_second_launch_merges_again():
    (batch, heads, kv_heads, capacity, lengths, window, sm_count), _ = SMALL
    p = problem(batch, heads, kv_heads, capacity, lengths, window)
    q, k, v = inputs(batch, heads, kv_heads, capacity, lengths, window, seed=1)
    raw, out_raw, nbytes = run(p, sm_count, lengths, q, k, v, launches=2)
    out = payload(out_raw, 2 * q.size).view(np.float16).astype(np.float64).reshape(q.shape)
    assert np.abs(out - reference(q, k, v, lengths, window)).max() < TOLERANCE
    assert (payload(raw, nbytes)[:4 * batch * kv_heads] == 0).all()


def test_without_the_memset_no_subsequence_is_last_and_nothing_is_merged():
    """Semaphores left at the sentinel 0xFFFFFFFF: the first increment wraps to 0, the last CTA
    finds P - 2, so no CTA merges and the output keeps its sentinel."""
    (batch, heads, kv_heads, capacity, lengths, window, sm_count), per = SMALL
    p = problem(batch, heads, kv_heads, capacity, lengths, window)
    q, k, v = inputs(batch, heads, kv_heads, capacity, lengths, window, seed=2)
    raw, out_raw, nbytes = run(p, sm_count, lengths, q, k, v, memset=False)
    assert (payload(out_raw, 2 * q.size) == SENTINEL).all()
    assert (payload(raw, nbytes)[:4 * batch * kv_heads].view(np.uint32) == per - 1).all()


def plan(**changes) -> xqa.XqaPlan:
    fields = dict(q=None, k=None, v=None, key_lengths=None, out=None, semaphores=None, records=None,
                  partials=None, batch=1, heads=4, kv_heads=2, head_size=64, capacity=256, per_sequence=1, window=0,
                  scale=0.125)
    return xqa.XqaPlan(**{**fields, **changes})


@pytest.mark.parametrize("changes, message", [
    ({"head_size": 96}, "head_size=96"),
    ({"heads": 128, "kv_heads": 2}, "heads=128"),
    ({"heads": 6, "kv_heads": 4}, "heads=6"),
    ({"per_sequence": 2}, "scratch is given exactly when"),
    ({"window": -1}, "window=-1"),
], ids=["head_size=96", "group=64", "heads=6-kv_heads=4", "per_sequence=2-without-scratch", "window=-1"])
def test_a_plan_the_kernel_cannot_run_is_refused_before_launch(changes, message):
    with pytest.raises(InvalidArgument, match=message):
        xqa.check_xqa_plan(plan(**changes))
