"""Device functions of the tiled attention kernels (TRT-, Flash- and MEA-style): one query row per
thread, keys streamed through shared memory in tiles, online softmax state (m_i, l_i, acc).

For each tile of BLOCK_N keys with scores x_j (scale folded into the query row):
m_new = max(m_i, max_j x_j); acc = acc * exp(m_i - m_new) + sum_j exp(x_j - m_new) v_j;
l_i = l_i * exp(m_i - m_new) + sum_j exp(x_j - m_new); m_i = m_new. The output row is acc / l_i and
the log-sum-exp is m_i + log(l_i). Launch grid (ceil(S / rows per block), N, B); every thread of a
block takes part in the tile loads and barriers, active (s < L_b) or not.
"""

from __future__ import annotations

import math

from numba import cuda, float32

from ..plans import Packing, ceil_div

BLOCK_M = 64  # query rows (threads) per block; limit 1024 (CUDA block size)
# Keys per shared-memory tile: the K and V tiles take 2 * BLOCK_N * HEAD_MAX * 4 bytes = 32 KiB; limit 48 KiB
# (static shared memory per block).
BLOCK_N = 4
HEAD_MAX = 1024  # largest head size of a tiled route (MEA's kEfficientAttentionMaxHeadSize; Flash and TRT stop at 256)


def row_grid(seq: int, heads: int, batch: int) -> tuple[tuple[int, int, int], int]:
    """Return (grid, block) of a tiled attention launch over S query rows: (ceil(S / rows), N, B)
    blocks of rows = min(BLOCK_M, S) threads (1 when S = 0)."""
    rows = max(1, min(BLOCK_M, seq))
    return (ceil_div(seq, rows), heads, batch), rows


def launch_shape(p: Packing) -> tuple[tuple[int, int, int], int]:
    """Return the `row_grid` of a packed batch: its S, N and B."""
    return row_grid(p.seq, p.heads, p.batch)


@cuda.jit(device=True)
def query_row(cu):
    """Return (b, n, s, first token of sequence b, L_b) for this thread's query row."""
    b = cuda.blockIdx.z
    first = cu[b]
    return b, cuda.blockIdx.y, cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x, first, cu[b + 1] - first


@cuda.jit(device=True)
def block_beyond(length):
    """Return whether this block's first row is past the sequence (the whole block has no work)."""
    return cuda.blockIdx.x * cuda.blockDim.x >= length


@cuda.jit(device=True)
def load_row(row, src, offset, count, scale):
    """row[h] = scale * src[offset + h] for h < count, in float32."""
    for h in range(count):
        row[h] = float32(src[offset + h]) * scale


@cuda.jit(device=True)
def store_row(out, offset, acc, acc_base, count, l_i):
    """out[offset + h] = acc[acc_base + h] / l_i for h < count, in out's element type (0 for a row
    that attended no key, l_i == 0)."""
    for h in range(count):
        out[offset + h] = float32(0.0) if l_i == 0 else acc[acc_base + h] / l_i  # a NaN l_i stays NaN


@cuda.jit(device=True)
def key_step(acc, count, m_i, l_i, x):
    """Take one key of score x into the running state: rescale acc[:count] to the new maximum and
    return (m_new, l_new, weight); the caller then adds weight * v_j to acc."""
    m_new = max(m_i, x)
    alpha = math.exp(m_i - m_new)
    weight = math.exp(x - m_new)
    for h in range(count):
        acc[h] = acc[h] * alpha
    return m_new, l_i * alpha + weight, weight


@cuda.jit(device=True)
def load_tile(tile, src, head_offset, token_stride, first_key, keys, count):
    """tile[j, h] = src[head_offset + (first_key + j) * token_stride + h] for j < keys, h < count; block-wide."""
    for e in range(cuda.threadIdx.x, keys * count, cuda.blockDim.x):
        j = e // count
        tile[j, e - j * count] = float32(src[head_offset + (first_key + j) * token_stride + e - j * count])


@cuda.jit(device=True)
def attend(q, q_start, scale, k, k_head, k_stride, v, v_head, v_stride, first, length, head_size, v_head_size,
           active, row_keys, bias, bias_start, acc, acc_base):
    """Run the online softmax of query q[q_start : q_start + head_size] * scale over keys
    [first, first + length); return (m_i, l_i).

    K element (t, h) is k[k_head + t * k_stride + h], V likewise; `bias` (or None) adds
    bias[bias_start + j] to key j's score. The block loads every tile of the `length` keys; this
    row attends only the first `row_keys` of them (a causal or key-length limit; `length` for
    all). acc[acc_base + h], h < v_head_size, ends as sum_j exp(x_j - m_i) v_j[h]; acc may be a
    local array or a float32 workspace buffer. l_i is 0 when the row attends no key.
    """
    k_tile = cuda.shared.array((BLOCK_N, HEAD_MAX), float32)
    v_tile = cuda.shared.array((BLOCK_N, HEAD_MAX), float32)
    p = cuda.local.array(BLOCK_N, float32)
    q_row = cuda.local.array(HEAD_MAX, float32)
    m_i = float32(-math.inf)
    l_i = float32(0.0)
    if active:
        load_row(q_row, q, q_start, head_size, scale)
        for h in range(v_head_size):
            acc[acc_base + h] = 0.0
    for key0 in range(0, length, BLOCK_N):
        keys = min(BLOCK_N, length - key0)
        load_tile(k_tile, k, k_head, k_stride, first + key0, keys, head_size)
        load_tile(v_tile, v, v_head, v_stride, first + key0, keys, v_head_size)
        cuda.syncthreads()  # waits for the K and V tiles
        valid = min(keys, row_keys - key0)
        if active and valid > 0:
            m_new = m_i
            for j in range(valid):
                x = float32(0.0)
                for h in range(head_size):
                    x += q_row[h] * k_tile[j, h]
                if bias is not None:
                    x += float32(bias[bias_start + key0 + j])
                p[j] = x
                m_new = max(m_new, x)
            alpha = math.exp(m_i - m_new)
            l_i *= alpha
            for j in range(valid):
                p[j] = math.exp(p[j] - m_new)
                l_i += p[j]
            for h in range(v_head_size):
                total = acc[acc_base + h] * alpha
                for j in range(valid):
                    total += p[j] * v_tile[j, h]
                acc[acc_base + h] = total
            m_i = m_new
        cuda.syncthreads()  # waits until every row has read the tiles before the next load overwrites them
    return m_i, l_i
