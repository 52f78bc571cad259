"""What MultiHeadAttention's kernels read and write: its footprint, stated from ONNX Runtime's kernels.

Independent of the recipes: nothing here imports `attnws.spec.mha.recipe`, `attnws.spec.recipe`
or `attnws.spec.layout`. The recipe says where each view is and how large the workspace is; this
module says, from the kernel sources, which buffers each route's kernels touch, how large each is,
at what alignment, in which stage, and what ORT documents reserving beyond them (the slack). The
kernel contract (`attnws.solver.contract`) and the validator (`attnws.kernels`) hold the one
against the other. Paths are under `onnxruntime/contrib_ops/cuda/bert/` of microsoft/onnxruntime;
each commit is the newest version read that holds in ONNX Runtime 1.31.1 (a fork commit; the
1.31.1 binary where noted), and `docs/ort-version.md` gives the evidence and the commit each fact
was first read at (008eeb96 for the first two files below).

Facts (restated, not copied):
- attention_prepare_qkv.cu @ 25a6fdcaab9901c6822aaec64bae9daf24d4fa68. `PrepareQkv` carves the
  workspace, when the route has a Q/K/V copy, as q at 0, k after B*N*S*H elements, v after
  B*N*L*H more, the scratch after B*N*L*Hv more; without a copy the scratch starts at 0. Per
  format (`PrepareQkv_MHA_*`):
  * separate Q/K/V, no cache: TRT cross attention writes Q [B,S,N,H] at q and packed KV
    [B,L,N,2,H] right after it (`LaunchAddBiasTransposeTrt`, cross); the fused runner writes
    packed [B,S,N,3,H] at q (same function, self); Flash / MEA / cuDNN write Q, K, V [B,S|L,N,H]
    with `LaunchAddBias` when there is a bias and read the inputs otherwise; unfused writes
    Q, K, V [B,N,S|L,H] with one `LaunchAddBiasTranspose` (format 0) per matrix.
  * separate Q/K/V with past or present: without past, K and V are written straight into
    present_key / present_value; with past they go to the workspace k / v first. Flash / MEA /
    cuDNN keep Q as the input unless there is a bias (`LaunchAddBias`, Q only); unfused writes
    Q too. Without a bias the copies are `LaunchTransQkv`, with one `LaunchAddBiasTranspose`.
  * key/value [B,N,L,H] (cross): K and V are read from the inputs; Q is written to q by every
    route but the fused ones without bias.
  * packed KV [B,L,N,2,H]: TRT cross reads the inputs; Flash / MEA / cuDNN unpack K, V to
    [B,L,N,H] at k (format 4); unfused transposes Q to q and unpacks K, V to [B,N,L,H] (format 5).
  * packed QKV [B,S,N,3,H]: Flash / MEA / cuDNN unpack Q, K, V at q (format 4); unfused likewise
    (format 5); the fused runner reads the input, or with a bias gets packed [T,N,3,H] at q
    (`AddBiasTransposePacked`).
- attention_impl.cu @ 1817f4a81072c49dea2984853edca412674d66fb (the 1.31.1 binary's UnfusedAttention
  passes data.q as temp_output and forms the GEMM strides in int):
  * `ConcatPastToPresent`: with past, past + new K (and V, with Hv) into present [B,N,T,*], then
    K and V are read from present; the workspace k / v are dead from then on.
  * `UnfusedAttention`: Q K^T [B,N,S,T] into the scratch, the K stride T*H (int); softmax into
    scratch2 = scratch + AlignSize(e*B*N*S*T); P V into `temp_output = data.q`: the context
    [B,N,S,Hv] is written over the Q region, while V (the workspace v when there is no past) and
    the probabilities are read; `LaunchTransCtx` then writes the output [B,S,N,Hv]. GEMM strides
    T*H, T*Hv, S*H, S*T, S*Hv and the batch B*N are int.
  * `FusedTrtSelfAttention`: the sequence offsets are written to the scratch on a cache miss;
    `FusedTrtCrossAttention`: q offsets at the scratch, kv offsets at scratch +
    GetSequenceOffsetSize(B, false) (B + 1 each, no mask); `GetSequenceOffsetSize(B, true)` =
    AlignSize(4*(2B+1)) is what `GetAttentionWorkspaceSize` reserves (twice for cross).
  * `EfficientAttention`: the float32 accumulator is the scratch iff need_workspace (Hv > 128 and
    not fp32); K and V have T rows. `FlashAttention`: reads Q, K, V (T keys); its softmax LSE is a
    separate allocation in multihead_attention.cc, not workspace.
- bert_padding.cu @ a2bd54bc8c59562428f6b09d3f64f9e735599cd4: `LaunchTrtSequenceOffset` writes
  B + 1 int32 offsets without a mask and 2B + 1 with one.
- attention_transpose.cu @ 8301eea3faab89dd453fa285fd7914858677a6f7: `LaunchTransQkv` and
  `LaunchTransCtx` move 4 halves (head % 4 == 0) or 2 (even) per access in fp16, 2 floats (even)
  in fp32, the head size being that of the one matrix moved; grid (S, B, matrices).
- add_bias_transpose.cu @ c34d9b07a010d872d17350b3d055cddba5807157: `LaunchAddBiasTranspose`
  (with v_head_size -1: this matrix's head size alone; formats 4 / 5: both), `LaunchAddBias` (both
  H and Hv) and `LaunchAddBiasTransposeTrt` (H, fp16 only) move 4 elements when the head sizes are
  multiples of 4, else 2 when even, else 1; grids (S or L, B, matrices).
- multihead_attention.cc @ 541d5daff6b39db7204fc4bb43c92df5b95f0a46 (also index id 7446068643):
  output [B,S,N*Hv]; present_key and present_value are both allocated [B,N,M,H] (M = T without a
  shared buffer), with H also for the values.
- flash_attention/flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03: `mha_fwd` rounds
  seqlen_q (S) and seqlen_k (here T) up to multiples of 128 in int. MEA's int32 round-ups of S and
  int64 batch strides, and the fused kernels' B and N on gridDim.y / z, are those the packed
  statement (`attnws.spec.footprint`) cites, with T keys. (At 1.31.1 the batch strides are int64
  only when K and V are BSNH; with BNSH K and V they are int32 products: `docs/ort-version.md`,
  "Readings that do not hold at 1.31.1", item 3.)

Modelled: the cumulated-sequence-length caches miss (the offsets are written); the [3B + 2]
key-start mask's query starts cover every query row (the MEA accumulator is written whole).
Combinations the cascade never selects (a TRT route for a format it does not serve) are stated
as for separate inputs, so that every route of a symbolic target has a footprint.
Units: `elements` in elements of `element_bytes` bytes; every *_bytes is bytes.
"""

