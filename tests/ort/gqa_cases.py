"""Seeded random GroupQueryAttention nodes, and ONNX Runtime's CPU verdict on each.

`generate_cases(seed, count)` is deterministic: one `random.Random(seed)` draws every case in
order. A case starts from a well-formed node of one scenario (`SCENARIOS`: a first prompt, a
decode step on a dynamic or a static cache, a subsequent-prompt chunk, a shared-KV step, each
with separate or packed QKV, and the windowed cache), adds optional inputs and attributes (rotary
caches, position_ids, attention_bias, head_sink, softcap, smooth softmax, no causal mask, a local
window, int8 and int4 quantized caches, no present outputs, q/k norm weights), then, for most
cases, breaks one thing on purpose (`MUTATIONS`: one dimension, rank, input presence, attribute
or the total_sequence_length value). Its tags name everything it exercises.

`ort_verdicts` runs the cases on the CPU execution provider in a child process
(`python -m tests.ort.gqa_cases CASES START`), restarted after a crash, as `engine.py` does for
MultiHeadAttention. Models are one com.microsoft GroupQueryAttention node (opset 1, fp16 inputs),
built in memory; inputs are zeros except seqlens_k (T - 1 for every batch entry, so that the
CPU's value checks pass where the shapes are valid), total_sequence_length (T) and the scales (1).
"""

from __future__ import annotations

import random
import sys
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np
from onnx import TensorProto

from . import engine
from .engine import OrtVerdict

SEED = 20260311
CASE_COUNT = 2000
INPUT_NAMES = ("query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length",
               "cos_cache", "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale",
               "q_norm_weight", "k_norm_weight")
CACHE_INPUTS = ("past_key", "past_value")
ATTRIBUTE_DEFAULTS: dict[str, Any] = dict(
    local_window_size=-1, causal=1, sliding_window_cache=0, do_rotary=0, softcap=0.0, smooth_softmax=0,
    qk_norm_epsilon=1e-6, kv_cache_bit_width=0, k_quant_type="NONE", v_quant_type="NONE")
CACHE_TYPES = {"same": (TensorProto.FLOAT16, np.float16), "int8": (TensorProto.INT8, np.int8),
               "uint8": (TensorProto.UINT8, np.uint8)}

Shape = tuple[int, ...]
Shapes = dict[str, list[int]]


