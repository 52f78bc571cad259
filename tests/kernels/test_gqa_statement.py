"""GroupQueryAttention's footprint statement (`attnws.spec.gqa.footprint.statement`) against what the kernels
here carve for themselves, and the shared placement of a buffer that starts inside its view or
spans several (`attnws.kernels.placement.place`).

The spec states XQA's scratch from ORT's launch (`footprint.xqa_carving`); the kernel carves its
region with its own layout (`backends.xqa.scratch_layout`), written from the kernel source. The
two must agree, or the bytes the statement allows the kernel to leave unwritten (the gap aligning
the partial outputs) are not the bytes the kernel skips.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from attnws.kernels.backends.xqa import scratch_layout, subsequences_per_sequence
from attnws.kernels.placement import place
from attnws.spec.domain import CONCRETE
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.recipe import complete
from attnws.spec.gqa.footprint import SEMAPHORES, XQA_SCRATCH, statement, xqa_carving
from attnws.spec.layout import View
from attnws.spec.options import RuntimeConfig
from attnws.spec.statement import ATTENTION, OUTPUT, Buffer, Footprint, Stage

from tests.kernels.gqa_shapes import gqa

# (B, N, Nk, H, C, SMs): one and several subsequences, groups 1..8, partials that need aligning
XQA_SHAPES = [(1, 8, 2, 64, 700, 8), (2, 4, 2, 64, 300, 8), (1, 4, 4, 128, 5000, 132), (3, 16, 2, 256, 1024, 108),
              (1, 8, 1, 64, 260, 108), (4, 32, 4, 128, 64, 58), (1, 2, 2, 64, 13825, 108)]


@pytest.mark.parametrize("b, n, nk, h, c, sms", XQA_SHAPES)
def test_the_spec_carves_xqa_scratch_as_the_kernel_does(b, n, nk, h, c, sms):
    p = gqa(b, 1, n, nk, h, c, past=c).workspace_problem(CONCRETE)
    spec = xqa_carving(CONCRETE, p, sms)
    per = subsequences_per_sequence(sms, b * nk, c)
    kernel = scratch_layout(b * nk, per, n // nk, h)
    assert (spec.per, spec.semaphores, spec.start) == (per, kernel.semaphores, kernel.row_max)
    if per > 1:
        assert spec.start + spec.records == kernel.records_end
        assert (spec.start + spec.partials, spec.start + spec.end) == (kernel.partials, kernel.end)


def test_the_xqa_scratch_buffer_leaves_exactly_the_alignment_gap_unwritten():
    p = gqa(1, 1, 16, 2, 64, 650, past=700)  # six 256-byte records, partials aligned to 2 G H = 1,024 bytes
    config = RuntimeConfig.make(sm=80, sm_count=8)
    route = select(p, config).route
    fp = statement(p, route, complete(p.workspace_problem(CONCRETE), route))
    scratch = fp.buffer(XQA_SCRATCH)
    kernel = scratch_layout(2, 3, 8, 64)
    assert (scratch.placed_at, scratch.through, scratch.start) == (SEMAPHORES, "output_accumulator", kernel.row_max)
    assert scratch.nbytes() == kernel.end - kernel.row_max
    assert scratch.unwritten_bytes() == kernel.partials - kernel.records_end > 0


@dataclass(frozen=True)
class TwoViews:
    """A recipe of two views in one allocation, in the shape `place` reads."""

    first: int
    second: int

    def views(self) -> list[View]:
        return [View("first", ATTENTION, 0, self.first), View("second", ATTENTION, self.first, self.second)]

    def allocations(self) -> list[tuple[str, int]]:
        return [(ATTENTION, self.first + self.second)]


def _footprint(*buffers: Buffer) -> Footprint:
    stage = Stage("kernel", (), tuple(b.name for b in buffers))
    return Footprint(None, None, False, buffers, (stage,), (), (), ((OUTPUT, 0),))


def test_a_buffer_inside_its_view_is_placed_from_its_start_with_the_room_left():
    inner = Buffer("inner", ATTENTION, "first", 4, 8, 4, start=64)
    placed = place(None, _footprint(inner), TwoViews(256, 128)).buffer("inner")
    assert (placed.offset, placed.reserved_bytes) == (64, 192)
    # the planted bug the start guards against: placed at the view's first byte it would overlap a
    # buffer the kernel keeps before it
    head = Buffer("head", ATTENTION, "first", 4, 16, 4)
    assert place(None, _footprint(head, inner), TwoViews(256, 128)).overlapping() == ()
    assert place(None, _footprint(head, replace(inner, start=0)), TwoViews(256, 128)).overlapping() == (("head", "inner"),)


def test_a_buffer_spanning_views_has_the_room_through_the_last():
    span = Buffer("span", ATTENTION, "first", 1, 300, 1, start=16, through="second")
    placed = place(None, _footprint(span), TwoViews(256, 128)).buffer("span")
    assert (placed.offset, placed.reserved_bytes, placed.padding_bytes) == (16, 368, 68)