from __future__ import annotations

from typing import Any

from ..domain import CONCRETE
from ..statement import (
    ATTENTION, FLOAT32_BYTES, MEA_ACCUMULATOR_ABOVE_V_HEAD, OUTPUT, SCRATCH_ALIGNMENT, Buffer, Footprint, Stage,
    present_when,
)
from ..limits import GRID_DIM_YZ_MAX, INT32_MAX, INT64_MAX
from ..problem import Backend
from .problem import MhaFormat, MhaProblem

PRESENT_KEY = "present_key"  # the operator's outputs 1 and 2, allocated by ORT, not workspace
PRESENT_VALUE = "present_value"
SOFTMAX_LSE = "softmax_lse"  # Flash's float32 LSE: its own GetScratchBuffer, not workspace
SEQUENCE_OFFSET_BYTES = 4  # int32 cumulative sequence offsets of the TRT kernels
FUSED_BSNH = (Backend.FLASH, Backend.MEA, Backend.CUDNN)  # PrepareQkv's "flash, MEA or cuDNN" branches
FLASH_BLOCK = 128  # flash_api.cc rounds seqlen_q and seqlen_k up to a multiple of 128 in int
MEA_QUERIES_PER_BLOCK = 64  # fmha_launch_template.h: ceil_div of S by 64 in int32
MEA_ALIGN_LSE = 32  # kernel_forward.h kAlignLSE: S rounded up to 32 in int32


