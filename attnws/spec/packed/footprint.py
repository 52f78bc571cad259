"""What the kernels of each route read and write: the footprint, stated from ONNX Runtime's kernels.

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
- `attention_kernel_options.cc` @ 7942fa7ad20394574ccb3687d02b05c8853d2d9a as the 1.31.1 binary
  decodes it (`docs/research/ort-1.31.1-pin.md` §9): which backends the provider option and the
  environment let launch.

A footprint lists buffers (where each starts is the recipe's business: `placed_at` names the
recipe view whose offset it starts at; its extent, element type and alignment are the kernels'),
the stages of the launch sequence with what each reads and writes, the integer arguments the
kernels form, and the slack a recipe may add beyond the buffers (ORT's documented padding).
Every quantity is computed in a domain, so the kernels and the solver evaluate the same code.
MultiHeadAttention has its own statement (`attnws.spec.mha.footprint`), with the same classes:
`footprint` and `reads_inputs_directly` delegate to it; `may_launch` knows its cuDNN and TRT cross
attention switches.
Units: `elements` in elements of `element_bytes` bytes; every *_bytes is bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .domain import CONCRETE
from .limits import GRID_DIM_YZ_MAX, INT32_MAX, INT64_MAX
from .problem import Backend, Op, Problem, QkvFormat

FLOAT32_BYTES = 4  # the Flash LSE and the MEA accumulator are float32 whatever the element type
MEA_ACCUMULATOR_ABOVE_V_HEAD = 128  # MemoryEfficientAttentionParams::need_workspace: Hv > 128
TRANSPOSE_ALIGNMENT = 16  # TransposeRemovePadding: ORT_ENFORCE on 128-bit aligned input and output
SCRATCH_ALIGNMENT = 256  # each unfused scratch region is align256 (1.31.1: the recipe; before: GetAttentionScratchSize)

PROJECTION = "projection"  # the names of the allocations, as in layout.py's Recipe.allocations
ATTENTION = "attention"
OUTPUT = "output"  # the operator's output tensor [T, N * Hv]: not workspace, but written by the kernels
WORKSPACE_ALLOCATIONS = (PROJECTION, ATTENTION)  # the recipe's allocations; every other one is ORT's own


@dataclass(frozen=True)
class Buffer:
    """One buffer a route's kernels touch.

    `allocation`: projection, attention or output. `placed_at`: the recipe view whose offset the
    buffer starts at (the output starts at 0 of its own tensor). `unwritten` elements of the
    extent are legitimately never written by the writer (rows of padding tokens).
    """

    name: str
    allocation: str
    placed_at: str
    element_bytes: int
    elements: Any
    alignment: int
    unwritten: Any = 0
    source: str = ""

    def nbytes(self, d: Any = CONCRETE) -> Any:
        """Return the extent in bytes."""
        return d.mul(self.element_bytes, self.elements, what=f"footprint of {self.name}")

    def unwritten_bytes(self, d: Any = CONCRETE) -> Any:
        """Return the bytes of the extent the writer never writes."""
        return d.mul(self.element_bytes, self.unwritten, what=f"unwritten part of {self.name}")


@dataclass(frozen=True)
class Stage:
    """One step of the launch sequence: the buffers it reads and the buffers it writes."""

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]


@dataclass(frozen=True)
class Footprint:
    """Everything a route's kernels touch (see the module docstring).

    `limits` are (what, value, limit): each integer argument or grid extent a kernel forms and the
    largest it may be. `slack` are (why, allocation, bytes): what ORT's workspace size function
    documents reserving beyond the buffers. `outputs` are (allocation, bytes) of the allocations
    outside the recipe's workspace that ORT makes and the kernels write (the operator's output
    tensors, separate scratch buffers), as ORT sizes them; empty: the output tensor alone, sized
    as its buffer (PA, PMHA).
    """

    op: Op
    backend: Backend
    reads_inputs_directly: bool
    buffers: tuple[Buffer, ...]
    stages: tuple[Stage, ...]
    limits: tuple[tuple[str, Any, int], ...]
    slack: tuple[tuple[str, str, Any], ...]
    outputs: tuple[tuple[str, Any], ...] = ()

    def buffer(self, name: str) -> Buffer:
        """Return the buffer called name (KeyError if the route has none)."""
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def workspace_buffers(self) -> tuple[Buffer, ...]:
        """Return the buffers inside the recipe's workspace allocations (not the outputs)."""
        return tuple(b for b in self.buffers if b.allocation in WORKSPACE_ALLOCATIONS)

    def side_buffers(self) -> tuple[Buffer, ...]:
        """Return the buffers outside the recipe's workspace: the outputs and separate allocations."""
        return tuple(b for b in self.buffers if b.allocation not in WORKSPACE_ALLOCATIONS)

    def live_interval(self, name: str) -> tuple[int, int]:
        """Return (first, last) stage index touching the buffer: it holds data in between."""
        touching = [i for i, s in enumerate(self.stages) if name in s.reads or name in s.writes]
        return touching[0], touching[-1]

    def live_together(self, a: str, b: str) -> bool:
        """Return whether two buffers hold data during a common stage (they must not overlap)."""
        (a0, a1), (b0, b1) = self.live_interval(a), self.live_interval(b)
        return a0 <= b1 and b0 <= a1

    def live_in(self, index: int) -> tuple[str, ...]:
        """Return the buffers written before stage `index` and read at or after it: their bytes
        must survive until that stage runs; every other byte may be re-poisoned before it."""
        return tuple(b.name for b in self.buffers
                     if any(b.name in s.writes for s in self.stages[:index])
                     and any(b.name in s.reads for s in self.stages[index:]))


