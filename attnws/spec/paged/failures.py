"""Where PagedAttention's routes fail at run time once ORT picked them (ORT 1.31.1,
`docs/research/paged-workspace.md` §2.2 item 13; the text is in the 1.31.1 binary): a head sink
on the memory-efficient route, which ORT selects without looking at the head sink and then
refuses. ORT's other run-time texts cannot be met by a step the builder accepts: "total_kv_tokens
is not positive" needs a key length of 0 (the builder asks L >= S >= 1), and the MLA kernel's
shared memory is the latent route's gate (`dispatch.no_route`). The 1.31.1 binary has no
PagedAttention text refusing is_causal = 0 on any route.
"""

from __future__ import annotations

from typing import Any

from ..gates import Failure
from ..options import RuntimeConfig
from ..problem import Backend

# The text ORT 1.31.1 returns; the binary stores it up to "(head_size=" and formats the rest.
HEAD_SINK_ON_MEA = ("PagedAttention: 'head_sink' is only supported by the FlashAttention and paged decode backends, "
                    "but the MemoryEfficientAttention backend was selected (head_size={h}")

KINDS = ("paged_head_sink_mea",)
# (kind, where, fails when, failing geometry fields, running ones, sm): a Llama-3-8B-shaped prefill
# step at block 16, where Flash's block rule fails for H = 128 and MEA takes the step.
EXAMPLES = (
    ("paged_head_sink_mea", "PagedAttention with a head sink, on MEA",
     "a step MEA takes (Flash passed over: its block rule, a disabled switch or the device) while the node has a "
     "head sink",
     {"batch": 1, "seq": 4, "tokens": 4, "kv_len": 16, "heads": 32, "kv_heads": 8, "head_size": 128,
      "block_size": 16, "max_blocks": 4, "head_sink": True},
     {"batch": 1, "seq": 4, "tokens": 4, "kv_len": 16, "heads": 32, "kv_heads": 8, "head_size": 128,
      "block_size": 16, "max_blocks": 4}, 80),
)
TRT_FORMS: tuple = ()  # PagedAttention has no TRT fused runner


def route_failures(d: Any, p: Any, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return the run-time errors the route can hit at problem p once dispatch picked it: a head
    sink on MEA."""
    if backend is not Backend.MEA or not p.has_head_sink:
        return []
    return [Failure("paged_head_sink_mea", True, lambda: HEAD_SINK_ON_MEA.format(h=p.head_size))]