def width_by(d: Any, *heads: Any) -> Any:
    """Elements per access of the bias producers (LaunchAddBiasTranspose, LaunchAddBias, the TRT
    producer): 4 when every head size is a multiple of 4, else 2 when every one is even, else 1."""
    return d.ite(d.all_(*(d.mod(x, 4) == 0 for x in heads)), 4,
                 lambda: d.ite(d.all_(*(d.mod(x, 2) == 0 for x in heads)), 2, 1))


def transpose_width(d: Any, element_size: int, head: Any) -> Any:
    """Elements per access of LaunchTransQkv / LaunchTransCtx for one matrix of head size `head`:
    fp16 4 (head % 4 == 0), 2 (even) or 1; fp32 2 (even) or 1."""
    if element_size == FLOAT32_BYTES:
        return d.ite(d.mod(head, 2) == 0, 2, 1)
    return width_by(d, head)


def sequence_offset_reserved(d: Any, batch: Any) -> Any:
    """GetSequenceOffsetSize(B, true): AlignSize(4 * (2B + 1)), what ORT reserves per offset region."""
    raw = d.mul(SEQUENCE_OFFSET_BYTES, d.add(d.mul(2, batch, what="2B"), 1, what="2B + 1"), what="offsets 4(2B+1)")
    return d.align_up(raw, SCRATCH_ALIGNMENT, what="reserved sequence offsets")


class _Plan:
    """The footprint under construction: buffers, stages, limits and slack, in one domain."""

    def __init__(self, d: Any, p: MhaProblem) -> None:
        self.d, self.p, self.es = d, p, p.element_size
        self.buffers: list[Buffer] = []
        self.stages: list[Stage] = []
        self.limits: list[tuple[str, Any, int]] = []
        self.slack: list[tuple[str, str, Any]] = []

    def buffer(self, name: str, elements: Any, width: Any, source: str, *, allocation: str = ATTENTION,
               placed_at: str | None = None, element_bytes: int | None = None) -> str:
        es = self.es if element_bytes is None else element_bytes
        align = self.d.mul(es, width, what=f"{name} access bytes")
        self.buffers.append(Buffer(name, allocation, placed_at or name, es, elements, align, source=source))
        return name

    def stage(self, name: str, reads: tuple[str, ...], writes: tuple[str, ...]) -> None:
        self.stages.append(Stage(name, tuple(r for r in reads if r), tuple(writes)))


def _elements(d: Any, p: MhaProblem) -> dict[str, Any]:
    b, n, s, l, h, hv = (p.batch_size, p.num_heads, p.sequence_length, p.kv_sequence_length, p.qk_head_size,
                         p.v_head_size)
    t = p.total_sequence_length
    return {
        "q": d.mul(b, n, s, h, what="Q elements B * N * S * H"),
        "k": d.mul(b, n, l, h, what="K elements B * N * L * H"),
        "v": d.mul(b, n, l, hv, what="V elements B * N * L * Hv"),
        "present_k": d.mul(b, n, t, h, what="present K elements B * N * T * H"),
        "present_v": d.mul(b, n, t, hv, what="present V elements written B * N * T * Hv"),
        "present_alloc": d.mul(b, n, t, h, what="present tensor elements B * N * T * H"),
    }


