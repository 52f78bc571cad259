"""The kernel contract: the recipe serves the footprint its kernels are stated to touch.

`attnws.spec.footprint` states, from ONNX Runtime's kernel sources and independently of the
recipes, every buffer a route's kernels read or write, when each holds data, the integer
arguments the kernels form and the slack ORT documents reserving. `kernel_conditions` places
each buffer at the offset of the recipe view it starts at and returns what must hold for the
recipe to serve it. It is domain-generic: the `kernel_contract` theorem evaluates it over the
symbolic recipe of every shape of a target, the replay over the concrete one.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from attnws.spec.statement import ATTENTION, PROJECTION, footprint_bytes, slack_bytes
from attnws.spec.footprint import footprint, may_launch, room_contract
from attnws.spec.layout import Recipe, views
from attnws.spec.problem import Backend
from attnws.spec.target import Target


def launch_permitted(target: Target, backend: Backend) -> bool:
    """Return whether ORT may launch the backend under the target's raw provider option,
    environment and build (read by `footprint.may_launch`, not by the spec's options)."""
    config = target.config
    built = {Backend.FLASH: config.build.flash, Backend.MEA: config.build.mea, Backend.TRT: config.build.trt,
             Backend.TRT_CROSS: config.build.trt}
    return may_launch(backend, target.op, config.options.sdpa_kernel, dict(target.env), built)


def kernel_conditions(d: Any, p: Any, r: Recipe, target: Target) -> list[tuple[str, Any]]:
    """Return (claim in words, condition) pairs that must hold for recipe r to serve the route's
    footprint at problem p: each buffer has a view to start at, lies inside its allocation and is
    aligned; buffers holding data at the same stage do not overlap; every buffer outside the
    workspace lies inside the tensor ORT allocates for it (where the footprint states that size:
    MultiHeadAttention's outputs); no allocation exceeds its buffers plus ORT's documented slack;
    every kernel argument fits; the backend may launch."""
    launch = [(f"{r.backend.value} may launch under the provider option, environment and build",
               launch_permitted(target, r.backend))]
    rooms = room_contract(d, p, r, target.config)
    if rooms is not None:
        return launch + rooms
    fp = footprint(p, r.backend, d, target.config)
    sizes = {PROJECTION: r.projection_bytes, ATTENTION: r.attention_workspace_bytes}
    offsets = {v.name: v.offset for v in views(r)}
    conds: list[tuple[str, Any]] = [
        *launch,
        ("the recipe reads the operator inputs directly exactly when the kernels can",
         r.no_qkv_workspace == fp.reads_inputs_directly),
    ]
    placed = []
    for buf in fp.workspace_buffers():
        if buf.placed_at not in offsets:
            conds.append((f"the recipe has a view for the {buf.name} buffer", False))
            continue
        start, size = offsets[buf.placed_at], buf.nbytes(d)
        placed.append((buf, start, size))
        conds.append((f"{buf.name} lies inside the {buf.allocation} allocation", start + size <= sizes[buf.allocation]))
        conds.append((f"{buf.name} starts on a {buf.alignment}-byte boundary", d.mod(start, buf.alignment) == 0))
    for (a, a_start, a_size), (b, b_start, b_size) in combinations(placed, 2):
        if a.allocation == b.allocation and fp.live_together(a.name, b.name):
            conds.append((f"{a.name} and {b.name} do not overlap while both hold data",
                          d.any_(a_size == 0, b_size == 0, a_start + a_size <= b_start, b_start + b_size <= a_start)))
    tensors = dict(fp.outputs)  # MultiHeadAttention: the output tensors ORT allocates (present_* too)
    for buf in fp.side_buffers():
        if buf.allocation in tensors:
            conds.append((f"{buf.name} lies inside the {buf.allocation} tensor ORT allocates",
                          buf.nbytes(d) <= tensors[buf.allocation]))
    for allocation, size in sizes.items():
        allowed = footprint_bytes(d, fp, allocation) + slack_bytes(d, fp, allocation)
        conds.append((f"the {allocation} allocation is at most its buffers plus ORT's documented slack",
                      size <= allowed))
    conds += [(f"{what} <= {limit}", value <= limit) for what, value, limit in fp.limits]
    return conds