def reads_inputs_directly(p: Problem, backend: Backend) -> bool:
    """Return whether the route's attention kernel consumes the operator inputs as they are
    (MultiHeadAttention: `attnws.spec.mha.footprint`).

    PA's inputs always go through the projection GEMM and a transpose. PMHA: the TRT runner
    consumes [T, N, 3, H], which is the packed input; Flash and MEA consume three [T, N, H]
    tensors, which are the separate inputs; a QKV bias needs a pass that adds it, so it is
    always materialized; the unfused GEMMs need padded [B, N, S, H].
    """
    if p.op is Op.MHA:
        from .mha.footprint import mha_reads_inputs_directly

        return mha_reads_inputs_directly(p, backend)
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


def footprint(p: Problem, backend: Backend, d: Any = CONCRETE) -> Footprint:
    """Return what the route's kernels touch for problem p (see the module docstring).

    The problem is taken as the builder validated it; the route is the one dispatch picked. A
    MultiHeadAttention problem gets its own family's statement (`attnws.spec.mha.footprint`).
    """
    if p.op is Op.MHA:
        from .mha.footprint import mha_footprint

        return mha_footprint(p, backend, d)
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


def present_when(d: Any, buffer: Buffer, present: Any) -> Buffer:
    """Return the buffer with its presence (a bool, or a term in the solver) folded into its
    extent: 0 elements where it is absent."""
    return Buffer(buffer.name, buffer.allocation, buffer.placed_at, buffer.element_bytes,
                  d.ite(present, buffer.elements, 0), buffer.alignment, d.ite(present, buffer.unwritten, 0),
                  buffer.source)


def footprint_bytes(d: Any, fp: Footprint, allocation: str) -> Any:
    """Return the bytes of an allocation's buffers, counting a buffer placed over another's start
    (the unfused context over Q) once, as the larger of the two."""
    starts: dict[str, Any] = {}
    for buf in fp.buffers:
        if buf.allocation == allocation:
            size = buf.nbytes(d)
            starts[buf.placed_at] = d.max_(starts[buf.placed_at], size) if buf.placed_at in starts else size
    total: Any = 0
    for size in starts.values():
        total = d.add(total, size, what=f"footprint of {allocation}")
    return total


def slack_bytes(d: Any, fp: Footprint, allocation: str) -> Any:
    """Return the documented bytes a recipe may reserve in the allocation beyond its buffers."""
    total: Any = 0
    for _, where, nbytes in fp.slack:
        if where == allocation:
            total = d.add(total, nbytes, what=f"slack of {allocation}")
    return total


# attention_kernel_options.cc: the provider option `sdpa_kernel` bits (AttentionBackend in
# attention_common.h), the variables that disable a backend when it is 0 and the one that enables
# cuDNN (off by default); a backend not compiled in never launches.
LAUNCH_BITS = {Backend.FLASH: 1, Backend.MEA: 2, Backend.TRT: 4, Backend.CUDNN: 8, Backend.TRT_CROSS: 64}
DISABLING_VARIABLES = {Backend.FLASH: "ORT_DISABLE_FLASH_ATTENTION",
                       Backend.MEA: "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION",
                       Backend.TRT: "ORT_DISABLE_FUSED_ATTENTION",
                       Backend.TRT_CROSS: "ORT_DISABLE_FUSED_CROSS_ATTENTION"}
ENABLING_VARIABLES = {Backend.CUDNN: "ORT_ENABLE_CUDNN_FLASH_ATTENTION"}
TRUTHY = ("1", "true", "True")


def may_launch(backend: Backend, op: Op, sdpa_kernel: int, env: Mapping[str, str], built: Mapping[Backend, bool]) -> bool:
    """Return whether ORT may launch the backend's kernel at all under the provider option, the
    environment and the build, read from the raw settings. PA never consults the MEA switches
    (only the build); the unfused GEMMs always may; cuDNN (MultiHeadAttention) only when enabled
    by its bit or its variable."""
    if backend is Backend.UNFUSED:
        return True
    if not built.get(backend, True):
        return False
    if op is Op.PA and backend is Backend.MEA:
        return True
    if sdpa_kernel > 0:
        return bool(sdpa_kernel & LAUNCH_BITS[backend])
    if backend in ENABLING_VARIABLES:
        return env.get(ENABLING_VARIABLES[backend], "0") in TRUTHY
    return env.get(DISABLING_VARIABLES[backend], "0") not in TRUTHY


__all__ = [
    "ATTENTION", "Buffer", "Footprint", "OUTPUT", "PROJECTION", "Stage", "WORKSPACE_ALLOCATIONS", "footprint",
    "footprint_bytes", "may_launch", "present_when", "reads_inputs_directly", "slack_bytes", "vector_width",
]