def _materialize(plan: _Plan, backend: Backend) -> tuple[str, str, str]:
    """Add PrepareQkv's copies (and their stages); return the buffers (or '' for an operator
    input) the attention reads as Q, K and V before any concatenation with the past."""
    d, p, es = plan.d, plan.p, plan.es
    fmt, h, hv, bias = p.qkv_format, p.qk_head_size, p.v_head_size, p.has_bias
    e = _elements(d, p)
    if backend is Backend.TRT:
        if fmt is MhaFormat.PACKED_QKV and not bias:  # the runner reads the packed input
            return "", "", ""
        width = width_by(d, h, hv) if fmt is MhaFormat.PACKED_QKV else width_by(d, h)
        source = ("AddBiasTransposePacked QKV_TN3H: [B * S, N, 3, H]" if fmt is MhaFormat.PACKED_QKV
                  else "LaunchAddBiasTransposeTrt (self): [B, S, N, 3, H]")
        plan.buffer("qkv_packed", d.mul(3, e["q"], what="packed QKV elements"), width, source)
        plan.stage("materialize_qkv", (), ("qkv_packed",))
        return "qkv_packed", "", ""
    if backend is Backend.TRT_CROSS:
        if fmt is MhaFormat.PACKED_KV:  # the kernel reads the query and packed KV inputs
            return "", "", ""
        plan.buffer("q", e["q"], width_by(d, h), "LaunchAddBiasTransposeTrt (cross): Q [B, S, N, H]")
        plan.buffer("kv_packed", d.mul(2, e["k"], what="packed KV elements"), width_by(d, h),
                    "LaunchAddBiasTransposeTrt (cross): KV [B, L, N, 2, H] after Q")
        plan.stage("materialize_q", (), ("q",))
        plan.stage("materialize_kv", (), ("kv_packed",))
        return "q", "kv_packed", ""
    fused = backend in FUSED_BSNH
    cache = p.has_past or p.has_present
    q = k = v = ""
    if fmt is MhaFormat.PACKED_QKV:
        form = "format 4: [B, S, N, H]" if fused else "format 5: [B, N, S, H]"
        q, k, v = (plan.buffer(name, e[name], width_by(d, h, hv), f"LaunchAddBiasTranspose {form} ({name})")
                   for name in ("q", "k", "v"))
    elif fmt is MhaFormat.PACKED_KV:
        if not fused:
            q = plan.buffer("q", e["q"], transpose_width(d, es, h), "Transpose_BSNH_to_BNSH: Q [B, N, S, H]")
        form = "format 4: [B, L, N, H]" if fused else "format 5: [B, N, L, H]"
        k, v = (plan.buffer(name, e[name], width_by(d, h, hv), f"LaunchAddBiasTranspose {form} ({name})")
                for name in ("k", "v"))
    elif fmt is MhaFormat.CROSS or (fmt is MhaFormat.SEPARATE and cache):
        if bias or not fused:
            width = (width_by(d, h) if bias else transpose_width(d, es, h))
            what = ("LaunchAddBias: Q [B, S, N, H]" if fused else
                    "LaunchAddBiasTranspose format 0: Q [B, N, S, H]" if bias else "LaunchTransQkv: Q [B, N, S, H]")
            q = plan.buffer("q", e["q"], width, what)
        if fmt is MhaFormat.SEPARATE:
            copies = {}
            for name, head, present, present_elements in (("k", h, PRESENT_KEY, e["present_k"]),
                                                          ("v", hv, PRESENT_VALUE, e["present_v"])):
                width = width_by(d, head) if bias else transpose_width(d, es, head)
                what = ("LaunchAddBiasTranspose format 0" if bias else "LaunchTransQkv") + f": {name} [B, N, L, *]"
                if p.has_past:
                    copies[name] = plan.buffer(name, e[name], width, what)
                else:  # written straight into the present output
                    copies[name] = plan.buffer(present, present_elements, width, what + " into present",
                                               allocation=present)
            k, v = copies["k"], copies["v"]
    elif bias or not fused:  # separate Q, K, V without a cache
        what = "LaunchAddBias: [B, S|L, N, H]" if fused else "LaunchAddBiasTranspose format 0: [B, N, S|L, H]"
        for name, head in (("q", h), ("k", h), ("v", hv)):
            width = width_by(d, h, hv) if fused else width_by(d, head)
            plan.buffer(name, e[name], width, f"{what} ({name})")
        q, k, v = "q", "k", "v"
    for name, dest in (("q", q), ("k", k), ("v", v)):
        if dest:
            plan.stage(f"materialize_{name}", (), (dest,))
    return q, k, v


