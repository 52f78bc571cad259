"""MultiHeadAttention on the validator: seeded inputs, the float64 reference and each route's stages.

Inputs (ORT's names and shapes): query [B, S, N*H] (packed QKV: [B, S, N, 3, H]), key [B, L, N*H]
(cross: [B, N, L, H]; packed KV: [B, L, N, 2, H]), value [B, L, N*Hv] (cross: [B, N, L, Hv]), the
[2D + Dv] bias, the key padding mask ([B] key lengths in [1, T]; [3B + 2] those, then the query
starts b*S and key starts b*T; [B, T] and [B, S, T] of 0/1 with every row seeing some key), the
attention bias [B|1, N|1, S, T], past_key and past_value [B, N, P, H]. Values uniform in [-1, 1),
biases in [-0.5, 0.5), rounded to the element type once on the host.

The stages follow the footprint (`attnws.spec.mha.footprint`) name for name; each is a launch
(or a few) of `strided_copy` (every copy, transpose, concatenation and the unfused context
transpose), `mha_attention` (the sequence offsets, the fused and cross attention), the TRT runner
kernel (`trt_fused`) on the offsets it is given, and the unfused GEMMs and softmax.

Semantics the reference shares with the kernels: query row i of batch b sees key j < T (T = P + L)
unless the mask hides it or (unidirectional) j > P + i; a row seeing no key outputs 0. The TRT
runner with a [B] mask takes each sequence's padding as a sequence of its own (its 2B + 1
offsets): padding rows see only padding keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping

import numpy as np

from ..spec.statement import OUTPUT
from ..spec.footprint import Footprint
from ..spec.mha.footprint import PRESENT_KEY, PRESENT_VALUE, SOFTMAX_LSE
from ..spec.mha.problem import MhaFormat, MhaProblem
from ..spec.problem import Backend
from . import mha_attention, strided_copy, trt_fused, unfused_context, unfused_scores, unfused_softmax
from .allocator import Allocator
from .backends import Launch
from .inputs import DTYPES, HostInputs
from .plans import Packing
from .strided_copy import CopyPlan, Strided, bnsh, bsnh
from .workspace import Workspace

FUSED_BSNH = (Backend.FLASH, Backend.MEA, Backend.CUDNN)
MASK_KINDS = {0: unfused_softmax.MASK_NONE, 1: unfused_softmax.MASK_KEY_LENGTHS,
              2: unfused_softmax.MASK_KEY_PADDING, 3: unfused_softmax.MASK_ATTENTION}


def rows(p: MhaProblem) -> int:
    """Return B * S: the output rows [B * S, N * Hv]."""
    return p.batch_size * p.sequence_length


def scale(p: MhaProblem) -> float:
    """Return 1 / sqrt(H) (ORT's default scale)."""
    return 1.0 / math.sqrt(p.qk_head_size)


def make_inputs(p: MhaProblem, seed: int = 0) -> HostInputs:
    """Return seeded host inputs (module docstring); `lengths` are the key lengths of a rank-1 mask."""
    rng = np.random.default_rng(seed)
    dtype = DTYPES[p.element_size]
    b, s, l, n, h, hv, t = (p.batch_size, p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size,
                            p.v_head_size, p.total_sequence_length)

    def uniform(shape: tuple[int, ...], half_width: float = 1.0) -> np.ndarray:
        return rng.uniform(-half_width, half_width, size=shape).astype(dtype)

    arrays: dict[str, np.ndarray] = {}
    fmt = p.qkv_format
    if fmt is MhaFormat.PACKED_QKV:
        arrays["query"] = uniform((b, s, n, 3, h))
    else:
        arrays["query"] = uniform((b, s, n * h))
        if fmt is MhaFormat.PACKED_KV:
            arrays["key"] = uniform((b, l, n, 2, h))
        elif fmt is MhaFormat.CROSS:
            arrays["key"], arrays["value"] = uniform((b, n, l, h)), uniform((b, n, l, hv))
        else:
            arrays["key"], arrays["value"] = uniform((b, l, n * h)), uniform((b, l, n * hv))
    if p.has_bias:
        arrays["bias"] = uniform((2 * n * h + n * hv,), 0.5)
    lengths: tuple[int, ...] = ()
    if p.mask_rank == 1:
        key_lengths = rng.integers(1, t + 1, size=b).astype(np.int32) if t else np.zeros(b, np.int32)
        lengths = tuple(int(x) for x in key_lengths)
        mask = key_lengths
        if p.mask_is_start:
            mask = np.concatenate([key_lengths, np.arange(b + 1) * s, np.arange(b + 1) * t]).astype(np.int32)
        arrays["key_padding_mask"] = mask
    elif p.mask_rank in (2, 3):
        shape = (b, t) if p.mask_rank == 2 else (b, s, t)
        mask = (rng.random(shape) < 0.7).astype(np.int32)
        if t:
            first = rng.integers(0, t, size=shape[:-1])
            np.put_along_axis(mask, first[..., None], 1, axis=-1)
        arrays["key_padding_mask"] = mask
    if p.has_attention_bias:
        arrays["attention_bias"] = uniform((1 if p.broadcast_attn_bias_dim_0 else b,
                                            1 if p.broadcast_attn_bias_dim_1 else n, s, t), 0.5)
    if p.has_past:
        arrays["past_key"] = uniform((b, n, p.past_sequence_length, h))
        arrays["past_value"] = uniform((b, n, p.past_sequence_length, h))
    return HostInputs(arrays, lengths)


@dataclass(frozen=True)
class MhaDeviceInputs:
    """Flat device copies of the inputs by ORT name."""

    arrays: Mapping[str, Any]


def upload(allocator: Allocator, host: HostInputs) -> MhaDeviceInputs:
    """Copy every input to the device through the allocator (purpose "input:<name>")."""
    return MhaDeviceInputs({name: allocator.upload(f"input:{name}", np.ascontiguousarray(a).reshape(-1))
                            for name, a in host.arrays.items()})


def _host_qkv(p: MhaProblem, host: HostInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return float64 Q [B, S, N, H], K [B, T, N, H], V [B, T, N, Hv] (bias added, past first)."""
    a = {name: x.astype(np.float64) for name, x in host.arrays.items()}
    b, s, l, n, h, hv = p.batch_size, p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size, \
        p.v_head_size
    fmt = p.qkv_format
    if fmt is MhaFormat.PACKED_QKV:
        q, k, v = (a["query"][:, :, :, i, :] for i in range(3))
    else:
        q = a["query"].reshape(b, s, n, h)
        if fmt is MhaFormat.PACKED_KV:
            k, v = a["key"][:, :, :, 0, :], a["key"][:, :, :, 1, :]
        elif fmt is MhaFormat.CROSS:
            k, v = a["key"].transpose(0, 2, 1, 3), a["value"].transpose(0, 2, 1, 3)
        else:
            k, v = a["key"].reshape(b, l, n, h), a["value"].reshape(b, l, n, hv)
    if p.has_bias:
        bias = a["bias"]
        q = q + bias[:n * h].reshape(n, h)
        if fmt is not MhaFormat.CROSS:  # ORT adds no bias to key and value given as [B, N, L, H]
            k = k + bias[n * h:2 * n * h].reshape(n, h)
            v = v + bias[2 * n * h:].reshape(n, hv)
    if p.has_past:
        k = np.concatenate([a["past_key"].transpose(0, 2, 1, 3), k], axis=1)
        v = np.concatenate([a["past_value"].transpose(0, 2, 1, 3), v], axis=1)
    return q, k, v


def seen_keys(p: MhaProblem, host: HostInputs, backend: Backend) -> np.ndarray:
    """Return the boolean [B, S, T] of the keys each query row sees (module docstring)."""
    b, s, t, past = p.batch_size, p.sequence_length, p.total_sequence_length, p.past_sequence_length
    seen = np.ones((b, s, t), dtype=bool)
    keys = np.arange(t)[None, None, :]
    queries = np.arange(s)[None, :, None]
    mask = host.arrays.get("key_padding_mask")
    if p.mask_rank == 1:
        lengths = np.asarray(host.lengths)[:, None, None]
        if backend is Backend.TRT:
            seen = np.where(queries < lengths, keys < lengths, (keys >= lengths) & (keys < s))
        else:
            seen &= keys < lengths
    elif p.mask_rank == 2:
        seen &= mask[:, None, :] != 0
    elif p.mask_rank == 3:
        seen &= mask != 0
    if p.is_unidirectional:
        seen &= keys <= past + queries
    return seen


def reference_output(p: MhaProblem, host: HostInputs, chosen: np.ndarray, backend: Backend) -> np.ndarray:
    """Return the float64 output rows [len(chosen), N * Hv] of the given sorted row indexes (b * S + s)."""
    q, k, v = _host_qkv(p, host)
    s, n, hv = p.sequence_length, p.num_heads, p.v_head_size
    seen = seen_keys(p, host, backend)
    bias = host.arrays.get("attention_bias")
    out = np.zeros((len(chosen), n, hv))
    for row_index, row in enumerate(chosen):
        b, i = divmod(int(row), s)
        scores = np.einsum("nh,tnh->nt", q[b, i], k[b]) * scale(p)
        if bias is not None:
            scores = scores + bias[0 if p.broadcast_attn_bias_dim_0 else b, :, i, :].astype(np.float64)
        visible = seen[b, i]
        if not visible.any():
            continue
        scores = np.where(visible[None, :], scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        out[row_index] = np.einsum("nt,tnh->nh", weights, v[b])
    return out.reshape(len(chosen), -1)


def checked_rows(p: MhaProblem, limit: int | None, seed: int = 0) -> np.ndarray:
    """Return the sorted output rows the reference checks: all B * S, or a seeded sample of `limit`."""
    total = rows(p)
    if limit is None or total <= limit:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, size=limit, replace=False))


class _Sources:
    """Where Q, K and V come from as the operator provides them (views [B, X, N, *])."""

    def __init__(self, p: MhaProblem, inputs: MhaDeviceInputs) -> None:
        a, fmt = inputs.arrays, p.qkv_format
        s, l, n, h, hv = p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size, p.v_head_size
        if fmt is MhaFormat.PACKED_QKV:
            self.q, self.k, self.v = (bsnh(a["query"], s, n, h, base=i * h, matrices=3) for i in range(3))
            return
        self.q = bsnh(a["query"], s, n, h)
        if fmt is MhaFormat.PACKED_KV:
            self.k, self.v = (bsnh(a["key"], l, n, h, base=i * h, matrices=2) for i in range(2))
        elif fmt is MhaFormat.CROSS:
            self.k, self.v = bnsh(a["key"], l, n, h), bnsh(a["value"], l, n, hv)
        else:
            self.k, self.v = bsnh(a["key"], l, n, h), bsnh(a["value"], l, n, hv)


class _Stages:
    """Builds the route's launches stage by stage, as the footprint names them."""

    def __init__(self, p: MhaProblem, fp: Footprint, inputs: MhaDeviceInputs, ws: Workspace) -> None:
        self.p, self.fp, self.inputs, self.ws = p, fp, inputs, ws
        self.src = _Sources(p, inputs)
        self.bias = inputs.arrays.get("bias")
        names = {b.name for b in fp.buffers}
        self.fused = fp.backend in FUSED_BSNH
        self.cache = p.has_past or p.has_present
        # The copies' layouts: fused BSNH, except K / V of a cache (BNSH, as present); unfused BNSH.
        self.q_bnsh = fp.backend is Backend.UNFUSED
        self.kv_bnsh = fp.backend is Backend.UNFUSED or (self.fused and self.cache)
        self.names = names

    def _rows(self, part: str) -> int:
        return self.p.sequence_length if part == "q" else self.p.kv_sequence_length

    def _head(self, part: str) -> int:
        return self.p.v_head_size if part == "v" else self.p.qk_head_size

    def copy_view(self, part: str, array: Any) -> Strided:
        """The view of a Q / K / V copy (workspace or present) in the route's layout."""
        p, rows, head = self.p, self._rows(part), self._head(part)
        if (self.q_bnsh if part == "q" else self.kv_bnsh):
            return bnsh(array, rows, p.num_heads, head)
        return bsnh(array, rows, p.num_heads, head)

    def materialize(self, stage: str) -> Launch:
        p, a = self.p, self.ws.arrays
        n, h = p.num_heads, p.qk_head_size
        bias_base = {"q": 0, "k": n * h, "v": 2 * n * h}
        if stage == "materialize_qkv":  # TRT: [B, S, N, 3, H]
            plans = [CopyPlan(getattr(self.src, part), bsnh(a["qkv_packed"], p.sequence_length, n, h, i * h, 3),
                              p.batch_size, p.sequence_length, n, h, self.bias, bias_base[part])
                     for i, part in enumerate("qkv")]
            return Launch(stage, partial(strided_copy.launch_all, plans))
        if stage == "materialize_kv":  # TRT cross: [B, L, N, 2, H]
            plans = [CopyPlan(getattr(self.src, part), bsnh(a["kv_packed"], p.kv_sequence_length, n, h, i * h, 2),
                              p.batch_size, p.kv_sequence_length, n, h, self.bias, bias_base[part])
                     for i, part in enumerate("kv")]
            return Launch(stage, partial(strided_copy.launch_all, plans))
        part = stage.removeprefix("materialize_")
        written = next(s.writes[0] for s in self.fp.stages if s.name == stage)
        if self.fp.backend is Backend.TRT_CROSS:
            destination = bsnh(a[written], p.sequence_length, n, h)
        else:
            destination = self.copy_view(part, a[written])
        plan = CopyPlan(getattr(self.src, part), destination, p.batch_size, self._rows(part), n, self._head(part),
                        self.bias, bias_base[part])
        return Launch(stage, partial(strided_copy.launch, plan))

    def concat_past(self) -> Launch:
        p, a, inputs = self.p, self.ws.arrays, self.inputs.arrays
        b, n, past, l, t = p.batch_size, p.num_heads, p.past_sequence_length, p.kv_sequence_length, \
            p.total_sequence_length
        plans = []
        for present, past_name, part in ((PRESENT_KEY, "past_key", "k"), (PRESENT_VALUE, "past_value", "v")):
            head = self._head(part)
            plans.append(CopyPlan(bnsh(inputs[past_name], past, n, head), bnsh(a[present], t, n, head, 0, t),
                                  b, past, n, head))
            plans.append(CopyPlan(self.copy_view(part, a[part]), bnsh(a[present], l, n, head, past, t), b, l, n, head))
        return Launch("concat_past", partial(strided_copy.launch_all, plans))

    def attention_views(self) -> tuple[Strided, Strided, Strided]:
        """Q, K, V as the attention reads them (BSNH input or copy, BNSH copy or present)."""
        p, a = self.p, self.ws.arrays
        n, t = p.num_heads, p.total_sequence_length
        q = self.copy_view("q", a["q"]) if "q" in self.names else self.src.q
        if p.has_present:
            k = bnsh(a[PRESENT_KEY], t, n, p.qk_head_size)
            v = bnsh(a[PRESENT_VALUE], t, n, p.v_head_size)
        elif "k" in self.names:
            k, v = self.copy_view("k", a["k"]), self.copy_view("v", a["v"])
        else:
            k, v = self.src.k, self.src.v
        return q, k, v

    def offsets(self) -> Launch:
        p, a = self.p, self.ws.arrays
        if self.fp.backend is Backend.TRT:
            lengths = self.inputs.arrays.get("key_padding_mask") if p.mask_rank == 1 else None
            plans = [mha_attention.OffsetsPlan(a["sequence_offsets"], p.batch_size, p.sequence_length, lengths)]
        else:
            plans = [mha_attention.OffsetsPlan(a["q_sequence_offsets"], p.batch_size, p.sequence_length),
                     mha_attention.OffsetsPlan(a["kv_sequence_offsets"], p.batch_size, p.kv_sequence_length)]
        return Launch("sequence_offsets", partial(mha_attention.launch_offsets, plans))

    def attention(self) -> Launch:
        p, a, backend = self.p, self.ws.arrays, self.fp.backend
        b, s, n, h = p.batch_size, p.sequence_length, p.num_heads, p.qk_head_size
        out = a[OUTPUT]
        if backend is Backend.TRT:
            qkv = a["qkv_packed"] if "qkv_packed" in self.names else self.inputs.arrays["query"]
            sequences = 2 * b if p.mask_rank else b
            packing = Packing(a["sequence_offsets"], None, sequences, s, n, b * s)
            plan = trt_fused.TrtPlan(qkv, out, packing, h, scale(p))
            return Launch("attention", partial(trt_fused.launch, plan))
        if backend is Backend.TRT_CROSS:
            q = a["q"] if "q" in self.names else self.inputs.arrays["query"]
            kv = a["kv_packed"] if "kv_packed" in self.names else self.inputs.arrays["key"]
            cross = mha_attention.TrtCrossPlan(q, kv, out, a["q_sequence_offsets"], a["kv_sequence_offsets"], b, s,
                                               n, h, scale(p))
            return Launch("attention", partial(mha_attention.launch_cross, cross))
        q, k, v = self.attention_views()
        mask = self.inputs.arrays.get("key_padding_mask")
        fused = mha_attention.MhaAttentionPlan(
            q, k, v, out, b, s, p.total_sequence_length, n, h, p.v_head_size, scale(p),
            bias=self.inputs.arrays.get("attention_bias"), bias_broadcast_batch=bool(p.broadcast_attn_bias_dim_0),
            bias_broadcast_heads=bool(p.broadcast_attn_bias_dim_1), key_lengths=mask if p.mask_rank == 1 else None,
            causal=p.is_unidirectional, past=p.past_sequence_length, lse=a.get(SOFTMAX_LSE),
            accumulator=a.get("mea_accumulator"))
        return Launch("attention", partial(mha_attention.launch, fused))

    def unfused(self) -> list[Launch]:
        p, a = self.p, self.ws.arrays
        b, s, n, t, hv = p.batch_size, p.sequence_length, p.num_heads, p.total_sequence_length, p.v_head_size
        q, k, v = self.attention_views()
        mask = self.inputs.arrays.get("key_padding_mask")
        softmax = unfused_softmax.KeySoftmaxPlan(
            a["scores"], a["probabilities"], b, n, s, t, self.inputs.arrays.get("attention_bias"),
            bool(p.broadcast_attn_bias_dim_0), bool(p.broadcast_attn_bias_dim_1), mask, MASK_KINDS[p.mask_rank],
            p.is_unidirectional, p.past_sequence_length)
        transpose = CopyPlan(bnsh(a["context"], s, n, hv), bsnh(a[OUTPUT], s, n, hv), b, s, n, hv)
        return [
            Launch("scores", partial(unfused_scores.launch, unfused_scores.ScoresPlan(
                q.array, k.array, a["scores"], b * n, s, p.qk_head_size, scale(p), t))),
            Launch("softmax", partial(unfused_softmax.launch_keys, softmax)),
            Launch("context", partial(unfused_context.launch, unfused_context.ContextPlan(
                a["probabilities"], v.array, a["context"], b * n, s, hv, t))),
            Launch("transpose", partial(strided_copy.launch, transpose)),
        ]


def launch_sequence(p: MhaProblem, fp: Footprint, inputs: MhaDeviceInputs, ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's stages in the footprint's order (module docstring)."""
    build = _Stages(p, fp, inputs, ws)
    launches: list[Launch] = []
    for stage in fp.stages:
        if stage.name.startswith("materialize_"):
            launches.append(build.materialize(stage.name))
        elif stage.name == "concat_past":
            launches.append(build.concat_past())
        elif stage.name == "sequence_offsets":
            launches.append(build.offsets())
        elif stage.name == "attention":
            launches.append(build.attention())
        elif stage.name == "scores":
            launches += build.unfused()
    return tuple(launches)
