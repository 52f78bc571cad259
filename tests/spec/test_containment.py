"""Each containment check fires on a planted bug."""

from __future__ import annotations

import dataclasses

import pytest

from attnws.spec import CONCRETE, Backend, InvalidArgument, WorkspaceOverflow, overlapping_views, recipe, validate_recipe
from attnws.spec.containment import misaligned
from attnws.spec.problem import QkvLayout

from .helpers import pmha


@pytest.fixture
def unfused():
    return recipe(pmha(qkv_bias=True), Backend.UNFUSED)


def test_sound_recipe_passes_every_check(unfused):
    validate_recipe(CONCRETE, unfused)
    assert overlapping_views(unfused) == [] and misaligned(unfused) == []


def test_view_past_the_allocation_is_caught(unfused):
    bad = dataclasses.replace(unfused, v_bytes=unfused.v_bytes + 1, v_offset_bytes=unfused.attention_workspace_bytes - unfused.v_bytes)
    with pytest.raises(InvalidArgument, match="view v"):
        validate_recipe(CONCRETE, bad)


def test_second_scratch_one_byte_short_is_caught(unfused):
    short = dataclasses.replace(unfused, attention_workspace_bytes=unfused.attention_workspace_bytes - 1)
    with pytest.raises(InvalidArgument, match="second scratch"):
        validate_recipe(CONCRETE, short)


def test_offset_overflow_is_an_overflow(unfused):
    with pytest.raises(WorkspaceOverflow):
        validate_recipe(CONCRETE, dataclasses.replace(unfused, q_offset_bytes=2**64 - 1, q_bytes=1))


def test_overlapping_views_are_reported(unfused):
    shifted = dataclasses.replace(unfused, k_offset_bytes=unfused.k_offset_bytes - 2)
    assert ("q", "k") in overlapping_views(shifted)


def test_misaligned_scratch_region_is_reported(unfused):
    assert misaligned(dataclasses.replace(unfused, backend_workspace_bytes=unfused.backend_workspace_bytes - 8))


def test_layout_field_mismatch_is_caught():
    direct = recipe(pmha(fmt="separate"), Backend.FLASH)
    assert direct.qkv_layout is QkvLayout.NONE
    with pytest.raises(InvalidArgument, match="exposes QKV workspace views"):
        validate_recipe(CONCRETE, dataclasses.replace(direct, q_bytes=8))