def _present(plan: _Plan, k: str, v: str) -> tuple[str, str]:
    """Add the present outputs and the concatenation with the past; return what the attention
    reads as K and V from then on."""
    d, p = plan.d, plan.p
    if not p.has_present:
        return k, v
    e = _elements(d, p)
    if p.has_past:
        plan.buffer(PRESENT_KEY, e["present_k"], 1, "ConcatPastToPresent: past_key + K -> [B, N, T, H]",
                    allocation=PRESENT_KEY)
        plan.buffer(PRESENT_VALUE, e["present_v"], 1, "ConcatPastToPresent: past_value + V -> [B, N, T, Hv]",
                    allocation=PRESENT_VALUE)
        plan.stage("concat_past", (k, v), (PRESENT_KEY, PRESENT_VALUE))
    return PRESENT_KEY, PRESENT_VALUE


def _fused_limits(d: Any, p: MhaProblem, backend: Backend) -> list[tuple[str, Any, int]]:
    b, n, s, t = p.batch_size, p.num_heads, p.sequence_length, p.total_sequence_length
    limits = [("grid: B <= gridDim.y/z", b, GRID_DIM_YZ_MAX), ("grid: N <= gridDim.y/z", n, GRID_DIM_YZ_MAX)]
    if backend is Backend.FLASH:
        return limits + [
            ("seqlen_q S rounded up to 128 in int", d.add(s, FLASH_BLOCK - 1, what="S + 127"), INT32_MAX),
            ("seqlen_k T rounded up to 128 in int", d.add(t, FLASH_BLOCK - 1, what="T + 127"), INT32_MAX),
        ]
    limits += [
        ("S rounded up to 64 queries per block in int32", d.add(s, MEA_QUERIES_PER_BLOCK - 1, what="S + 63"),
         INT32_MAX),
        ("S rounded up to the LSE alignment 32 in int32", d.add(s, MEA_ALIGN_LSE - 1, what="S + 31"), INT32_MAX),
    ]
    # LaunchCutlassFmha: K and V in BNSH (cross attention, or the present cache) take int strides.
    bnsh = p.qkv_format is MhaFormat.CROSS or p.has_past or p.has_present
    width, limit = ("int", INT32_MAX) if bnsh else ("int64", INT64_MAX)
    limits += [
        (f"{width} Q batch stride N * H * S", d.mul(n, p.qk_head_size, s, what="N * H * S"), limit),
        (f"{width} K batch stride N * H * T", d.mul(n, p.qk_head_size, t, what="N * H * T"), limit),
        (f"{width} V batch stride N * Hv * T", d.mul(n, p.v_head_size, t, what="N * Hv * T"), limit),
    ]
    if bnsh:
        limits += [("int K head stride T * H", d.mul(t, p.qk_head_size, what="T * H"), INT32_MAX),
                   ("int V head stride T * Hv", d.mul(t, p.v_head_size, what="T * Hv"), INT32_MAX)]
    if p.has_attention_bias:
        extent = d.mul(d.ite(p.broadcast_attn_bias_dim_0, 1, b), d.ite(p.broadcast_attn_bias_dim_1, 1, n), s, t,
                       what="attention-bias extent")
        limits.append(("int64 attention-bias extent (B or 1) * (N or 1) * S * T", extent, INT64_MAX))
    return limits