@dataclass(frozen=True)
class GqaCase:
    """One GroupQueryAttention node: `shapes[i]` is the shape of input i (`INPUT_NAMES`), None
    when absent (input 6's shape is that of the total_sequence_length tensor, `total` its value);
    `attributes` holds the attributes that differ from `ATTRIBUTE_DEFAULTS`."""

    ident: str
    num_heads: int
    kv_num_heads: int
    attributes: tuple[tuple[str, Any], ...]
    cache_dtype: str
    shapes: tuple[Shape | None, ...]
    total: int
    has_present: bool
    tags: frozenset[str]

    def shape(self, name: str) -> Shape | None:
        """Return the shape of the named input, None when absent."""
        return self.shapes[INPUT_NAMES.index(name)]

    def attribute(self, name: str) -> Any:
        """Return the attribute's value (its default when the node does not set it)."""
        return dict(self.attributes).get(name, ATTRIBUTE_DEFAULTS[name])

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = sorted(self.tags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GqaCase:
        shapes = tuple(None if shape is None else tuple(shape) for shape in data["shapes"])
        attributes = tuple((name, value) for name, value in data["attributes"])
        return cls(**{**data, "shapes": shapes, "attributes": attributes, "tags": frozenset(data["tags"])})

    def describe(self) -> str:
        shapes = ", ".join(f"{name}={list(shape)}" for name, shape in zip(INPUT_NAMES, self.shapes)
                           if shape is not None)
        return (f"{self.ident}\n    {shapes}; T={self.total} N={self.num_heads} Nk={self.kv_num_heads} "
                f"cache={self.cache_dtype} present={self.has_present} {dict(self.attributes)}")


# -- the generator ---------------------------------------------------------------------------
SCENARIOS = ("prompt",) * 4 + ("decode",) * 4 + ("static_decode",) * 3 + ("chunk",) * 2 + ("static_chunk",) * 2 \
    + ("shared_kv",) * 2 + ("windowed",) * 3


@dataclass
class Draft:
    """A node under construction."""

    n: int
    nk: int
    h: int
    b: int
    s: int
    total: int
    shapes: Shapes
    attributes: dict[str, Any]
    cache_dtype: str = "same"
    has_present: bool = True
    tags: set[str] = None  # type: ignore[assignment]

    @property
    def kv_head(self) -> int:
        """The past/present head dimension (int4 packs two values per byte)."""
        return self.h // 2 if self.attributes.get("kv_cache_bit_width") == 4 else self.h


def generate_cases(seed: int, count: int) -> list[GqaCase]:
    """Return `count` cases drawn from `random.Random(seed)`; equal arguments give equal lists."""
    rng = random.Random(seed)
    return [_random_case(rng, index) for index in range(count)]


def _random_case(rng: random.Random, index: int) -> GqaCase:
    """A valid node; or, for most cases, a mutation drawn first (uniformly, so that each is
    exercised as often) and applied to the first drawn node it applies to."""
    mutation = rng.choice(sorted(MUTATIONS)) if rng.random() < 0.7 else None
    for _ in range(1000):
        draft = _scenario(rng)
        _options(rng, draft)
        if mutation is None or MUTATIONS[mutation][0](draft):
            break
    if mutation is not None:
        MUTATIONS[mutation][1](draft)
        draft.tags.add(f"mut_{mutation}")
    attributes = tuple(sorted((k, v) for k, v in draft.attributes.items() if ATTRIBUTE_DEFAULTS.get(k) != v))
    shapes = tuple(None if draft.shapes.get(name) is None else tuple(draft.shapes[name]) for name in INPUT_NAMES)
    ident = f"{index:04d}-n{draft.n}k{draft.nk}h{draft.h}-" + "+".join(sorted(draft.tags))
    return GqaCase(ident, draft.n, draft.nk, attributes, draft.cache_dtype, shapes, draft.total, draft.has_present,
                   frozenset(draft.tags))


def _scenario(rng: random.Random) -> Draft:
    """A well-formed node of a random scenario."""
    scenario = rng.choice(SCENARIOS)
    nk = rng.choice((1, 1, 2, 2, 4))
    n = nk * rng.choice((1, 2, 2, 3, 4))
    h = rng.choice((8, 16, 16, 32, 32))
    b = rng.choice((1, 1, 2, 2, 3, 4))
    attributes: dict[str, Any] = {}
    tags = {scenario}
    if scenario == "prompt":
        s = rng.choice((1, 2, 3, 4, 5))
        kv, p, total = s, None, s
        if rng.random() < 0.15:
            p = 0  # a first prompt with an empty past
            tags.add("empty_past")
    elif scenario in ("decode", "static_decode"):
        s = kv = 1
        p = rng.choice((1, 2, 3, 5, 8))
        total = p + 1 if scenario == "decode" else rng.randint(1, p)
    elif scenario in ("chunk", "static_chunk"):
        b, s = 1, rng.choice((2, 3, 4))
        kv = s
        if scenario == "chunk":
            p = rng.choice((1, 2, 4, 6))
            total = p + s
        else:
            p = rng.choice((s + 1, s + 3, 8))
            total = rng.randint(s + 1, p)
    elif scenario == "shared_kv":
        s, kv = 1, 0
        p = rng.choice((1, 2, 4, 8))
        total = rng.randint(1, p)
    else:  # windowed: capacity C = W (the CUDA rule), any absolute T >= S
        window = rng.choice((1, 2, 3, 4, 6))
        attributes.update(sliding_window_cache=1, local_window_size=window)
        s = kv = rng.choice((1, 1, 2, 3))
        p = window
        total = rng.choice((s, s + 1, s + window, s + 2 * window + 1))
        if s > 1 and total != s:
            b = 1
    packed = scenario != "windowed" and rng.random() < 0.25
    shapes: Shapes = {}
    if packed:
        shapes["query"] = [b, s, (n + 2 * nk) * h]
        tags.add("packed_qkv")
    else:
        shapes.update(query=[b, s, n * h], key=[b, kv, nk * h], value=[b, kv, nk * h])
    draft = Draft(n, nk, h, b, s, total, shapes, attributes, tags=tags)
    if p is not None:
        shapes["past_key"] = [b, nk, p, h]
        shapes["past_value"] = [b, nk, p, h]
        tags.add("past")
    shapes["seqlens_k"] = [b]
    shapes["total_sequence_length"] = []
    return draft


def _options(rng: random.Random, draft: Draft) -> None:
    """Optional inputs and attributes, all valid for the node."""
    shapes, attrs, tags = draft.shapes, draft.attributes, draft.tags
    windowed = attrs.get("sliding_window_cache") == 1
    if draft.h % 16 == 0 and rng.random() < 0.4:
        half = rng.choice([8 * k for k in range(1, draft.h // 16 + 1)])
        rows = draft.total + rng.choice((0, 0, 1, 5))
        shapes["cos_cache"], shapes["sin_cache"] = [rows, half], [rows, half]
        attrs["do_rotary"] = 1 if rng.random() < 0.8 else 0
        tags.add("rotary" if attrs["do_rotary"] else "rotary_caches_only")
        if rng.random() < 0.5:
            shapes["position_ids"] = [draft.b, draft.s + rng.choice((0, 0, 2))]
            tags.add("position_ids")
    if rng.random() < 0.2:
        shapes["attention_bias"] = [rng.choice((draft.b, 1)), rng.choice((draft.n, 1)), draft.s, draft.total]
        tags.add("attention_bias")
    if rng.random() < 0.1:
        shapes["head_sink"] = [draft.n]
        tags.add("head_sink")
    if rng.random() < 0.08:
        attrs["smooth_softmax"] = 1
        tags.add("smooth_softmax")
    if rng.random() < 0.08:
        attrs["softcap"] = 30.0
        tags.add("softcap")
    if not windowed and rng.random() < 0.1:
        if rng.random() < 0.5:
            attrs["causal"] = 0
            tags.add("non_causal")
        else:
            attrs["local_window_size"] = rng.choice((1, 2, 4))
            tags.add("local_window")
    if "past_key" in shapes and rng.random() < 0.2:
        kind = rng.choice(("int8", "int8", "int4", "per_channel"))
        if kind == "int4" and (draft.h % 32 if windowed else draft.h % 8):
            kind = "int8"
        if kind == "int8" and windowed and draft.h % 16:
            kind = "per_channel" if draft.h % 16 == 0 else "none"
        if kind != "none":
            _quantize(draft, kind)
    if "past_key" in shapes and rng.random() < 0.08:
        draft.has_present = False
        tags.add("no_present")
    if rng.random() < 0.01:
        shapes["q_norm_weight"], shapes["k_norm_weight"] = [draft.h], [draft.h]
        tags.add("qk_norm")


def _quantize(draft: Draft, kind: str) -> None:
    """Make the cache int8 per tensor, int8 per channel, or int4 (uint8, two per byte) per tensor."""
    bits = 4 if kind == "int4" else 8
    mode = "PER_CHANNEL" if kind == "per_channel" else "PER_TENSOR"
    draft.attributes.update(kv_cache_bit_width=bits, k_quant_type=mode, v_quant_type=mode)
    draft.cache_dtype = "uint8" if bits == 4 else "int8"
    for name in CACHE_INPUTS:
        draft.shapes[name][3] = draft.kv_head
    scale = [1, draft.nk, 1, draft.h] if mode == "PER_CHANNEL" else [1]
    draft.shapes["k_scale"], draft.shapes["v_scale"] = list(scale), list(scale)
    draft.tags.add(f"quant_{kind}")


Mutation = Callable[[Draft], None]


def _bump(name: str, axis: int, by: int = 1) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.shapes[name][axis] += by
    return mutate


def _drop_last_dim(name: str) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.shapes[name] = draft.shapes[name][:-1]
    return mutate


def _add_dim(name: str) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.shapes[name] = [*draft.shapes[name], 1]
    return mutate


def _drop(*names: str) -> Mutation:
    def mutate(draft: Draft) -> None:
        for name in names:
            draft.shapes.pop(name, None)
    return mutate


def _attribute(name: str, value: Any) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.attributes[name] = value
    return mutate


def _set_total(change: Callable[[int], int]) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.total = change(draft.total)
    return mutate


def _set(name: str, shape: Callable[[Draft], list[int]]) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.shapes[name] = shape(draft)
    return mutate


def _kv_length(length: Callable[[Draft], int]) -> Mutation:
    def mutate(draft: Draft) -> None:
        for name in ("key", "value"):
            draft.shapes[name][1] = length(draft)
    return mutate


def _head_size_not_multiple_of_8(draft: Draft) -> None:
    draft.shapes["query"][2] = draft.n * (draft.h + 4)
    if "key" in draft.shapes:
        draft.shapes["key"][2] = draft.shapes["value"][2] = draft.nk * (draft.h + 4)


def _num_heads(value: Callable[[Draft], int]) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.n = value(draft)
    return mutate


def _kv_num_heads(value: Callable[[Draft], int]) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.nk = value(draft)
    return mutate


def _over_1024_heads(draft: Draft) -> None:
    draft.n, draft.nk, draft.h = 1032, 8, 8
    draft.attributes.update(kv_cache_bit_width=0, k_quant_type="NONE", v_quant_type="NONE", do_rotary=0)
    draft.cache_dtype = "same"
    b, s = draft.b, draft.s
    if "key" in draft.shapes:
        draft.shapes.update(query=[b, s, 1032 * 8], key=[b, draft.shapes["key"][1], 64],
                            value=[b, draft.shapes["key"][1], 64])
    else:
        draft.shapes["query"] = [b, s, (1032 + 16) * 8]
    for name in CACHE_INPUTS:
        if name in draft.shapes:
            draft.shapes[name][1], draft.shapes[name][3] = 8, draft.kv_head
    for name in ("cos_cache", "sin_cache", "position_ids", "attention_bias", "head_sink", "k_scale", "v_scale",
                 "q_norm_weight", "k_norm_weight"):
        draft.shapes.pop(name, None)


def _rotary_caches(draft: Draft) -> None:
    """Add cos/sin caches of a valid shape for H % 16 == 0, else [T, 8] (H39)."""
    half = 8
    draft.shapes["cos_cache"], draft.shapes["sin_cache"] = [draft.total, half], [draft.total, half]
    draft.attributes["do_rotary"] = 1


def _rotary_shape(shape: Callable[[Draft, int, int], list[int]]) -> Mutation:
    """Give cos_cache and sin_cache the same new shape, from the draft and cos_cache's (rows, half)."""
    def mutate(draft: Draft) -> None:
        new = shape(draft, *draft.shapes["cos_cache"][:2])
        draft.shapes["cos_cache"], draft.shapes["sin_cache"] = list(new), list(new)
    return mutate


def _quantized(kind: str) -> Mutation:
    def mutate(draft: Draft) -> None:
        _quantize(draft, kind)
    return mutate


def _bias(draft: Draft) -> None:
    draft.shapes["attention_bias"] = [draft.b, draft.n, draft.s, draft.total]


def _present(value: bool) -> Mutation:
    def mutate(draft: Draft) -> None:
        draft.has_present = value
    return mutate


def _has(*names: str) -> Callable[[Draft], bool]:
    return lambda draft: all(name in draft.shapes for name in names)


def _lacks(*names: str) -> Callable[[Draft], bool]:
    return lambda draft: all(name not in draft.shapes for name in names)


def _rank(name: str, rank: int) -> Callable[[Draft], bool]:
    return lambda draft: name in draft.shapes and len(draft.shapes[name]) >= rank


def _windowed(draft: Draft) -> bool:
    return draft.attributes.get("sliding_window_cache") == 1


def _quantized_cache(draft: Draft) -> bool:
    return draft.attributes.get("k_quant_type", "NONE") != "NONE"


def _always(draft: Draft) -> bool:
    return True


# name -> (applies to the draft, mutation)
MUTATIONS: dict[str, tuple[Callable[[Draft], bool], Mutation]] = {
    # attributes (constructor K1-K8, CheckInputs H1/H2, the CPU's own quantization checks)
    "num_heads_zero": (_always, _num_heads(lambda d: 0)),
    "kv_num_heads_zero": (_always, _kv_num_heads(lambda d: 0)),
    "num_heads_not_multiple": (lambda d: d.nk > 1 or d.n > 1, _num_heads(lambda d: d.n + 1)),
    "num_heads_over_1024": (lambda d: not _windowed(d), _over_1024_heads),
    "causal_2": (_always, _attribute("causal", 2)),
    "window_zero": (lambda d: not _windowed(d), _attribute("local_window_size", 0)),
    "window_minus_2": (lambda d: not _windowed(d), _attribute("local_window_size", -2)),
    "non_causal_window": (_always, lambda d: d.attributes.update(causal=0, local_window_size=2)),
    "windowed_without_window": (_windowed, _attribute("local_window_size", -1)),
    "qk_norm_epsilon_zero": (_always, _attribute("qk_norm_epsilon", 0.0)),
    "quant_type_bogus": (_always, _attribute("k_quant_type", "BOGUS")),
    "quant_type_lowercase": (_quantized_cache, lambda d: d.attributes.update(
        k_quant_type=d.attributes["k_quant_type"].lower(), v_quant_type=d.attributes["v_quant_type"].lower())),
    "bit_width_3": (_always, _attribute("kv_cache_bit_width", 3)),
    "bit_width_without_quant": (lambda d: not _quantized_cache(d), _attribute("kv_cache_bit_width", 8)),
    "quant_types_differ": (_quantized_cache, lambda d: d.attributes.update(
        v_quant_type="PER_CHANNEL" if d.attributes["k_quant_type"] == "PER_TENSOR" else "PER_TENSOR")),
    "drop_k_scale": (_has("k_scale"), _drop("k_scale")),
    "drop_v_scale": (_has("v_scale"), _drop("v_scale")),
    "quantize_int8": (lambda d: "past_key" in d.shapes and not _quantized_cache(d), _quantized("int8")),
    "quantize_int4": (lambda d: "past_key" in d.shapes and not _quantized_cache(d), _quantized("int4")),
    "bias_with_quant": (lambda d: _quantized_cache(d) and _lacks("attention_bias")(d), _bias),
    "bias_with_smooth_softmax": (_lacks("attention_bias"), lambda d: (_bias(d), d.attributes.update(smooth_softmax=1))),
    "bias_with_windowed": (lambda d: _windowed(d) and _lacks("attention_bias")(d), _bias),
    "q_norm_only": (_lacks("q_norm_weight"), _set("q_norm_weight", lambda d: [d.h])),
    "qk_norm_wrong_size": (_lacks("q_norm_weight"), lambda d: d.shapes.update(
        q_norm_weight=[d.h + 8], k_norm_weight=[d.h])),
    # query / key / value (H3-H16, H22, H24)
    "query_rank": (_always, _drop_last_dim("query")),
    "query_rank4": (_always, _add_dim("query")),
    "head_size_not_multiple_of_8": (_always, _head_size_not_multiple_of_8),
    "query_hidden_plus_1": (_always, _bump("query", 2)),
    "query_batch": (_always, _bump("query", 0)),
    "query_seq": (_always, _bump("query", 1)),
    "drop_value": (_has("value"), _drop("value")),
    "drop_key": (_has("key", "value"), _drop("key")),
    "drop_key_value": (_has("key", "value"), lambda d: (_drop("key", "value")(d), d.shapes.update(
        query=[d.b, d.s, (d.n + 2 * d.nk) * d.h]))),
    "value_for_packed": (_lacks("key", "value"), _set("value", lambda d: [d.b, d.s, d.nk * d.h])),
    "key_rank": (_has("key"), _drop_last_dim("key")),
    "key_batch": (_has("key"), _bump("key", 0)),
    "key_hidden_plus_1": (_has("key"), _bump("key", 2)),
    "key_hidden_plus_head": (_has("key"), lambda d: (_bump("key", 2, d.nk * 8)(d), _bump("value", 2, d.nk * 8)(d))),
    "value_rank": (_has("value"), _add_dim("value")),
    "value_batch": (_has("value"), _bump("value", 0)),
    "value_seq": (_has("value"), _bump("value", 1)),
    "value_hidden": (_has("value"), _bump("value", 2, 8)),
    "kv_seq_plus_1": (_has("key", "value"), _kv_length(lambda d: d.shapes["key"][1] + 1)),
    "kv_seq_zero": (lambda d: _has("key", "value")(d) and d.shapes["key"][1] > 0, _kv_length(lambda d: 0)),
    "query_seq_zero": (_has("past_key", "key"), lambda d: (_set("query", lambda d: [d.b, 0, d.n * d.h])(d),
                                                           _kv_length(lambda d: 0)(d))),
    # past (H17-H21, H23)
    "past_key_rank": (_has("past_key"), _drop_last_dim("past_key")),
    "past_value_rank": (_has("past_value"), _add_dim("past_value")),
    "past_key_batch": (_has("past_key"), _bump("past_key", 0)),
    "past_value_batch": (_has("past_value"), _bump("past_value", 0)),
    "past_key_heads": (_has("past_key"), _bump("past_key", 1)),
    "past_value_heads": (_has("past_value"), _bump("past_value", 1)),
    "past_value_length": (_has("past_value"), _bump("past_value", 2)),
    "past_key_head_size": (_has("past_key"), _bump("past_key", 3)),
    "past_value_head_size": (_has("past_value"), _bump("past_value", 3, 8)),
    "past_both_length_plus_1": (_has("past_key"), lambda d: (_bump("past_key", 2)(d), _bump("past_value", 2)(d))),
    "drop_past_value": (_has("past_value"), _drop("past_value")),
    "drop_past": (_has("past_key"), _drop("past_key", "past_value")),
    # seqlens_k (H25-H27) and total_sequence_length (H28-H31)
    "seqlens_scalar": (_always, _set("seqlens_k", lambda d: [])),
    "seqlens_count": (_always, _bump("seqlens_k", 0)),
    "seqlens_column": (_always, _set("seqlens_k", lambda d: [d.b, 1])),
    "seqlens_row": (_always, _set("seqlens_k", lambda d: [1, d.b])),
    "seqlens_square": (lambda d: d.b == 4, _set("seqlens_k", lambda d: [2, 2])),
    "total_vector": (_always, _set("total_sequence_length", lambda d: [1])),
    "total_two": (_always, _set("total_sequence_length", lambda d: [2])),
    "total_matrix": (_always, _set("total_sequence_length", lambda d: [1, 1])),
    "total_zero": (_always, _set_total(lambda t: 0)),
    "total_negative": (_always, _set_total(lambda t: -3)),
    "total_plus_1": (_always, _set_total(lambda t: t + 1)),
    "total_minus_1": (_always, _set_total(lambda t: t - 1)),
    "total_plus_5": (_always, _set_total(lambda t: t + 5)),
    # windowed cache (H33-H37, D1)
    "windowed_attribute_2": (_windowed, _attribute("sliding_window_cache", 2)),
    "windowed_drop_past": (_windowed, _drop("past_key", "past_value")),
    "windowed_capacity_minus_1": (_windowed, lambda d: (_bump("past_key", 2, -1)(d), _bump("past_value", 2, -1)(d))),
    "windowed_capacity_plus_2": (_windowed, lambda d: (_bump("past_key", 2, 2)(d), _bump("past_value", 2, 2)(d))),
    "windowed_total_below_sequence": (lambda d: _windowed(d) and d.s > 1, _set_total(lambda t: 1)),
    "windowed_shared_kv": (lambda d: _windowed(d) and _has("key")(d), _kv_length(lambda d: 0)),
    "make_windowed": (lambda d: _has("past_key")(d) and not _windowed(d) and d.attributes.get("causal", 1) == 1,
                      lambda d: d.attributes.update(sliding_window_cache=1,
                                                    local_window_size=d.shapes["past_key"][2] or 1)),
    # rotary (H38-H41, H43, D5)
    "rotary_caches": (_lacks("cos_cache"), _rotary_caches),
    "cos_rows_short": (_has("cos_cache"), _rotary_shape(lambda d, rows, half: [d.total - 1, half])),
    "cos_dim1_too_big": (_has("cos_cache"), _rotary_shape(lambda d, rows, half: [rows, d.h // 2 + 8])),
    "cos_dim1_not_8": (_has("cos_cache"), lambda d: (_bump("cos_cache", 1, -4)(d), _bump("sin_cache", 1, -4)(d))),
    "sin_rows_differ": (_has("sin_cache"), _bump("sin_cache", 0)),
    "drop_sin": (_has("sin_cache"), _drop("sin_cache")),
    "drop_rotary_caches": (lambda d: _has("cos_cache")(d) and d.attributes.get("do_rotary") == 1,
                           _drop("cos_cache", "sin_cache", "position_ids")),
    "do_rotary_without_caches": (_lacks("cos_cache"), _attribute("do_rotary", 1)),
    # custom inputs (X1-X10)
    "position_ids_batch": (_has("position_ids"), _bump("position_ids", 0)),
    "position_ids_rank_3": (_has("position_ids"), lambda d: d.shapes["position_ids"].append(1)),
    "position_ids_short": (_has("position_ids"), _set("position_ids", lambda d: [d.b, d.s - 1])),
    "bias_rank": (_has("attention_bias"), _drop_last_dim("attention_bias")),
    "bias_dim0": (_has("attention_bias"), _set("attention_bias", lambda d: [d.b + 1, *d.shapes["attention_bias"][1:]])),
    "bias_dim1": (_has("attention_bias"), lambda d: d.shapes["attention_bias"].__setitem__(1, d.n + 1)),
    "bias_dim2": (_has("attention_bias"), _bump("attention_bias", 2)),
    "bias_dim3": (_has("attention_bias"), _bump("attention_bias", 3)),
    "add_bias": (_lacks("attention_bias"), _bias),
    "head_sink_rank": (_always, _set("head_sink", lambda d: [1, d.n])),
    "head_sink_size": (_always, _set("head_sink", lambda d: [d.n + 1])),
    # present outputs (D6, D8) and others
    "drop_present": (_always, _present(False)),
}


# -- the engine ------------------------------------------------------------------------------
def ort_verdicts(cases: Sequence[GqaCase]) -> list[OrtVerdict]:
    """Return ORT's verdict for every case, in order (the shared engine, this module as its child)."""
    return engine.ort_verdicts(cases, "tests.ort.gqa_cases")


def main(argv: Sequence[str]) -> None:
    """Child process: the shared engine with this module's cases, models and feeds."""
    engine.run_child_cases(argv, GqaCase.from_json, model, feeds)


def _elem_type(case: GqaCase, name: str) -> int:
    if name in CACHE_INPUTS or name in ("present_key", "present_value"):
        return CACHE_TYPES[case.cache_dtype][0]
    if name in ("seqlens_k", "total_sequence_length"):
        return TensorProto.INT32
    if name == "position_ids":
        return TensorProto.INT64
    if name in ("k_scale", "v_scale"):
        return TensorProto.FLOAT
    return TensorProto.FLOAT16


def model(case: GqaCase, static_shapes: bool = True) -> bytes:
    """GroupQueryAttention's one-node model (the shared builder, this operator's attributes)."""
    attributes = {**ATTRIBUTE_DEFAULTS, **dict(case.attributes)}
    return engine.one_node_model("GroupQueryAttention", case, INPUT_NAMES, _elem_type, static_shapes,
                                 num_heads=case.num_heads, kv_num_heads=case.kv_num_heads, **attributes)


def feeds(case: GqaCase) -> dict[str, np.ndarray]:
    """Zeros, except seqlens_k (T - 1, at least 0), total_sequence_length (T) and the scales (1)."""
    result: dict[str, np.ndarray] = {}
    for name, shape in zip(INPUT_NAMES, case.shapes):
        if shape is None:
            continue
        if name == "seqlens_k":
            result[name] = np.full(shape, max(case.total - 1, 0), dtype=np.int32)
        elif name == "total_sequence_length":
            result[name] = np.full(shape, case.total, dtype=np.int32)
        elif name == "position_ids":
            result[name] = np.zeros(shape, dtype=np.int64)
        elif name in ("k_scale", "v_scale"):
            result[name] = np.ones(shape, dtype=np.float32)
        elif name in CACHE_INPUTS:
            result[name] = np.zeros(shape, dtype=CACHE_TYPES[case.cache_dtype][1])
        else:
            result[name] = np.zeros(shape, dtype=np.float16)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
