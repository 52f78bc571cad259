"""What the kernels of each PackedAttention and PackedMultiHeadAttention route read and write: the
footprint, stated from ONNX Runtime's kernels in the vocabulary of `attnws.spec.statement`.

This statement is independent of the recipes (`recipe.py`, `layout.py`): nothing here imports
them. It is read from the kernel sources of ONNX Runtime 1.31.1 (paths under
`onnxruntime/contrib_ops/cuda/bert/`; `docs/ort-version.md` says why each version read is the
1.31.1 one). The two impl files are read at fork commit d1857d12230dcf7c6e04b325b12e8cf95b121714
(2026-01-02, their last change before PR #32283 moved the launches onto the
`packed_attention_workspace` recipe; the recipe-era impl files are not stored). The 1.31.1 binary
has the same kernels with the same signatures, and its disassembly shows the launches stated here:
the attention launches take their offsets from the recipe (`packed_attention_workspace.h` @
12b36ce4c9a380cb4a0e68c405d785057fe16a28), the producers still place K and V at fixed offsets from
the workspace start, which equal the recipe's. First read at
0125678538f0e5be1bec712951ca99073e84a61b, where `AddBiasTransposePacked` was still named
`LaunchAddBiasTranspose`.
- `packed_attention_impl.cu`: `AddBiasTransposeQKVPacked` (unfused producer, padded B*S rows),
  `AddBiasTransposeQKVPackedCutlass` (MEA producer, T tokens), `AddBiasTransposeQKVPackedTRT`
  (interleaved [T, N, 3, H]), `AddBiasTransposePacked` (vector width 4 / 2 / 1),
  `UnfusedScaledDotProductAttention` (scores, softmax into the second scratch region, the context
  GEMM into `temp_output`, byte 0 of the workspace, which is where the recipe puts Q, i.e. over Q,
  then `TransposeRemovePadding`, which enforces 16-byte alignment of its input and output),
  `FusedScaledDotProductAttentionCutlass`.
- `packed_multihead_attention_impl.cu`: `FusedAttentionTrt` (packed QKV passed to the runner
  directly unless a workspace is needed), `FlashAttention` and `FusedAttentionCutlass` (separate
  Q, K, V read directly unless a workspace is needed; LSE / accumulator at the recipe's backend
  offset, after the T-token views), `UnfusedAttention` (as PA's). Not stated here: at 1.31.1 the
  unfused route is preceded by a token_offset validation kernel that writes a 4-byte flag in a
  separate scratch allocation (see `docs/ort-version.md`).
- `flash_attention/flash_api.cc` @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03 (`get_softmax_lse_size`:
  float32 [B, N, S]; N * (B * S - T) floats are never written. At 0125678538f0 they were the rows
  past each sequence's length; at 1.31.1 the varlen call writes the LSE unpadded, [N, T], so they
  are the tail) and `cutlass_fmha/memory_efficient_attention.h` @
  d1857d12230dcf7c6e04b325b12e8cf95b121714 (`need_workspace`: float32 accumulator iff Hv > 128
  and not fp32, rows of packed tokens only).

A footprint lists buffers (where each starts is the recipe's business: `placed_at` names the
recipe view whose offset it starts at; its extent, element type and alignment are the kernels'),
the stages of the launch sequence with what each reads and writes, the integer arguments the
kernels form, and the slack a recipe may add beyond the buffers (ORT's documented padding).
Every quantity is computed in a domain, so the kernels and the solver evaluate the same code.
Units: `elements` in elements of `element_bytes` bytes; every *_bytes is bytes.
"""

from __future__ import annotations

from typing import Any

from ..domain import CONCRETE
from ..limits import GRID_DIM_YZ_MAX, INT32_MAX, INT64_MAX
from ..problem import Backend, Op
from ..statement import (
    ATTENTION, FLOAT32_BYTES, MEA_ACCUMULATOR_ABOVE_V_HEAD, OUTPUT, PROJECTION, SCRATCH_ALIGNMENT, Buffer, Footprint,
    Stage, present_when,
)
from .problem import Problem, QkvFormat

TRANSPOSE_ALIGNMENT = 16  # TransposeRemovePadding: ORT_ENFORCE on 128-bit aligned input and output


