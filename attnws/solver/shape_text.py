"""A shape's dimensions in the short form every solver message uses: "B=1 S=15 N=1 H=64 T=15"."""

from __future__ import annotations

from typing import Any

DIM_LABELS = {"batch": "B", "seq": "S", "kv_seq": "L", "past": "P", "heads": "N", "head_size": "H",
              "v_head_size": "Hv", "tokens": "T", "input_hidden": "K"}


def shape_text(dims: dict[str, Any]) -> str:
    """Return a shape's dimensions as "B=1 S=15 N=1 H=64 T=15" (unset ones left out)."""
    return " ".join(f"{label}={dims[name]}" for name, label in DIM_LABELS.items() if dims.get(name) is not None)
