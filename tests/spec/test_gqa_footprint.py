"""GroupQueryAttention's kernel footprint (`attnws.spec.gqa.footprint`), stated from ORT's kernel
sources (`docs/research/gqa-footprint.md`), on the cases that note works by hand: the Flash
accumulators' row strides, MEA's expanded K/V, staging, and the contract against the recipes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnws.spec.domain import CONCRETE as D
from attnws.spec.gqa.footprint import combine_block_rows, contract, flash_touches, kernel_head_dim, row_stride
from attnws.spec.gqa.problem import GqaWorkspaceProblem
from attnws.spec.gqa.recipe import Route, complete
from attnws.spec.problem import Backend


@pytest.mark.parametrize("head, head_dim, kvcache, plain", [
    (64, 64, 64, 64), (96, 96, 96, 96), (128, 128, 128, 128), (160, 192, 160, 160), (192, 192, 192, 192),
    (224, 256, 256, 224), (256, 256, 256, 256)])
def test_head_dims_and_row_strides(head, head_dim, kvcache, plain):
    assert kernel_head_dim(head) == head_dim
    assert (row_stride(head, True), row_stride(head, False)) == (kvcache, plain)


def _out_accum(p, splits, kvcache=True):
    return next(t for t in flash_touches(D, p, splits, kvcache) if t.region == "output_accumulator").nbytes


def test_the_note_s_worked_examples_for_h_160():
    """H = 160: the combine reads 896 B past 2 splits of B 1, N 8, S 1; the split kernel writes
    8,064 B past 2 splits of S 64 (docs/research/gqa-footprint.md §1.6)."""
    assert combine_block_rows(192) == 8
    decode = GqaWorkspaceProblem(2, 2, 1, 1, 8, 8, 160, 4096)
    assert _out_accum(decode, 2) - 4 * 2 * 8 * 160 == 896
    chunk = GqaWorkspaceProblem(2, 2, 1, 64, 1, 1, 160, 4096)
    assert _out_accum(chunk, 2) - 4 * 2 * 64 * 160 == 8064


def test_matching_strides_stay_inside_the_accumulator():
    for head in (64, 96, 128, 256):
        p = GqaWorkspaceProblem(2, 2, 2, 3, 8, 2, head, 4096)
        region = 4 * 5 * 2 * 8 * 3 * (-(-head // 32) * 32)
        assert _out_accum(p, 5) == 4 * ((5 * 2 * 8 * 3 - 1) * (-(-head // 32) * 32) + head) <= region


def _violations(p, route):
    run = complete(p, route)
    return [t.writer for t, fits in contract(p, run, route) if not fits]


def test_every_route_fits_for_common_heads():
    p = GqaWorkspaceProblem(2, 2, 2, 3, 8, 2, 128, 512, do_rotary=True)
    for route in (Route(Backend.FLASH, total_sequence_length=512), Route(Backend.MEA),
                  Route(Backend.UNFUSED, total_sequence_length=300)):
        assert _violations(p, route) == []
    decode = GqaWorkspaceProblem(2, 2, 1, 1, 8, 2, 128, 4096)
    assert _violations(decode, Route(Backend.XQA)) == []
    assert _violations(decode, Route(Backend.FLASH, total_sequence_length=4000, fast_decode=True)) == []
    windowed = GqaWorkspaceProblem(2, 2, 1, 4, 8, 2, 64, 256, is_windowed_kv_cache=True)
    assert _violations(windowed, Route(Backend.FLASH, total_sequence_length=1000)) == []


def test_flash_accumulators_overflow_for_h_160_and_224():
    for head in (160, 224):
        p = GqaWorkspaceProblem(2, 2, 1, 1, 8, 8, head, 16384)
        assert _violations(p, Route(Backend.FLASH, total_sequence_length=16384, fast_decode=True)) == [
            "flash_fwd_splitkv and combine"]


def test_a_preparation_buffer_reaching_the_backend_root_breaks_the_contract(monkeypatch):
    """The rooms run over the whole allocation: the preparation's last region ends where the
    backend's first non-empty region starts, not at the allocation's end. Planted: the Q scratch
    one byte longer than the way to the backend root (which a room per region list let through)."""
    from attnws.spec.gqa import footprint

    p = GqaWorkspaceProblem(2, 2, 1, 1, 8, 2, 128, 512, do_rotary=True)
    route = Route(Backend.FLASH, total_sequence_length=512)
    run = complete(p, route)
    rooms = footprint.region_rooms(D, run)
    scratch = rooms["qkv_preprocess"]
    assert scratch.nbytes > 0 and scratch.end == run.backend_offset_bytes < run.total_workspace_bytes
    assert _violations(p, route) == []
    planted = footprint.preparation_touches

    def overlong(d, p, backend, fast_decode, prep):
        return [replace(t, nbytes=scratch.end - scratch.start + 1) if t.region == "qkv_preprocess" else t
                for t in planted(d, p, backend, fast_decode, prep)]

    monkeypatch.setattr(footprint, "preparation_touches", overlong)
    assert _violations(p, route) == ["UnpackRoPEAppend (Q)"]
