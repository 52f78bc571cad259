"""`genai_config.json`, the file onnxruntime-genai's model builder writes beside `model.onnx`: the
bounds of the decoder's symbolic dimensions that onnxruntime-genai itself runs the model with.

What onnxruntime-genai does with it (its `DefaultKeyValueCache`, `src/models/kv_cache.cpp`, read at
the version docs/ort-version.md names): the past and present buffers are shared when
`search.past_present_share_buffer` is true and `search.num_beams` is 1 (beam search turns sharing
off), and a shared cache is allocated once with `search.max_length` rows for every layer,
`decoder.head_size` wide, for batch x beams sequences. So with a shared cache:

- `kv_cache_dim` (the cache's last axis in every builder graph) is `decoder.head_size`;
- `past_sequence_length` and `total_sequence_length` (the cache's rows, and the attention mask's
  width) are `search.max_length`, and so is `sequence_length` (a prompt fills at most the cache);
- a windowed layer's `past_sliding_length` / `total_sliding_length` is its window,
  `decoder.sliding_window.window_size`, at most `search.max_length`;
- ORT's session option `ep.cuda.gqa_workspace_max_total_sequence_length` (`--max-total-seq`) is
  `search.max_length`: no run sees a longer total sequence.

A cache that is not shared (sharing off, or beam search) grows by each run's tokens: present is a
new tensor P + S rows long, which the next run passes as its past (the cache layout "separate"): P
ranges over 0..`search.max_length` - S, bounded, with T and S, by `search.max_length`. Under beam
search the cache's batch is the batch times `search.num_beams` (onnxruntime-genai's BatchBeamSize):
the batch the file leaves to `--dim` is that product.

A bound the user gives (`--dim`, `--max-shape-override`, `--max-total-seq`, `--cache-layout`) wins
over the file; only symbols the model has are bound.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from ..spec.documents import DocumentError, Fields, read_user_json, resolve_inside
from ..spec.limits import INT32_MAX
from .errors import BadModel

CONFIG_NAME = "genai_config.json"
MAX_CONFIG_BYTES = 1 << 20  # builder configs are a few KB


@dataclass(frozen=True)
class GenaiBounds:
    """What `genai_config.json` gives: symbolic dimensions' maxima and the session's longest total
    sequence, each with the config field it came from (`sources`)."""

    path: str
    dims: dict[str, int] = field(default_factory=dict)
    max_total_seq: int = 0
    sources: dict[str, str] = field(default_factory=dict)
    cache_layout: str | None = None

    def without(self, names: set[str]) -> "GenaiBounds":
        """Return the bounds less the symbolic dimensions `names` (bounds that change nothing)."""
        dims = {k: v for k, v in self.dims.items() if k not in names}
        return replace(self, dims=dims, sources={k: v for k, v in self.sources.items() if k not in names})

    def as_dict(self) -> dict[str, Any]:
        """Return the JSON record: the file, and each bound with its value and field."""
        taken = {name: {"value": value, "from": self.sources[name]} for name, value in self.dims.items()}
        if self.max_total_seq:
            taken["--max-total-seq"] = {"value": self.max_total_seq, "from": self.sources["--max-total-seq"]}
        if self.cache_layout:
            taken["--cache-layout"] = {"value": self.cache_layout, "from": self.sources["--cache-layout"]}
        return {"path": self.path, "taken": taken}

    def text(self) -> str:
        """Return one line saying what was taken from the file."""
        items = [f"{name} = {value:,} ({self.sources[name]})" for name, value in self.dims.items()]
        if self.max_total_seq:
            items.append(f"--max-total-seq {self.max_total_seq:,} ({self.sources['--max-total-seq']})")
        if self.cache_layout:
            items.append(f"--cache-layout {self.cache_layout} ({self.sources['--cache-layout']})")
        return f"from {self.path}: " + ("; ".join(items) if items else "nothing this model needs")


def find_config(model_path: str) -> str | None:
    """Return the path of the `genai_config.json` in the model's folder, None when there is none
    (or the model comes from standard input)."""
    if model_path == "-":
        return None
    folder = os.path.dirname(os.path.abspath(model_path))
    try:
        path, status = resolve_inside(folder, CONFIG_NAME, CONFIG_NAME, missing_ok=True)
    except DocumentError as error:
        raise BadModel(str(error)) from None
    return None if status is None else path


def _positive(fields: Fields, key: str) -> int | None:
    return fields.integer(key, lo=1, hi=INT32_MAX)


def read_bounds(path: str, symbols: set[str], given: set[str], max_total_seq_given: bool,
                layout_given: bool = False) -> GenaiBounds:
    """Return the bounds `genai_config.json` at `path` gives for the model's `symbols`, leaving out
    the names in `given` (bounded by the user), the session bound when `max_total_seq_given` and
    the cache layout when `layout_given`. Raise BadModel for a file that is not such a config."""
    try:
        document = Fields(read_user_json(path, CONFIG_NAME, MAX_CONFIG_BYTES), path)
        model = Fields(document.raw("model", {}), f"{path}: model")
        search = Fields(document.raw("search", {}), f"{path}: search")
        decoder = Fields(model.raw("decoder", {}), f"{path}: model.decoder")
        window = decoder.raw("sliding_window")
        window_fields = Fields(window, f"{path}: model.decoder.sliding_window") if window is not None else None
        max_length = _positive(search, "max_length")
        context = _positive(model, "context_length")
        head_size = _positive(decoder, "head_size")
        window_size = _positive(window_fields, "window_size") if window_fields is not None else None
        shared = search.boolean("past_present_share_buffer", True)
        beams = search.integer("num_beams", 1, lo=1, hi=INT32_MAX)
    except DocumentError as error:
        raise BadModel(str(error)) from None
    growing = not shared or beams != 1
    rows, rows_from = (max_length, "search.max_length") if max_length else (context, "model.context_length")
    candidates: dict[str, tuple[int | None, str]] = {
        "kv_cache_dim": (head_size, "model.decoder.head_size"),
        "past_sequence_length": (rows, rows_from), "total_sequence_length": (rows, rows_from),
        "sequence_length": (rows, rows_from),
    }
    if window_size is not None and rows is not None:
        windowed = (min(window_size, rows), f"model.decoder.sliding_window.window_size, at most {rows_from}")
        candidates.update(past_sliding_length=windowed, total_sliding_length=windowed)
    dims, sources = {}, {}
    for name, (value, source) in candidates.items():
        if value is not None and name in symbols and name not in given:
            dims[name], sources[name] = value, source
    max_total = 0
    if rows is not None and not max_total_seq_given:
        max_total, sources["--max-total-seq"] = rows, rows_from
    layout = None
    if not layout_given:
        layout = "separate" if growing else "shared"
        sources["--cache-layout"] = (
            "search.past_present_share_buffer false" if not shared else f"search.num_beams {beams}: beam search turns "
            "sharing off" if beams != 1 else "search.past_present_share_buffer true, num_beams 1")
    return GenaiBounds(path, dims, max_total, sources, layout)
