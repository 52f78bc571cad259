"""attnws's own bug (InternalError) is never an estimate ORT declares unavailable: it propagates
(the CLI exits 4), whichever estimate meets it; ORT's errors stay unavailable estimates."""

from __future__ import annotations

import importlib

import pytest

from attnws.spec import Geometry, Op, QkvFormat
from attnws.spec.errors import InternalError, InvalidArgument
from attnws.spec.options import RuntimeConfig

estimates = importlib.import_module("attnws.spec.estimate")  # the package exports a function of that name
aggregates = importlib.import_module("attnws.spec.aggregate")


def _geometry() -> Geometry:
    return Geometry(Op.PMHA, 2, batch=2, seq=4, heads=2, head_size=8, pmha_format=QkvFormat.PACKED)


def _raising(error):
    def recipe(*args, **kwargs):
        raise error
    return recipe


@pytest.mark.parametrize("read", [
    lambda g: estimates.estimate_exact(g, RuntimeConfig()),
    lambda g: estimates.estimate_geometry(g, RuntimeConfig()),
], ids=["exact", "safe_bound"])
def test_an_internal_error_propagates_out_of_the_estimate(monkeypatch, read):
    g = _geometry()
    assert read(g).ok
    monkeypatch.setattr(estimates, "recipe", _raising(InternalError("planted")))
    monkeypatch.setattr(aggregates, "recipe", _raising(InternalError("planted")))
    with pytest.raises(InternalError, match="planted"):
        read(g)


def test_ort_s_error_stays_an_unavailable_estimate(monkeypatch):
    g = _geometry()
    monkeypatch.setattr(estimates, "recipe", _raising(InvalidArgument("ORT's planted check")))
    result = estimates.estimate_exact(g, RuntimeConfig())
    assert not result.ok and result.message == "ORT's planted check" and result.error == "invalid_argument"
