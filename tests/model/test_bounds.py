"""Parsing `--dim NAME=MAX` and ORT's `session.max_shape_override` syntax."""

from __future__ import annotations

import pytest

from attnws.model import parse_dims, parse_max_shape_override
from attnws.spec.errors import UsageError


@pytest.mark.parametrize("text,expected", [
    ("input_ids:[8,4096];attention_mask:[8,4096]", {"input_ids": (8, 4096), "attention_mask": (8, 4096)}),
    (" x : [ 1 , 2 ] ; ", {"x": (1, 2)}),
    ("scalar:[]", {"scalar": ()}),
    ("", {}),
    (None, {}),
])
def test_max_shape_override_parses(text, expected):
    assert parse_max_shape_override(text) == expected


@pytest.mark.parametrize("text", ["x", "x:8,4", "x:[8,4", ":[1]", "x:[1,a]", "x:[-1]", "x:[1];x:[2]"])
def test_max_shape_override_rejects(text):
    with pytest.raises(UsageError):
        parse_max_shape_override(text)


def test_dims_parse():
    assert parse_dims(["batch=8", " seq = 512"]) == {"batch": 8, "seq": 512}