def reads_inputs_directly(p: Problem, backend: Backend) -> bool:
    """Return whether the route's attention kernel consumes the operator inputs as they are.

    PA's inputs always go through the projection GEMM and a transpose. PMHA: the TRT runner
    consumes [T, N, 3, H], which is the packed input; Flash and MEA consume three [T, N, H]
    tensors, which are the separate inputs; a QKV bias needs a pass that adds it, so it is
    always materialized; the unfused GEMMs need padded [B, N, S, H].
    """
    if p.op is not Op.PMHA or p.has_bias or backend is Backend.UNFUSED:
        return False
    consumed = QkvFormat.PACKED if backend is Backend.TRT else QkvFormat.SEPARATE
    return p.qkv_format is consumed


def vector_width(d: Any, p: Problem) -> Any:
    """Return LaunchAddBiasTranspose's vector width: 4 when H and Hv are multiples of 4, else 2
    when both are even, else 1 (elements moved per access)."""
    return d.ite(
        d.all_(d.mod(p.qk_head_size, 4) == 0, d.mod(p.v_head_size, 4) == 0),
        4,
        lambda: d.ite(d.all_(d.mod(p.qk_head_size, 2) == 0, d.mod(p.v_head_size, 2) == 0), 2, 1),
    )


def _padded_rows(d: Any, p: Problem) -> Any:
    return d.mul(p.batch_size, p.sequence_length, what="padded rows B * S")


def _padding_tokens(d: Any, p: Problem) -> Any:
    """Return B * S - T: the padded positions that hold no token (T <= B * S for a valid problem)."""
    return _padded_rows(d, p) - p.token_count


def _qkv_buffers(d: Any, p: Problem, rows: Any, width: Any, source: str) -> list[Buffer]:
    es, n = p.element_size, p.num_heads
    align = d.mul(es, width, what="producer access bytes")
    qk = d.mul(rows, n, p.qk_head_size, what="Q / K elements")
    v = d.mul(rows, n, p.v_head_size, what="V elements")
    return [Buffer("q", ATTENTION, "q", es, qk, align, source=source),
            Buffer("k", ATTENTION, "k", es, qk, align, source=source),
            Buffer("v", ATTENTION, "v", es, v, align, source=source)]


def _materialize_stages(reads: tuple[str, ...], parts: tuple[str, ...]) -> list[Stage]:
    """ORT's producer is one launch, but each element it writes belongs to exactly one of Q, K, V:
    the statement splits it per destination so that a write is attributed to its buffer."""
    return [Stage(f"materialize_{part}", reads, (part,)) for part in parts]


def qkv_row(d: Any, p: Problem) -> Any:
    """Return 2H + Hv: the elements of one head's Q, K and V."""
    return d.add(d.add(p.qk_head_size, p.qk_head_size, what="2H"), p.v_head_size, what="2H + Hv")


def producer_limits(d: Any, p: Problem, rows: Any, per_head: Any, width: Any, what: str) -> list[tuple[str, Any, int]]:
    """The producer's int32 input offset: rows * N * per_head / w (in vectors of w elements)."""
    vectors = d.mul(rows, p.num_heads, d.div(per_head, width), what=f"{what} producer index")
    return [(f"{what} producer index rows * N * (per-head elements) / w", vectors, INT32_MAX)]


