"""GroupQueryAttention's preparation, MEA and unfused stages, each against a float64 / numpy
statement written here, at tiny shapes; and each writes its whole region (or exactly the rows ORT's
kernel writes) and nothing around it: every region sits between sentinel bands."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

from attnws.kernels.gqa import mea_route, preparation, unfused_route
from attnws.kernels.gqa.preparation import CacheGeometry, NewTokens, Rotary, Window

SENTINEL = 0xFF
GUARD = 64  # bytes of sentinel on each side of a region
B, N, NK, H = 2, 4, 2, 8
G = N // NK
RNG = np.random.default_rng(23)


class Guarded:
    """A region of `count` elements of `dtype` between two GUARD-byte sentinel bands on the device."""

    def __init__(self, count: int, dtype: type) -> None:
        self.count, self.dtype = count, np.dtype(dtype)
        size = count * self.dtype.itemsize
        self.raw = cuda.to_device(np.full(2 * GUARD + size, SENTINEL, np.uint8))
        self.view = self.raw[GUARD:GUARD + size].view(self.dtype)

    def host(self) -> np.ndarray:
        """Return the region's elements after checking that both bands are untouched."""
        raw = self.raw.copy_to_host()
        assert (raw[:GUARD] == SENTINEL).all() and (raw[-GUARD:] == SENTINEL).all(), "a write outside the region"
        return raw[GUARD:-GUARD].view(self.dtype)

    def written(self) -> np.ndarray:
        """Return, per element, whether some byte of it differs from the sentinel."""
        return (self.host().view(np.uint8).reshape(self.count, self.dtype.itemsize) != SENTINEL).any(axis=1)


def upload(host: np.ndarray) -> Guarded:
    region = Guarded(host.size, host.dtype)
    region.view.copy_to_device(host.ravel())
    return region


def half(*shape: int) -> np.ndarray:
    return (RNG.standard_normal(shape) * 0.5).astype(np.float16)


def run(*launches) -> None:
    for launch in launches:
        launch.enqueue()
    cuda.synchronize()


# -- sequence lengths -----------------------------------------------------------------------------
def expected_lengths(seqlens: list[int], s: int, t: int, window: Window | None) -> np.ndarray:
    """GetSequenceLengths' vectors, stated from ORT's formulas."""
    first = s == t
    totals = [max(k, 0) + 1 for k in seqlens]
    pasts = [0 if first else max(total - s, 0) for total in totals]
    rows = [pasts, totals, [s if first else 0] * len(seqlens)]
    if window is not None:
        c, used = window.real_capacity, window.used_capacity
        gap = c - min(c, used) + 1

        def end(p: int) -> int:
            return p if p <= c else p - gap * math.ceil((p - c) / gap)

        cache_past, cache_total, evicted = [], [], []
        for p in pasts:
            if s == 1:
                resident = end(p)
                e = max(resident - (end(p + 1) - 1), 0)
                d = 0 if used < c else e
            else:
                resident = min(p, c)
                e, d = max(resident + s - c, 0), max(resident + s - used, 0)
            cache_past.append(resident - d)
            cache_total.append(min(resident + s, used))
            evicted.append(e)
        rows += [cache_past, cache_total, evicted]
    return np.array(rows, np.int32).ravel()


@pytest.mark.parametrize("seqlens, s, t, window", [
    ([2, 4], 3, 3, None),  # first prompt
    ([6, 3], 1, 7, None),  # decode
    ([9, 5], 3, 10, Window(8 + 3, 8)),  # windowed staging step
    ([8, 4], 1, 9, Window(8, 8)),  # windowed decode: the full cache compacts
], ids=["first-prompt", "decode", "windowed-staging", "windowed-decode"])
def test_sequence_lengths_fill_every_vector(seqlens, s, t, window):
    count = preparation.vector_count(window) * B
    region = Guarded(count, np.int32)
    run(preparation.sequence_lengths(region.view, cuda.to_device(np.array(seqlens, np.int32)), B, s, t, window))
    assert region.written().all()
    np.testing.assert_array_equal(region.host(), expected_lengths(seqlens, s, t, window))


# -- staging and compaction -----------------------------------------------------------------------
def test_staging_copies_the_past_rows_into_the_staged_regions():
    c, s = 6, 3
    k, v = half(B, NK, c, H), half(B, NK, c, H)
    staged = [Guarded(B * NK * (c + s) * H, np.float16) for _ in range(2)]
    geometry = CacheGeometry(B, NK, c, H)
    run(*preparation.copy_cache_rows(staged[0].view, staged[1].view, cuda.to_device(k.ravel()),
                                     cuda.to_device(v.ravel()), geometry, c + s, c))
    for region, source in zip(staged, (k, v)):
        got = region.host().reshape(B, NK, c + s, H)
        np.testing.assert_array_equal(got[:, :, :c], source)
        assert not region.written().reshape(B, NK, c + s, H)[:, :, c:].any()  # the S new rows are the append's


