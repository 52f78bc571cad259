"""What PagedAttention's kernels touch in its scratch requests (ORT 1.31.1,
`docs/research/paged-workspace.md` §3-§4), written from the kernels' launches and indexing, not
from the recipe: each buffer by the request it lives in, its element type and its extent.

- `GetCumulativeSeqlensKV` writes B + 1 int32 prefix sums.
- The prologue (`QkNormRotaryTNH`, or the packed QKV unpack) writes Q as [T, N, H] (and K as
  [T, Nk, H] with rotary or QK-norm) in the query's 2-byte type.
- Flash's varlen forward writes the float32 LSE of each query row and head, [N, T]; split-KV
  decode writes per split an LSE row [s, B, N] and an output row of the kernel's head dimension
  rounded to 32, [s, B, N, round32(H)], then combines them.
- The dense gather (`GatherAndExpandPagedKVCache`) writes each sequence's keys and values, one
  row per key token and gathered head (Nk heads for Flash over a quantized cache, N for MEA),
  for every key token the lengths hold; MEA's float32 output accumulator is [T, N, H] when
  H > 128.
- `PagedDecodeSplitKV` writes, for every token, head and split (empty splits included: the
  reduction reads all s), an output row [H] and a row max and sum; `PagedDecodeReduce` reads them.
- XQA's kernel carves its scratch as its loader lays it out: the semaphores of B * Nk sequences
  (128-aligned), then per subsequence a 128-byte row max and row sum record and an accumulator of
  H * tile * 2 bytes, each part aligned as the loader rounds it; the page table expansion writes
  B * P int32 when the block size exceeds 128.

The sizes come from the concrete problem (the SM count and the lengths the kernels size with):
`attnws validate` measures what the Numba kernels touch against these statements.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..backends import flash as flash_backend
from ..domain import CONCRETE
from ..errors import InternalError
from ..options import RuntimeConfig
from ..problem import Backend, Op
from ..statement import FLOAT32_BYTES, Buffer, Footprint, Stage
from .problem import KvQuantization, PagedProblem

ELEMENT_BYTES = 2  # PagedAttention runs fp16 / bf16 only
INT32_BYTES = 4
FLASH_ROW_ROUNDING = 32  # the split kernel's accumulator rows: the head dimension rounded up to 32
MEA_ACCUMULATOR_ABOVE = 128
XQA_RECORD_BYTES = 128  # one row max (or row sum) record per subsequence
XQA_ALIGNMENT = 128
XQA_PAGE_TOKENS = 128
XQA_KEYS_PER_SUBSEQUENCE = 256
DECODE_KEYS_PER_SPLIT = 128
DECODE_MOST_SPLITS = 32
FLASH_SPLIT_LOWER_BOUND = 512  # the split-KV decode runs only above 512 keys (its lower bound)


def _buffer(name: str, element_bytes: int, elements: Any, source: str) -> Buffer:
    """A buffer filling its own request from byte 0."""
    return Buffer(name, name, name, element_bytes, elements, 1, source=source)


def _present(d: Any, cond: Any, elements: Any) -> Any:
    return d.ite(cond, elements, 0) if not isinstance(cond, bool) else (elements if cond else 0)


def key_rows(d: Any, p: PagedProblem, backend: Backend) -> Any:
    """The key rows the gather writes: every key token of the step, B sequences of at most L
    (the readback's sum where ORT reads the lengths back, else B times the length it sizes with)."""
    if p.has_metadata or backend is Backend.MEA or p.quantized:
        return d.mul(p.batch_size, p.max_kv_len, what="B * L key rows")
    return d.mul(p.batch_size, p.max_blocks_per_sequence, p.block_size, what="B * M * block_size key rows")


def decode_split_count(d: Any, p: PagedProblem, key_length: Any, sm_count: int) -> Any:
    """The paged decode kernel's grid depth (`ComputePagedDecodeSplits`, §4.2 of the research)."""
    rows = d.mul(p.token_count, p.num_heads, what="T * N")
    want = d.min_(d.div(2 * sm_count + rows - 1, rows), d.div(key_length + DECODE_KEYS_PER_SPLIT - 1,
                                                                 DECODE_KEYS_PER_SPLIT))
    return d.ite(rows >= 2 * sm_count, 1, d.max_(1, d.min_(DECODE_MOST_SPLITS, want)))


def common_buffers(d: Any, p: PagedProblem) -> list[Buffer]:
    q = d.mul(p.token_count, p.num_heads, p.head_size, what="Q rows")
    k = d.mul(p.token_count, p.kv_num_heads, p.head_size, what="K rows")
    prologue = (d.add(q, k, what="prologue Q and K") if p.do_rotary or p.use_qk_norm else q if p.is_packed_qkv else 0)
    return [_buffer("cumulative_seqlens_kv", INT32_BYTES, d.add(p.batch_size, 1, what="B + 1"), "GetCumulativeSeqlensKV"),
            _buffer("prologue", ELEMENT_BYTES, prologue, "QkNormRotaryTNH / the packed QKV unpack")]


def xqa_carving_end(d: Any, p: PagedProblem, sm_count: int) -> Any:
    """The last byte XQA's kernel touches in its scratch (semaphores, row records, accumulators)."""
    sequences = d.mul(p.batch_size, p.kv_num_heads, what="B * Nk")
    keys = d.mul(p.max_blocks_per_sequence, p.block_size, what="M * block_size")
    per_sequence = d.min_(d.max_(1, d.div(sm_count, sequences)),
                          d.div(keys + XQA_KEYS_PER_SUBSEQUENCE - 1, XQA_KEYS_PER_SUBSEQUENCE))
    subsequences = d.mul(sequences, per_sequence, what="XQA subsequences")
    group = d.div(p.num_heads, p.kv_num_heads)
    tile = d.ite(group <= 8, 8, lambda: d.ite(group <= 16, 16, 32))
    vector = d.mul(p.head_size, tile, 2, what="XQA accumulator vector")
    records = d.mul(XQA_RECORD_BYTES, subsequences, what="XQA records")
    row_sum_end = d.add(d.align_up(records, XQA_ALIGNMENT, what="XQA row max"), records, what="XQA row sum end")
    accumulator_start = d.align_up(row_sum_end, vector, what="XQA accumulators")
    scratch = d.add(accumulator_start, d.mul(vector, subsequences, what="XQA accumulators"), what="XQA scratch")
    return d.add(d.align_up(d.mul(4, sequences, what="XQA semaphores"), XQA_ALIGNMENT, what="XQA semaphores"), scratch,
                 what="XQA scratch end")


def route_buffers(d: Any, p: PagedProblem, backend: Backend, config: RuntimeConfig) -> list[Buffer]:
    t, n, h = p.token_count, p.num_heads, p.head_size
    sm_count = config.device.sm_count
    if backend is Backend.LATENT:
        return []
    if backend is Backend.FLASH:
        raise InternalError("Flash's split count is the recipe's business: use flash_buffers")
    if backend is Backend.MEA:
        rows = key_rows(d, p, backend)
        gathered = d.mul(rows, n, h, what="gathered rows")
        return [_buffer("gathered_key", ELEMENT_BYTES, gathered, "GatherAndExpandPagedKVCache (N heads)"),
                _buffer("gathered_value", ELEMENT_BYTES, gathered, "GatherAndExpandPagedKVCache (N heads)"),
                _buffer("mea_accumulator", FLOAT32_BYTES,
                        _present(d, h > MEA_ACCUMULATOR_ABOVE, d.mul(t, n, h, what="MEA accumulator")),
                        "the MEA kernel's float32 output accumulator")]
    if backend is Backend.PAGED_DECODE:
        key_length = p.max_kv_len if p.has_metadata else d.mul(p.max_blocks_per_sequence, p.block_size, what="M * bs")
        rows = d.mul(decode_split_count(d, p, key_length, sm_count), t, n, what="split rows")
        return [_buffer("decode_partial_out", FLOAT32_BYTES, d.mul(rows, h, what="partial outputs"), "PagedDecodeSplitKV"),
                _buffer("decode_partial_max", FLOAT32_BYTES, rows, "PagedDecodeSplitKV"),
                _buffer("decode_partial_sum", FLOAT32_BYTES, rows, "PagedDecodeSplitKV")]
    if backend is Backend.XQA:
        pages = d.mul(p.batch_size, p.max_blocks_per_sequence, d.div(p.block_size, XQA_PAGE_TOKENS), what="B * P")
        out = [_buffer("xqa_workspace", 1, xqa_carving_end(d, p, sm_count), "the XQA kernel's scratch carving"),
               _buffer("xqa_page_table", INT32_BYTES, _present(d, p.block_size > XQA_PAGE_TOKENS, pages),
                       "ExpandBlockTableToPages"),
               _buffer("xqa_head_sink", FLOAT32_BYTES, n if p.has_head_sink else 0, "PagedConvertHeadSinkToFloatKernel")]
        if p.k_quantization is KvQuantization.PER_CHANNEL:
            out += [_buffer("xqa_query", ELEMENT_BYTES, d.mul(t, n, h, what="folded Q"), "PagedFoldChannelScaleKernel"),
                    _buffer("xqa_k_scale_norm", FLOAT32_BYTES, 1, "PagedScaleNormalizerKernel")]
        return out
    raise InternalError(f"PagedAttention's {backend.value} route has no footprint statement")


def flash_buffers(d: Any, p: PagedProblem, splits: Any) -> list[Buffer]:
    """Flash's buffers at the split count the recipe launches (1: no accumulators)."""
    t, n, h = p.token_count, p.num_heads, p.head_size
    split_rows = _present(d, splits > 1, d.mul(splits, p.batch_size, n, what="split rows"))
    width = d.mul(d.div(h + FLASH_ROW_ROUNDING - 1, FLASH_ROW_ROUNDING), FLASH_ROW_ROUNDING, what="round32(H)")
    accumulator = replace(_buffer("out_accum", FLOAT32_BYTES, d.mul(split_rows, width, what="accumulator rows"),
                                  "the split-KV kernel (H columns of each row: the rest of round32(H) unwritten)"),
                          unwritten=d.mul(split_rows, width - h, what="unwritten columns"))
    out = [_buffer("softmax_lse", FLOAT32_BYTES, d.mul(t, n, what="LSE rows"), "the varlen forward kernel"),
           _buffer("softmax_lse_accum", FLOAT32_BYTES, split_rows, "the split-KV kernel"), accumulator]
    if p.quantized:
        gathered = d.mul(key_rows(d, p, Backend.FLASH), p.kv_num_heads, h, what="gathered rows")
        out += [_buffer("gathered_key", ELEMENT_BYTES, gathered, "GatherAndExpandPagedKVCache (Nk heads)"),
                _buffer("gathered_value", ELEMENT_BYTES, gathered, "GatherAndExpandPagedKVCache (Nk heads)")]
    return out


def statement(d: Any, p: PagedProblem, backend: Backend, config: RuntimeConfig, splits: Any = 1) -> Footprint:
    """The route's statement: its buffers and the stages that write and read them."""
    own = flash_buffers(d, p, splits) if backend is Backend.FLASH else route_buffers(d, p, backend, config)
    buffers = common_buffers(d, p) + own
    names = tuple(b.name for b in own)
    stages = (Stage("GetCumulativeSeqlensKV", (), ("cumulative_seqlens_kv",)),
              Stage("prologue", (), ("prologue",)),
              Stage(f"{backend.value} attention", ("cumulative_seqlens_kv", "prologue", *names), names))
    return Footprint(Op.PAGED, backend, False, tuple(buffers), stages, limits=(), slack=())


def flash_launch_splits(d: Any, p: PagedProblem, sm_count: int) -> Any:
    """The split count Flash's paged decode launches with (§3.2 and §4.1 of the research): the
    heuristic over (B, 1 query row, the key length, N, H) when the step is one token per sequence,
    without head sink or window, and the key lower bound (the metadata's, or the read-back
    length over a quantized cache) exceeds 512; else 1."""
    lengths_known = p.has_metadata or p.quantized
    key_length = p.max_kv_len if lengths_known else d.mul(p.max_blocks_per_sequence, p.block_size, what="M * bs")
    if not lengths_known or p.has_head_sink or p.local_window_size > 0:
        return 1
    gate = d.all_(p.token_count == p.batch_size, p.max_query_len == 1, p.max_kv_len > FLASH_SPLIT_LOWER_BOUND)
    rows = flash_backend.split_rows(d, p.batch_size, p.num_heads, 1)
    return d.ite(gate, lambda: flash_backend.split_count(d, rows, flash_backend.key_blocks(d, p.head_size, key_length),
                                                         sm_count, rows_step=p.num_heads), 1)


def footprint(p: PagedProblem, backend: Backend, d: Any = CONCRETE, config: Any = None) -> Footprint:
    """Return what the route's kernels touch for the concrete problem p under `config` (its SM
    count sizes the split routes and XQA)."""
    if config is None:
        raise InternalError("PagedAttention's footprint needs the runtime configuration (its SM count)")
    splits = flash_launch_splits(d, p, config.device.sm_count) if backend is Backend.FLASH else 1
    return statement(d, p, backend, config, splits)


def room_contract(d: Any, p: PagedProblem, r: Any, config: Any) -> list[tuple[str, Any]]:
    """The conditions under which the route's requests (r, a `recipe.PagedRecipe`) serve its
    kernels: every buffer has a request of its name at least as large, and no request exceeds
    its buffer (ORT documents no slack; each request holds one buffer)."""
    fp = footprint(p, r.backend, d, config)
    requests = dict(r.allocations())
    conds: list[tuple[str, Any]] = []
    for b in fp.buffers:
        size = requests.get(b.name)
        if size is None:
            conds.append((f"the recipe has a request for the {b.name} buffer", b.nbytes(d) == 0))
            continue
        conds.append((f"{b.name} lies inside its request", b.nbytes(d) <= size))
        conds.append((f"the {b.name} request is at most its buffer", size <= b.nbytes(d)))
    stated = {b.name for b in fp.buffers}
    conds += [(f"the {name} request holds a buffer the kernels touch", size == 0)
              for name, size in requests.items() if name not in stated]
    return conds


def reads_inputs_directly(p: PagedProblem, backend: Backend) -> bool:
    """Whether the route's attention kernel reads the operator inputs as they are: the paged cache
    and the query always (the prologue copies Q only with rotary, QK-norm or packed QKV)."""
    return False