def footprint(p: Problem, backend: Backend, d: Any = CONCRETE, config: Any = None) -> Footprint:
    """Return what the route's kernels touch for problem p (see the module docstring).

    The problem is taken as the builder validated it; the route is the one dispatch picked; the
    runtime configuration `config` does not change it.
    """
    es, b, s, n, t = p.element_size, p.batch_size, p.sequence_length, p.num_heads, p.token_count
    h, hv = p.qk_head_size, p.v_head_size
    direct = reads_inputs_directly(p, backend)
    width = vector_width(d, p)
    buffers: list[Buffer] = []
    stages: list[Stage] = []
    limits: list[tuple[str, Any, int]] = []
    slack: list[tuple[str, str, Any]] = []
    upstream: tuple[str, ...] = ()
    if p.op is Op.PA:
        n_gemm = d.add(d.add(p.hidden_size, p.hidden_size, what="2 * hidden"), p.v_hidden_size, what="GEMM n")
        buffers.append(Buffer(PROJECTION, PROJECTION, PROJECTION, es, d.mul(t, n_gemm, what="projection elements"),
                              d.mul(es, width, what="producer access bytes"),
                              source="packed_attention.cc: GEMM output [T, 2 * hidden + v_hidden]"))
        stages.append(Stage("projection", (), (PROJECTION,)))
        limits.append(("projection GEMM n", n_gemm, INT32_MAX))
        upstream = (PROJECTION,)
    output = Buffer(OUTPUT, OUTPUT, OUTPUT, es, d.mul(t, n, hv, what="output elements"),
                    TRANSPOSE_ALIGNMENT if backend is Backend.UNFUSED else es, source="output [T, N * Hv]")
    if backend is Backend.UNFUSED:
        rows = _padded_rows(d, p)
        buffers += _qkv_buffers(d, p, rows, width, "AddBiasTransposeQKVPacked: [B, N, S, H] over B * S rows")
        stages += _materialize_stages(upstream, ("q", "k", "v"))
        matrix = d.mul(b, n, s, s, what="scores elements")
        buffers += [
            Buffer("scores", ATTENTION, "scores", es, matrix, es, source="scaled_qk [B, N, S, S]"),
            Buffer("probabilities", ATTENTION, "probabilities", es, matrix, es,
                   source="attention_score = scaled_qk + GetAttentionScratchSize / es"),
            Buffer("context", ATTENTION, "q", es, d.mul(b, n, s, hv, what="context elements"), TRANSPOSE_ALIGNMENT,
                   source="temp_output = qkv: the context [B, N, S, Hv] is written over Q"),
        ]
        stages += [Stage("scores", ("q", "k"), ("scores",)),
                   Stage("softmax", ("scores",), ("probabilities",)),
                   Stage("context", ("probabilities", "v"), ("context",)),
                   Stage("transpose", ("context",), (OUTPUT,))]
        raw = d.mul(es, matrix, what="scratch bytes")
        padding = d.align_up(raw, SCRATCH_ALIGNMENT, what="scratch alignment") - raw
        slack.append(("each unfused scratch region is rounded up to 256 bytes", ATTENTION,
                      d.mul(2, padding, what="scratch padding")))
        limits += [
            ("grid of the padded producer: B <= gridDim.y", b, GRID_DIM_YZ_MAX),
            *producer_limits(d, p, rows, qkv_row(d, p), width, "padded"),
            ("padded producer Q offset B * N * S * H / w", d.mul(b, n, s, d.div(h, width), what="Q offset"), INT32_MAX),
            ("padded producer V offset B * N * S * Hv / w", d.mul(b, n, s, d.div(hv, width), what="V offset"),
             INT32_MAX),
            ("GEMM stride S * S", d.mul(s, s, what="S * S"), INT32_MAX),
            ("GEMM stride S * H", d.mul(s, h, what="S * H"), INT32_MAX),
            ("GEMM stride S * Hv", d.mul(s, hv, what="S * Hv"), INT32_MAX),
            ("GEMM batch count B * N", d.mul(b, n, what="B * N"), INT32_MAX),
            ("softmax rows B * N * S", d.mul(b, n, s, what="B * N * S"), INT32_MAX),
        ]
    else:
        attention_reads: tuple[str, ...]
        if direct:
            attention_reads = ()
        elif backend is Backend.TRT:
            buffers.append(Buffer("qkv_interleaved", ATTENTION, "qkv_interleaved", es,
                                  d.mul(t, n, 3, h, what="interleaved elements"),
                                  d.mul(es, width, what="producer access bytes"),
                                  source="AddBiasTransposeQKVPackedTRT / QKV_TN3H: [T, N, 3, H]"))
            stages.append(Stage("materialize_qkv", upstream, ("qkv_interleaved",)))
            attention_reads = ("qkv_interleaved",)
            limits += producer_limits(d, p, t, d.mul(3, h, what="3H"), width, "interleaved")
        else:
            buffers += _qkv_buffers(d, p, t, width, "AddBiasTransposeQKVPackedCutlass / Q_K_V_TNH: [T, N, H]")
            stages += _materialize_stages(upstream, ("q", "k", "v"))
            attention_reads = ("q", "k", "v")
            limits += producer_limits(d, p, t, qkv_row(d, p), width, "token")
        if not direct:
            capacity_tokens = d.mul(_padding_tokens(d, p), n, qkv_row(d, p), what="unused capacity elements")
            slack.append(("ORT sizes the Q/K/V workspace for B * S tokens; the T-token views leave the rest unused",
                          ATTENTION, d.mul(es, capacity_tokens, what="unused capacity")))
        writes: tuple[str, ...] = (OUTPUT,)
        reads = attention_reads
        limits += attention_kernel_limits(d, p, backend)
        if backend is Backend.FLASH:
            buffers.append(Buffer("softmax_lse", ATTENTION, "softmax_lse", FLOAT32_BYTES,
                                  d.mul(b, n, s, what="LSE elements"), FLOAT32_BYTES,
                                  unwritten=d.mul(n, _padding_tokens(d, p), what="unwritten LSE rows"),
                                  source="flash_api.cc get_softmax_lse_size: float32 [B, N, S]"))
            writes = ("softmax_lse", OUTPUT)
        elif backend is Backend.MEA and es != FLOAT32_BYTES:
            accumulator = Buffer("mea_accumulator", ATTENTION, "mea_accumulator", FLOAT32_BYTES,
                                 d.mul(b, s, n, hv, what="accumulator elements"), FLOAT32_BYTES,
                                 unwritten=d.mul(_padding_tokens(d, p), n, hv, what="unwritten accumulator rows"),
                                 source="need_workspace: float32 [B, S, N, Hv] when Hv > 128")
            needed = hv > MEA_ACCUMULATOR_ABOVE_V_HEAD
            if needed is not False:
                buffers.append(present_when(d, accumulator, needed))
                writes = ("mea_accumulator", OUTPUT)
                reads = attention_reads + ("mea_accumulator",)  # accumulated in place
        stages.append(Stage("attention", reads, writes))
    buffers.append(output)
    return Footprint(p.op, backend, direct, tuple(buffers), tuple(stages), tuple(limits), tuple(slack))


