"""MultiHeadAttention's layouts: where Q, K, V lie as the operator gives them, and the copies
(`strided_copy`) that move them into the layout the route reads: the materialization, with the
QKV bias (materialize_q / _k / _v, the TRT runner's interleaved materialize_qkv, the cross
attention's materialize_kv) and the concatenation of the past and the new K, V into present
(concat_past). Every view is a `strided_copy.Strided` [B, X, N, H].

The copies' layouts: Flash, MEA and cuDNN read BSNH, except K / V of a cache (BNSH, as present);
unfused reads BNSH; the TRT runner packed [B, S, N, 3, H], the cross attention Q as BSNH and
packed KV [B, L, N, 2, H].
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ...spec.statement import Footprint
from ...spec.mha.footprint import PRESENT_KEY, PRESENT_VALUE
from ...spec.mha.problem import MhaFormat, MhaProblem
from ...spec.problem import Backend
from .. import strided_copy
from ..launching import Launch
from ..strided_copy import CopyPlan, Strided, bnsh, bsnh
from ..workspace import Workspace
from .inputs import DeviceInputs

FUSED_BSNH = (Backend.FLASH, Backend.MEA, Backend.CUDNN)


class OperatorViews:
    """Where Q, K and V come from as the operator provides them (views [B, X, N, *])."""

    def __init__(self, p: MhaProblem, inputs: DeviceInputs) -> None:
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


class RouteLayouts:
    """One route's layouts over its carved buffers: the operator's views, the copies' views and
    the stages that fill them, as the footprint names them."""

    def __init__(self, p: MhaProblem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> None:
        self.p, self.fp, self.inputs, self.ws = p, fp, inputs, ws
        self.src = OperatorViews(p, inputs)
        self.bias = inputs.arrays.get("bias")
        self.names = {b.name for b in fp.buffers}
        fused = fp.backend in FUSED_BSNH
        cache = p.has_past or p.has_present
        self.q_bnsh = fp.backend is Backend.UNFUSED
        self.kv_bnsh = fp.backend is Backend.UNFUSED or (fused and cache)

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
        """Return the copy stage `stage` (materialize_q, _k, _v, _qkv or _kv), with the QKV bias."""
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
        """Return the stage copying past K, V and then the new ones into present [B, N, T, *]."""
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