def test_write_back_copies_the_rows_whose_source_exists():
    c, s = 5, 3
    staged = half(B, NK, c + s, H)
    offsets = np.array([4, 0], np.int32)  # batch 0's last row would come from past the staged rows
    real = Guarded(B * NK * c * H, np.float16)
    launches = preparation.copy_cache_rows(real.view, real.view, cuda.to_device(staged.ravel()),
                                           cuda.to_device(staged.ravel()), CacheGeometry(B, NK, c + s, H), c, c + 2,
                                           cuda.to_device(offsets))
    run(launches[0])
    got, written = real.host().reshape(B, NK, c, H), real.written().reshape(B, NK, c, H)
    np.testing.assert_array_equal(got[0, :, :4], staged[0, :, 4:8])
    assert not written[0, :, 4].any()
    np.testing.assert_array_equal(got[1], staged[1, :, :c])


def test_compaction_shifts_the_retained_rows_through_its_region():
    c = 6
    k, v = half(B, NK, c, H), half(B, NK, c, H)
    evict, retained = np.array([2, 0], np.int32), np.array([4, 5], np.int32)
    scratch = Guarded(2 * B * NK * c * H, np.float16)
    present = [upload(k), upload(v)]
    run(preparation.compact_cache(scratch.view, present[0].view, present[1].view, CacheGeometry(B, NK, c, H),
                                  cuda.to_device(evict), cuda.to_device(retained)))
    halves = scratch.host().reshape(2, B, NK, c, H)
    written = scratch.written().reshape(2, B, NK, c, H)
    for i, (cache, source) in enumerate(zip(present, (k, v))):
        expected = source.copy()
        expected[0, :, :4] = source[0, :, 2:6]
        np.testing.assert_array_equal(cache.host().reshape(B, NK, c, H), expected)
        np.testing.assert_array_equal(halves[i, 0, :, :4], source[0, :, 2:6])
        assert written[i, 0, :, :4].all() and not written[i, 0, :, 4:].any() and not written[i, 1].any()


# -- unpack, rotary, append -----------------------------------------------------------------------
def rotate(x: np.ndarray, positions: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool) -> np.ndarray:
    """x [..., H] rotated at positions (broadcast over the heads axis), float64."""
    x = x.astype(np.float64)
    c, s = cos[positions].astype(np.float64), sin[positions].astype(np.float64)
    if interleaved:
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = x0 * c - x1 * s, x1 * c + x0 * s
        return out
    half_h = x.shape[-1] // 2
    x0, x1 = x[..., :half_h], x[..., half_h:]
    return np.concatenate([x0 * c - x1 * s, x1 * c + x0 * s], axis=-1)


ROTARY = [None, False, True]  # no rotary, half-split pairs, interleaved pairs
ROTARY_IDS = ["plain", "rotary", "rotary-interleaved"]


def tokens(s: int, h: int, packed: bool, past: np.ndarray) -> tuple[NewTokens, np.ndarray, np.ndarray, np.ndarray]:
    q, k, v = half(B, s, N, h), half(B, s, NK, h), half(B, s, NK, h)
    common = dict(batch=B, seq=s, heads=N, kv_heads=NK, head_size=h, past_seq_lens=cuda.to_device(past))
    if packed:
        qkv = np.concatenate([q.reshape(B, s, -1), k.reshape(B, s, -1), v.reshape(B, s, -1)], axis=2)
        return NewTokens(packed=cuda.to_device(qkv.ravel()), **common), q, k, v
    return NewTokens(query=cuda.to_device(q.ravel()), key=cuda.to_device(k.ravel()), value=cuda.to_device(v.ravel()),
                     **common), q, k, v