FLASH_BLOCK_M = 128  # flash_api.cc rounds the sequence up to a multiple of 128 in int32
MEA_QUERIES_PER_BLOCK = 64  # fmha_launch_template.h: at most 64 queries per block, ceil_div in int32
MEA_ALIGN_LSE = 32  # kernel_forward.h kAlignLSE: the LSE length is rounded up to 32 in int32


def attention_kernel_limits(d: Any, p: Problem, backend: Backend) -> list[tuple[str, Any, int]]:
    """The fused kernels' grid extents and the integer expressions they form: Flash's and MEA's
    grid (B, N on gridDim.y / z), their int32 round-ups of S, MEA's int64 BSNH strides and the
    attention bias strides (CUTLASS keeps them in int64_t; at 1.31.1 they are also formed in 64 bits,
    since PR #32283, as the binary's LaunchCutlassFmha shows)."""
    b, s, n = p.batch_size, p.sequence_length, p.num_heads
    if backend is Backend.TRT:
        return []
    limits = [("grid: B <= gridDim.z", b, GRID_DIM_YZ_MAX), ("grid: N <= gridDim.y", n, GRID_DIM_YZ_MAX)]
    if backend is Backend.FLASH:
        return limits + [("S rounded up to 128 in int32", d.add(s, FLASH_BLOCK_M - 1, what="S + 127"), INT32_MAX)]
    limits += [
        ("S rounded up to 64 queries per block in int32", d.add(s, MEA_QUERIES_PER_BLOCK - 1, what="S + 63"),
         INT32_MAX),
        ("S rounded up to the LSE alignment 32 in int32", d.add(s, MEA_ALIGN_LSE - 1, what="S + 31"), INT32_MAX),
        ("int64 Q/K batch stride N * H * S", d.mul(n, p.qk_head_size, s, what="N * H * S"), INT64_MAX),
        ("int64 V batch stride N * Hv * S", d.mul(n, p.v_head_size, s, what="N * Hv * S"), INT64_MAX),
    ]
    if p.has_attention_bias:
        heads = 1 if p.broadcast_attn_bias_dim_1 else n
        batches = 1 if p.broadcast_attn_bias_dim_0 else b
        limits += [("int64 attention-bias extent (B or 1) * (N or 1) * S * S",
                    d.mul(batches, heads, s, s, what="attention-bias extent"), INT64_MAX)]
    return limits


def room_contract(d: Any, p: Any, r: Any, config: Any) -> None:
    """None: the recipe is held to this footprint's buffers by the shared statement contract
    (each buffer on its view, inside its allocation, aligned, apart from the buffers live with it;
    no allocation beyond the buffers plus ORT's documented slack)."""
    return None
