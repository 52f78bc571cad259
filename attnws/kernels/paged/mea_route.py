"""PagedAttention's MEA route (ORT 1.31.1, `docs/research/paged-workspace.md` §3.4): the dense
gather, then the backends' MEA kernel over it.

- `GatherAndExpandPagedKVCache` (`paging.gather_and_expand`), once for K and once for V: each
  sequence's L_b keys, expanded to the N query heads, into rows cu_kv[b] .. cu_kv[b + 1] - 1 of the
  `gathered_key` / `gathered_value` requests [Ktok, N, H] (element type);
- cutlass fmha (`backends.mea`) over Q [T, N, H] (the query input, packed by
  cumulative_sequence_length) and the gathered K / V (packed by cumulative_seqlens_kv), causal from
  the bottom right: new token i of a sequence of n_b sees its keys j <= L_b - n_b + i. With H > 128
  the running output accumulates in the float32 `mea_accumulator` request [T, N, H], every element
  written; the output [T, N * H].
"""

from __future__ import annotations

from functools import partial

from ...spec.paged.problem import PagedProblem
from ...spec.limits import MEA_ACCUMULATOR_MIN_V_HEAD
from ..backends import mea
from ..launching import Launch
from ..plans import Packing, softmax_scale
from ..workspace import Workspace
from .layouts import Prepared
from .paging import GatherPlan, gather_and_expand

GATHERED_KEY, GATHERED_VALUE, ACCUMULATOR = "gathered_key", "gathered_value", "mea_accumulator"


def gather_plans(p: PagedProblem, prepared: Prepared, ws: Workspace) -> tuple[GatherPlan, GatherPlan]:
    """Return the gathers of the key and the value cache, expanded to N heads."""
    c = prepared.cache
    return tuple(GatherPlan(ws.arrays[name], source, c, prepared.cu_kv, prepared.cu_q, prepared.past_seqlens,
                            p.batch_size, p.num_heads)
                 for name, source in ((GATHERED_KEY, c.key), (GATHERED_VALUE, c.value)))


def attention_plan(p: PagedProblem, prepared: Prepared, ws: Workspace) -> mea.MeaPlan:
    """Return the MEA kernel's plan over the gathered K / V (the accumulator exactly when H > 128)."""
    accumulator = ws.arrays.get(ACCUMULATOR)
    if (accumulator is not None) != (p.head_size > MEA_ACCUMULATOR_MIN_V_HEAD):
        raise ValueError(f"MEA's float32 accumulator is used exactly when H > {MEA_ACCUMULATOR_MIN_V_HEAD}: "
                         f"H={p.head_size}, accumulator carved: {accumulator is not None}")
    packing = Packing(prepared.cu_q, None, p.batch_size, p.max_query_len, p.num_heads, p.token_count)
    return mea.MeaPlan(prepared.query, ws.arrays[GATHERED_KEY], ws.arrays[GATHERED_VALUE], prepared.output, None,
                       accumulator, packing, p.head_size, p.head_size, softmax_scale(p.head_size),
                       key_packing=prepared.cu_kv, causal=True)


def launch_sequence(p: PagedProblem, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's kernels in order: the gather of K, of V, then the attention."""
    key, value = gather_plans(p, prepared, ws)
    return (Launch("GatherAndExpandPagedKVCache (K)", partial(gather_and_expand, key)),
            Launch("GatherAndExpandPagedKVCache (V)", partial(gather_and_expand, value)),
            Launch("cutlass fmha", partial(mea.launch, attention_plan(p, prepared, ws))))
