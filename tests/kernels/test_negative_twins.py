"""Structural faults the validator must catch on every kind of root: a kernel writing one element past
the last buffer of the workspace (into unused capacity or the guard band), and a backend whose
stages are not the footprint's (our bug: InternalError). The planted faults of the issue, with
their kill rate, are in tests/quality/test_kernel_faults.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
from numba import cuda

from attnws.kernels import validate_shape
from attnws.kernels.launching import Launch
from attnws.kernels.packed import routes
from attnws.spec import Backend, InternalError, Op, QkvFormat
from attnws.spec.hints import Geometry

from kernel_cases import SM80

# T < B*S: the views of the T-token routes end before the B*S capacity, leaving an unused tail.
LAST_BUFFER = {
    "trt-qkv_interleaved": (Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=32, tokens=5, qkv_bias=True),
                            "trt", "qkv_interleaved", ("stray writes",)),
    "flash-softmax_lse": (Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=8, tokens=5, qkv_bias=True,
                                   pmha_format=QkvFormat.SEPARATE), "flash", "softmax_lse",
                          ("stray writes",)),
    "unfused-probabilities": (Geometry(Op.PMHA, 4, batch=2, seq=4, heads=2, head_size=4, tokens=5), "unfused",
                              "probabilities", ("guard bands", "stray writes")),
}


@cuda.jit
def poke(array, index):
    array[index] = 0


def then_poke(launch: Launch, array, index: int) -> Launch:
    """Return the stage with a store of 0 to array[index] after its kernels."""

    def enqueue() -> None:
        launch.enqueue()
        poke[1, 1](array, index)

    return replace(launch, enqueue=enqueue)


@pytest.mark.parametrize("geometry, backend, buffer, failures", LAST_BUFFER.values(), ids=LAST_BUFFER.keys())
def test_kernel_writing_one_element_past_the_last_buffer_is_caught(monkeypatch, geometry, backend, buffer, failures):
    real = routes.ATTENTION[Backend(backend)]

    def overrun(p, fp, inputs, ws):
        *launches, last = real(p, fp, inputs, ws)
        return [*launches, then_poke(last, ws.arrays[buffer], fp.buffer(buffer).elements)]

    monkeypatch.setitem(routes.ATTENTION, Backend(backend), overrun)
    report = validate_shape(geometry, SM80, backend)
    assert report.failures == failures, report.as_dict()
    assert [s.stage for s in report.measurement.stray] == ["transpose" if backend == "unfused" else "attention"]


def test_stages_other_than_the_footprint_are_an_internal_error(monkeypatch):
    real = routes.launch_sequence
    monkeypatch.setattr(routes, "launch_sequence", lambda *args: real(*args)[1:])
    geometry, backend = LAST_BUFFER["flash-softmax_lse"][:2]
    with pytest.raises(InternalError, match="stages"):
        validate_shape(geometry, SM80, backend)


@pytest.mark.parametrize("geometry, backend", [case[:2] for case in LAST_BUFFER.values()], ids=LAST_BUFFER.keys())
def test_clean_twins_pass(geometry, backend):
    """The same shapes without a planted fault pass, so each failure above is the fault's."""
    assert validate_shape(geometry, SM80, backend).passed
