"""Planted faults the validator must catch: a recipe one element short, a kernel writing one byte
past a view or into the unfused alignment padding, a view carved at the wrong offset, a root one
element larger than the recipe."""

from __future__ import annotations

from dataclasses import replace

import pytest
from numba import cuda

from attnws.kernels import backends, validate, validate_shape, workspace
from attnws.kernels.allocator import GUARD_BYTES, Allocator
from attnws.spec import Backend, Op, QkvFormat, layout
from attnws.spec.hints import Geometry

from kernel_cases import SM80

TRT_FULL = Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=32, qkv_bias=True)  # T = B*S
# T < B*S: the views of the T-token routes end before the B*S capacity, leaving an unused tail.
SHORT_ROUTES = {
    "trt-qkv_interleaved": (Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=32, tokens=5, qkv_bias=True),
                            "trt", "qkv_interleaved", "untouched bytes"),
    "flash-softmax_lse": (Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=8, tokens=5, qkv_bias=True,
                                   pmha_format=QkvFormat.SEPARATE), "flash", "softmax_lse", "untouched bytes"),
    "unfused-probabilities": (Geometry(Op.PMHA, 4, batch=2, seq=4, heads=2, head_size=4, tokens=5), "unfused",
                              "probabilities", "guard bands"),
}

# The shifted view's last element is written by the kernel (the LSE only for valid rows: T = B*S).
SHIFTED_ROUTES = {
    "trt-qkv_interleaved": SHORT_ROUTES["trt-qkv_interleaved"][:3] + (2, "untouched bytes"),
    "flash-softmax_lse": (replace(SHORT_ROUTES["flash-softmax_lse"][0], tokens=8), "flash", "softmax_lse", 4,
                          "guard bands"),
    "unfused-probabilities": SHORT_ROUTES["unfused-probabilities"][:3] + (4, "guard bands"),
}


@cuda.jit
def poke(raw, index):
    raw[index] = 0


def test_recipe_one_element_short_is_caught(monkeypatch):
    real = validate.recipe

    def short(*args, **kwargs):
        r = real(*args, **kwargs)
        return replace(r, interleaved_qkv_bytes=r.interleaved_qkv_bytes - 2,
                       attention_workspace_bytes=r.attention_workspace_bytes - 2)

    monkeypatch.setattr(validate, "recipe", short)
    report = validate_shape(TRT_FULL, SM80)
    assert report.backend == "trt" and "guard bands" in report.failures, report.as_dict()


@pytest.mark.parametrize("geometry, backend, view, caught_by", SHORT_ROUTES.values(), ids=SHORT_ROUTES.keys())
def test_kernel_writing_one_byte_past_a_view_is_caught(monkeypatch, geometry, backend, view, caught_by):
    real = backends.RUNNERS[Backend(backend)]

    def overrun(p, r, inputs, ws, out):
        real(p, r, inputs, ws, out)
        end = next(v.end for v in layout.views(r) if v.name == view)
        poke[1, 1](ws.roots[layout.ATTENTION].raw, GUARD_BYTES + end)

    monkeypatch.setitem(backends.RUNNERS, Backend(backend), overrun)
    report = validate_shape(geometry, SM80, backend)
    assert caught_by in report.failures, report.as_dict()


@pytest.mark.parametrize("geometry, backend, view, shift, caught_by", SHIFTED_ROUTES.values(),
                         ids=SHIFTED_ROUTES.keys())
def test_view_at_the_wrong_offset_is_caught(monkeypatch, geometry, backend, view, shift, caught_by):
    real = workspace.views

    def shifted(r):
        return [replace(v, offset=v.offset + shift) if v.name == view else v for v in real(r)]

    monkeypatch.setattr(workspace, "views", shifted)
    report = validate_shape(geometry, SM80, backend)
    assert caught_by in report.failures, report.as_dict()


def test_write_into_the_padding_between_unfused_regions_is_caught(monkeypatch):
    geometry = Geometry(Op.PMHA, 4, batch=2, seq=3, heads=2, head_size=4, tokens=5)  # 144 of 256 bytes used
    real = backends.RUNNERS[Backend.UNFUSED]

    def into_padding(p, r, inputs, ws, out):
        real(p, r, inputs, ws, out)
        matrix = p.element_size * p.batch_size * p.num_heads * p.sequence_length ** 2
        poke[1, 1](ws.roots[layout.ATTENTION].raw, GUARD_BYTES + r.backend_workspace_offset_bytes + matrix)

    monkeypatch.setitem(backends.RUNNERS, Backend.UNFUSED, into_padding)
    report = validate_shape(geometry, SM80, "unfused")
    assert report.failures == ("untouched bytes",), report.as_dict()
    monkeypatch.undo()
    assert validate_shape(geometry, SM80, "unfused").passed


def test_root_one_element_larger_than_the_recipe_is_caught(monkeypatch):
    real = Allocator.root
    monkeypatch.setattr(Allocator, "root", lambda self, purpose, nbytes: real(self, purpose, nbytes + 2))
    report = validate_shape(TRT_FULL, SM80)
    assert report.failures == ("allocations",), report.as_dict()


def test_clean_twins_pass():
    """The same shapes without a planted fault pass, so each failure above is the fault's."""
    for geometry, backend, *_ in [*SHORT_ROUTES.values(), *SHIFTED_ROUTES.values()]:
        assert validate_shape(geometry, SM80, backend).passed
    assert validate_shape(TRT_FULL, SM80).passed