def _unfused(plan: _Plan, q: str, k: str, v: str) -> None:
    d, p, es = plan.d, plan.p, plan.es
    b, n, s, t, h, hv = (p.batch_size, p.num_heads, p.sequence_length, p.total_sequence_length, p.qk_head_size,
                         p.v_head_size)
    matrix = d.mul(b, n, s, t, what="scores elements B * N * S * T")
    plan.buffer("scores", matrix, 1, "UnfusedAttention: Q K^T [B, N, S, T] into the scratch")
    plan.buffer("probabilities", matrix, 1, "UnfusedAttention: softmax into scratch + AlignSize(e * B * N * S * T)")
    plan.buffer("context", d.mul(b, n, s, hv, what="context elements B * N * S * Hv"), transpose_width(d, es, hv),
                "UnfusedAttention: temp_output = data.q, the context [B, N, S, Hv] over Q", placed_at="q")
    plan.stage("scores", (q, k), ("scores",))
    plan.stage("softmax", ("scores",), ("probabilities",))
    plan.stage("context", ("probabilities", v), ("context",))
    plan.stage("transpose", ("context",), (OUTPUT,))
    raw = d.mul(es, matrix, what="scratch bytes")
    padding = d.align_up(raw, SCRATCH_ALIGNMENT, what="scratch alignment") - raw
    plan.slack.append(("each unfused scratch region is rounded up to 256 bytes (AlignSize)", ATTENTION,
                       d.mul(2, padding, what="scratch padding")))
    plan.limits += [
        ("grid of LaunchTransCtx: B <= gridDim.y", b, GRID_DIM_YZ_MAX),
        ("int GEMM stride T * H", d.mul(t, h, what="T * H"), INT32_MAX),
        ("int GEMM stride T * Hv", d.mul(t, hv, what="T * Hv"), INT32_MAX),
        ("int GEMM stride S * H", d.mul(s, h, what="S * H"), INT32_MAX),
        ("int GEMM stride S * T", d.mul(s, t, what="S * T"), INT32_MAX),
        ("int GEMM stride S * Hv", d.mul(s, hv, what="S * Hv"), INT32_MAX),
        ("int GEMM batch count B * N", d.mul(b, n, what="B * N"), INT32_MAX),
        ("int softmax element index B * N * S * T", matrix, INT32_MAX),
    ]


def _offsets(plan: _Plan, backend: Backend) -> tuple[str, ...]:
    """Add the TRT kernels' sequence offsets (written on a cache miss) and their slack."""
    d, p, b = plan.d, plan.p, plan.p.batch_size
    reserved = sequence_offset_reserved(d, b)
    if backend is Backend.TRT:
        count = d.add(d.mul(2 if p.mask_rank else 1, b, what="offset count"), 1, what="offset count + 1")
        plan.buffer("sequence_offsets", count, 1, "LaunchTrtSequenceOffset: B + 1 int32 (2B + 1 with a mask)",
                    element_bytes=SEQUENCE_OFFSET_BYTES)
        written = (("sequence_offsets",), d.mul(SEQUENCE_OFFSET_BYTES, count, what="offset bytes"))
        slack = reserved - written[1]
        why = "the fused runner's offsets reserved as AlignSize(4 * (2B + 1)), fewer written"
    else:
        count = d.add(b, 1, what="B + 1")
        for name in ("q_sequence_offsets", "kv_sequence_offsets"):
            plan.buffer(name, count, 1, "FusedTrtCrossAttention: LaunchTrtSequenceOffset, B + 1 int32",
                        element_bytes=SEQUENCE_OFFSET_BYTES)
        written = (("q_sequence_offsets", "kv_sequence_offsets"),
                   d.mul(2, SEQUENCE_OFFSET_BYTES, count, what="offset bytes"))
        slack = d.mul(2, reserved, what="two reserved offset regions") - written[1]
        why = "cross attention reserves two AlignSize(4 * (2B + 1)) offset regions and writes B + 1 in each"
    plan.stage("sequence_offsets", (), written[0])
    plan.slack.append((why, ATTENTION, slack))
    return written[0]