def caches(h: int, max_pos: int = 16) -> tuple[np.ndarray, np.ndarray]:
    angles = np.arange(max_pos)[:, None] / 10000 ** (np.arange(h // 2)[None, :] / (h // 2))
    return np.cos(angles).astype(np.float16), np.sin(angles).astype(np.float16)


@pytest.mark.parametrize("interleaved", ROTARY, ids=ROTARY_IDS)
@pytest.mark.parametrize("packed", [False, True], ids=["separate", "packed"])
@pytest.mark.parametrize("s", [1, 3])
def test_unpack_query_fills_the_q_scratch(s, packed, interleaved):
    h, past = 16, np.array([2, 5], np.int32)
    new, q, _, _ = tokens(s, h, packed, past)
    cos, sin = caches(h)
    rotary = None if interleaved is None else Rotary(cuda.to_device(cos.ravel()), cuda.to_device(sin.ravel()),
                                                     interleaved)
    scratch = Guarded(B * s * N * h, np.float16)
    run(preparation.unpack_query(scratch.view, new, rotary))
    expected = q.astype(np.float64)
    if rotary is not None:
        positions = (past[:, None] + np.arange(s)[None, :])[:, :, None]
        expected = rotate(q, positions, cos, sin, interleaved)
    assert scratch.written().all()
    np.testing.assert_allclose(scratch.host().reshape(B, s, N, h), expected, atol=2e-3)


@pytest.mark.parametrize("interleaved", ROTARY, ids=ROTARY_IDS)
def test_append_writes_the_new_rows_only(interleaved):
    s, c, h = 3, 8, 16
    past, append_at = np.array([4, 1], np.int32), np.array([2, 1], np.int32)  # windowed: cache rows differ
    new, _, k, v = tokens(s, h, True, past)
    cos, sin = caches(h)
    rotary = None if interleaved is None else Rotary(cuda.to_device(cos.ravel()), cuda.to_device(sin.ravel()),
                                                     interleaved)
    present = [Guarded(B * NK * c * h, np.float16) for _ in range(2)]
    run(preparation.append_key_value(present[0].view, present[1].view, c, new, cuda.to_device(append_at), rotary))
    positions = (past[:, None] + np.arange(s)[None, :])[:, :, None]
    new_k = k.astype(np.float64) if rotary is None else rotate(k, positions, cos, sin, interleaved)
    for cache, rows in zip(present, (new_k, v.astype(np.float64))):
        got, written = cache.host().reshape(B, NK, c, h), cache.written().reshape(B, NK, c, h)
        for b, at in enumerate(append_at):
            np.testing.assert_allclose(got[b, :, at:at + s], rows[b].transpose(1, 0, 2), atol=2e-3)
            assert written[b, :, at:at + s].all()
            assert not written[b, :, :at].any() and not written[b, :, at + s:].any()


# -- attention statements -------------------------------------------------------------------------
def grouped_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, lengths: np.ndarray, causal: bool,
                      visible_before: int | None, softcap: float = 0.0) -> np.ndarray:
    """float64 attention: q [B, S, N, H], k / v the BNSH cache [B, Nk, C, H]; query s of batch b at
    position L_b - S + s sees keys j < L_b, j <= position when causal, and j > position -
    visible_before when a window is given. Returns [B, S, N, H]."""
    b_, s_, n_, h_ = q.shape
    group = n_ // k.shape[1]
    out = np.zeros(q.shape)
    for b in range(b_):
        for s in range(s_):
            position = lengths[b] - s_ + s
            keys = np.arange(lengths[b])
            if causal:
                keys = keys[keys <= position]
            if visible_before is not None:
                keys = keys[keys > position - visible_before]
            for n in range(n_):
                if keys.size == 0:
                    continue
                x = k[b, n // group, keys].astype(np.float64) @ q[b, s, n].astype(np.float64) / math.sqrt(h_)
                if softcap > 0:
                    x = softcap * np.tanh(x / softcap)
                p = np.exp(x - x.max())
                out[b, s, n] = p / p.sum() @ v[b, n // group, keys].astype(np.float64)
    return out


# -- MEA ------------------------------------------------------------------------------------------
def test_ungroup_expands_every_row_of_both_regions():
    ce = 5
    k, v = half(B, NK, ce, H), half(B, NK, ce, H)
    expanded = [Guarded(B * N * ce * H, np.float16) for _ in range(2)]
    launches = mea_route.expand_key_value(expanded[0].view, expanded[1].view, cuda.to_device(k.ravel()),
                                    cuda.to_device(v.ravel()), B, N, NK, ce, H)
    assert [launch.stage for launch in launches] == ["Ungroup (K)", "Ungroup (V)"]
    run(*launches)
    for region, source in zip(expanded, (k, v)):
        assert region.written().all()
        np.testing.assert_array_equal(region.host().reshape(B, N, ce, H), np.repeat(source, G, axis=1))


@pytest.mark.parametrize("s, window, h", [(1, -1, 8), (3, -1, 8), (3, 2, 8), (1, -1, 136)],
                         ids=["decode", "prompt-causal", "prompt-window", "accumulator"])
def test_mea_attention_over_the_expanded_cache(s, window, h):
    ce, lengths = 7, np.array([7, 4], np.int32)
    q, k, v = half(B, s, N, h), half(B, NK, ce, h), half(B, NK, ce, h)
    expanded = [Guarded(B * N * ce * h, np.float16) for _ in range(2)]
    out = Guarded(B * s * N * h, np.float16)
    accumulator = Guarded(B * s * N * h, np.float32) if h > 128 else None
    plan = mea_route.GroupedAttentionPlan(cuda.to_device(q.ravel()), expanded[0].view, expanded[1].view, out.view,
                                    cuda.to_device(lengths), B, s, N, ce, h, 1 / math.sqrt(h),
                                    None if accumulator is None else accumulator.view, True, window)
    run(*mea_route.expand_key_value(expanded[0].view, expanded[1].view, cuda.to_device(k.ravel()),
                              cuda.to_device(v.ravel()), B, N, NK, ce, h), mea_route.attention(plan))
    expected = grouped_attention(q, k, v, lengths, True, window if window > 0 else None)
    assert out.written().all()
    np.testing.assert_allclose(out.host().reshape(B, s, N, h), expected, atol=2e-3)
    for region in expanded + ([] if accumulator is None else [accumulator]):
        assert region.written().all()


def test_mea_accumulator_is_required_exactly_above_128():
    dummy = cuda.to_device(np.zeros(1, np.float16))
    with pytest.raises(ValueError, match="H > 128"):
        mea_route.attention(mea_route.GroupedAttentionPlan(*[dummy] * 5, B, 1, N, 4, 136, 1.0))
    with pytest.raises(ValueError, match="H > 128"):
        mea_route.attention(mea_route.GroupedAttentionPlan(*[dummy] * 5, B, 1, N, 4, 8, 1.0, dummy))


# -- unfused --------------------------------------------------------------------------------------
@pytest.mark.parametrize("s, masking", [
    (1, unfused_route.Masking(1 / math.sqrt(H))),
    (3, unfused_route.Masking(1 / math.sqrt(H), window=2)),
    (3, unfused_route.Masking(1 / math.sqrt(H), softcap=0.5)),
], ids=["decode", "prompt-window", "prompt-softcap"])
def test_unfused_stages_fill_their_regions(s, masking):
    c, tk, lengths = 8, 6, np.array([6, 4], np.int32)
    shape = unfused_route.UnfusedShape(B, s, N, NK, H, tk, c)
    q, k, v = half(B, s, N, H), half(B, NK, c, H), half(B, NK, c, H)
    q_bnsh, y_bnsh = Guarded(B * N * s * H, np.float16), Guarded(B * N * s * H, np.float16)
    scores, probabilities = Guarded(B * N * s * tk, np.float32), Guarded(B * N * s * tk, np.float16)
    out = Guarded(B * s * N * H, np.float16)
    key, value = cuda.to_device(k.ravel()), cuda.to_device(v.ravel())
    launches = [unfused_route.transpose_query(q_bnsh.view, cuda.to_device(q.ravel()), shape),
                unfused_route.qk_gemm(scores.view, q_bnsh.view, key, shape),
                unfused_route.softmax(probabilities.view, scores.view, cuda.to_device(lengths), shape, masking),
                unfused_route.av_gemm(y_bnsh.view, probabilities.view, value, shape),
                unfused_route.transpose_output(out.view, y_bnsh.view, shape)]
    assert [launch.stage for launch in launches] == ["Transpose_BSNH_to_BNSH", "QK GEMM", "UnfusedSoftmaxKernel",
                                                     "AV GEMM", "Transpose_BNSH_to_BSNH"]
    run(*launches)
    for region in (q_bnsh, y_bnsh, scores, probabilities, out):
        assert region.written().all()
    np.testing.assert_array_equal(q_bnsh.host().reshape(B, N, s, H), q.transpose(0, 2, 1, 3))
    expected_scores = np.einsum("bsnh,bnjh->bnsj", q.astype(np.float64), np.repeat(k[:, :, :tk], G, axis=1))
    np.testing.assert_allclose(scores.host().reshape(B, N, s, tk), expected_scores, atol=1e-4)
    # ORT's unfused window keeps W + 1 keys (start = position - W).
    visible = None if masking.window < 0 else masking.window + 1
    expected = grouped_attention(q, k, v, lengths, masking.causal, visible, masking.softcap)
    np.testing.assert_allclose(out.host().reshape(B, s, N, H), expected, atol=3e-3)
