"""What validating a GroupQueryAttention route costs (the hooks `attnws.kernels.budget` calls): each
stage's simulator seconds, the input elements, and the float64 reference's host bytes.

Per stage, with Tk the keys a query row may see (T, or min(T, C) for a windowed cache; C + S rows
while staging), C the cache capacity and G = N / Nk:
- the preparation's copies (sequence lengths, compaction, the Q scratch, the appended K / V rows,
  the staged seed copy), the unfused transposes, MEA's Ungroup and XQA's memset move their
  elements once (`COPY_SECONDS` each);
- the attention kernels spend most of their simulated time per key a block walks (loading the
  key's K and V, and the barriers around each tile), the rest per key a query row scores:
  Flash's split forward walks Tk keys in each of its ceil(S / 64) * B * N row blocks of min(64, S)
  threads (the key cost growing with the threads that wait at each barrier); XQA's kernel Tk keys
  in each of its B * Nk sequences, whose G rows share them; MEA's kernel Tk keys in each of its
  B * N * S one-row blocks; Flash's combine reads every split's row;
- unfused: the QK and AV GEMMs and the softmax as the packed ones, over Tk keys (`cost_model`).
The per-key seconds were measured with the CUDA simulator (`validate_shape` stage by stage, H 32 to
128, Tk 64 to 2,000) and rounded up: a validation of seconds is estimated at 1.3x to 2x its
measured time, tiny ones at more.
"""

from __future__ import annotations

from ...spec.domain import CONCRETE
from ...spec.gqa.footprint import staging
from ...spec.gqa.problem import GqaProblem
from ...spec.statement import Footprint
from ..cost_model import SOFTMAX_INNER_SECONDS, STAGE_SECONDS, stride_seconds
from ..plans import ceil_div

COPY_SECONDS = 5e-6  # one element moved by a preparation copy (grid-stride, one warp on the simulator)
ROW_KEY_HEAD_SECONDS = 3e-6  # one query row through one key, per head element (its score and its output)
FLASH_BLOCK_KEY_SECONDS = 1.7e-3  # one Flash row block through one key, besides its threads
FLASH_THREAD_KEY_SECONDS = 5e-5  # one thread of a Flash row block at one key's barriers (limit: 64 threads)
FLASH_ROWS = 64  # the split kernel's query rows per block (flash_split.QUERY_TILE)
XQA_SEQUENCE_KEY_SECONDS = 4e-3  # one XQA sequence (B, kv head) through one key ...
XQA_SEQUENCE_KEY_HEAD_SECONDS = 2e-5  # ... and per head element of it
MEA_ROW_KEY_SECONDS = 4e-3  # one MEA row block through one key ...
MEA_ROW_KEY_HEAD_SECONDS = 2e-5  # ... and per head element of it


def key_rows(p: GqaProblem) -> int:
    """Return Tk: the keys a query row may see (module docstring)."""
    c, t = p.present_capacity(CONCRETE), p.total_sequence_length
    if staging(p):
        return c + p.sequence_length
    return min(t, c) if p.sliding_window_cache else t


def attention_seconds(p: GqaProblem, name: str) -> float:
    """Return the seconds of an attention kernel's stage (module docstring), fixed cost excluded."""
    b, s, n, nk, h = p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size
    keys = key_rows(p)
    scoring = b * n * s * keys * h * ROW_KEY_HEAD_SECONDS
    if name == "kernel_mha multi-block epilogue":
        return b * nk * keys * (XQA_SEQUENCE_KEY_SECONDS + h * XQA_SEQUENCE_KEY_HEAD_SECONDS) + scoring
    if name == "cutlass fmha (accumulator)":
        return b * n * s * keys * (MEA_ROW_KEY_SECONDS + h * MEA_ROW_KEY_HEAD_SECONDS) + scoring
    threads = min(FLASH_ROWS, s)
    blocks = ceil_div(s, FLASH_ROWS) * b * n
    return blocks * keys * (FLASH_BLOCK_KEY_SECONDS + threads * FLASH_THREAD_KEY_SECONDS) + scoring


ATTENTION_STAGES = ("attention", "split_kv", "cutlass fmha (accumulator)", "kernel_mha multi-block epilogue")


def stage_seconds(p: GqaProblem, fp: Footprint, name: str) -> float:
    """Return the simulator seconds of one footprint stage (fixed cost included)."""
    b, s, n, nk, h = p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size
    rows, keys = b * n * s, key_rows(p)
    if name in ATTENTION_STAGES:
        return STAGE_SECONDS + attention_seconds(p, name)
    if name == "QK GEMM":
        return STAGE_SECONDS + stride_seconds(rows * keys, h)
    if name == "UnfusedSoftmaxKernel":
        return STAGE_SECONDS + stride_seconds(rows, 3 * keys, SOFTMAX_INNER_SECONDS)
    if name == "AV GEMM":
        return STAGE_SECONDS + stride_seconds(rows * h, keys)
    if name == "combine":
        splits = fp.buffer("softmax_lse_accumulator").elements // max(rows, 1)
        return STAGE_SECONDS + rows * splits * h * COPY_SECONDS
    stage = next(st for st in fp.stages if st.name == name)
    written = sum(fp.buffer(w).elements for w in stage.writes)
    appended = 2 * b * s * nk * h if name.endswith("(K, V)") or name == "Append_KV" else 0  # new K / V rows
    return STAGE_SECONDS + (written + appended) * COPY_SECONDS


def input_elements(p: GqaProblem) -> int:
    """Return the element count of the operator's inputs (the key lengths' stand-in included)."""
    b, s, n, nk, h = p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size
    c = p.present_capacity(CONCRETE)
    count = b * s * (n + 2 * nk) * h + 2 * b * nk * c * h + 2 * b
    if p.do_rotary:
        count += max(c, p.total_sequence_length) * h
    return count


def reference_bytes(p: GqaProblem) -> int:
    """Return the host bytes of the float64 reference and the present cache's check: the inputs
    twice over, one batch entry's keys and values repeated over the N heads, the output and the
    LSE twice."""
    b, s, n, h = p.batch_size, p.sequence_length, p.num_heads, p.head_size
    rows = p.present_capacity(CONCRETE) + s
    return 8 * (2 * input_elements(p) + 2 * n * rows * h + 2 * b * s * n * (h + 1))