def footprint(p: MhaProblem, backend: Backend, d: Any = CONCRETE, config: Any = None) -> Footprint:
    """Return what MultiHeadAttention's `backend` route touches for problem p (module docstring).

    The problem is taken as the builder validated it; the route is the one the cascade picked;
    the runtime configuration `config` does not change it."""
    plan = _Plan(d, p)
    es, b, s, n, hv = p.element_size, p.batch_size, p.sequence_length, p.num_heads, p.v_head_size
    q, k, v = _materialize(plan, backend)
    if any(st.name.startswith("materialize_") for st in plan.stages) and not (
            backend is Backend.TRT and p.qkv_format is MhaFormat.PACKED_QKV):
        plan.limits.append(("grid of the Q/K/V producers: B <= gridDim.y", b, GRID_DIM_YZ_MAX))
    k, v = _present(plan, k, v)
    workspace_qkv = [buf for buf in plan.buffers if buf.allocation == ATTENTION]
    direct = not workspace_qkv
    if not direct:
        e = _elements(d, p)
        reserved = d.mul(es, d.add(d.add(e["q"], e["k"], what="Q + K"), e["v"], what="Q + K + V"),
                         what="qkv bytes e * B * N * ((S + L) * H + L * Hv)")
        used: Any = 0
        for buf in workspace_qkv:
            used = d.add(used, buf.nbytes(d), what="written Q/K/V bytes")
        plan.slack.append(("GetAttentionWorkspaceSize reserves Q, K and V; the route writes only these", ATTENTION,
                           reserved - used))
    out_width = transpose_width(d, es, hv) if backend is Backend.UNFUSED else 1
    output = Buffer(OUTPUT, OUTPUT, OUTPUT, es, d.mul(b, s, n, hv, what="output elements B * S * N * Hv"),
                    d.mul(es, out_width, what="output access bytes"), source="output [B, S, N * Hv]")
    reads = tuple(x for x in (q, k, v) if x)
    if backend is Backend.UNFUSED:
        _unfused(plan, q, k, v)
    else:
        if backend in (Backend.TRT, Backend.TRT_CROSS):
            reads += _offsets(plan, backend)
        writes: tuple[str, ...] = (OUTPUT,)
        if backend is Backend.FLASH:
            plan.buffer(SOFTMAX_LSE, d.mul(b, n, s, what="LSE elements B * N * S"), 1,
                        "flash get_softmax_lse_size: float32 [B, N, S], a separate allocation",
                        allocation=SOFTMAX_LSE, element_bytes=FLOAT32_BYTES)
            writes = (SOFTMAX_LSE, OUTPUT)
        if backend is Backend.MEA and es != FLOAT32_BYTES:
            needed = hv > MEA_ACCUMULATOR_ABOVE_V_HEAD
            if needed is not False:
                accumulator = Buffer("mea_accumulator", ATTENTION, "mea_accumulator", FLOAT32_BYTES,
                                     d.mul(b, s, n, hv, what="accumulator elements B * S * N * Hv"), FLOAT32_BYTES,
                                     source="EfficientAttention: p.workspace = scratch, float32 [B, S, N, Hv]")
                plan.buffers.append(present_when(d, accumulator, needed))
                reads += ("mea_accumulator",)
                writes = ("mea_accumulator", OUTPUT)
        plan.stage("attention", reads, writes)
        if backend in (Backend.FLASH, Backend.MEA):
            plan.limits += _fused_limits(d, p, backend)
    plan.buffers.append(output)
    e = _elements(d, p)
    outputs: list[tuple[str, Any]] = [(OUTPUT, output.nbytes(d))]
    if p.has_present:
        tensor = d.mul(es, e["present_alloc"], what="present tensor bytes e * B * N * T * H")
        outputs += [(PRESENT_KEY, tensor), (PRESENT_VALUE, tensor)]
    if backend is Backend.FLASH:
        outputs.append((SOFTMAX_LSE, d.mul(FLOAT32_BYTES, b, n, s, what="LSE bytes")))
    return Footprint(p.op, backend, direct, tuple(plan.buffers), tuple(plan.stages), tuple(plan.limits),
                     tuple(plan.slack), tuple(outputs))


def reads_inputs_directly(p: MhaProblem, backend: Backend) -> bool:
    """Return whether the route has no Q/K/V copy in the workspace (its kernels consume the
    inputs, or the present outputs, as they are)."""
    return footprint(p, backend).reads_inputs_directly


__all__ = ["PRESENT_KEY", "PRESENT_VALUE", "SOFTMAX_LSE", "footprint",
           "reads_inputs_directly", "transpose_width", "width_by"]


def room_contract(d: Any, p: Any, r: Any, config: Any) -> None:
    """None: the recipe is held to this footprint's buffers by the shared statement contract
    (each buffer on its view, inside its allocation, aligned, apart from the buffers live with it;
    no allocation beyond the buffers plus ORT's documented slack)."""
    return None
