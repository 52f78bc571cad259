"""Seeded random MultiHeadAttention nodes: input shapes, attributes and outputs, valid or not.

`generate_cases(seed, count)` is deterministic: one `random.Random(seed)` draws every case in
order. Every dimension is at most 8, except hidden sizes (N * H), the lengths derived from them
and num_heads in the rare `num_heads_over_1024` cases, so that ONNX Runtime runs each case in
about a millisecond.

A case starts from a well-formed node of one format (`FORMATS`), adds optional inputs of right
and wrong shapes, then, for some cases, breaks one thing on purpose (`MUTATIONS`). Its tags name
everything it exercises; they make up its readable id and let tests check coverage.

Never generated: a Q/K or V head size of 0 (hidden size below num_heads). ONNX Runtime 1.31.1's
CPU kernel divides by the head size and dies of SIGFPE, so such a case would get no verdict.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any, Callable

SEED = 20260201  # the suite's cases: generate_cases(SEED, CASE_COUNT)
CASE_COUNT = 1500
INPUT_NAMES = ("query", "key", "value", "bias", "key_padding_mask", "attention_bias",
               "past_key", "past_value", "past_sequence_length", "cache_indirection")

# Weighted: the packed formats are drawn less often because ORT's CPU kernel does not implement
# the rank-5 ones (so they are excluded from the comparison, see the test module's table).
FORMATS = ("separate",) * 8 + ("cross",) * 4 + ("packed_kv",) * 2 + ("packed_qkv",) * 2 + ("packed_qkv_3d",)
BATCH_SIZES = (0, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5)
SEQUENCE_LENGTHS = (0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8)
HEAD_SIZES = (1, 2, 3, 4, 8)

Shape = tuple[int, ...]
Shapes = dict[str, list[int]]


@dataclass(frozen=True)
class MhaCase:
    """One MultiHeadAttention node. `shapes[i]` is the shape of ORT input i (`INPUT_NAMES`), None
    when absent; `total` is the T = P + L the generator meant (used to fill the key padding mask);
    `has_present` says whether the node has the present_key / present_value outputs."""

    ident: str
    dtype: str
    num_heads: int
    unidirectional: bool
    has_present: bool
    shapes: tuple[Shape | None, ...]
    total: int
    tags: frozenset[str]

    def shape(self, name: str) -> Shape | None:
        """Return the shape of the named input, None when absent."""
        return self.shapes[INPUT_NAMES.index(name)]

    @property
    def element_size(self) -> int:
        """Bytes per element of the float inputs: 4 for fp32, 2 for fp16."""
        return 4 if self.dtype == "fp32" else 2

    def to_json(self) -> dict[str, Any]:
        """Return the case as JSON-compatible data (`from_json` reads it back)."""
        data = asdict(self)
        data["tags"] = sorted(self.tags)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MhaCase:
        """Return the case that `to_json` wrote."""
        shapes = tuple(None if shape is None else tuple(shape) for shape in data["shapes"])
        return cls(**{**data, "shapes": shapes, "tags": frozenset(data["tags"])})

    def describe(self) -> str:
        """The case's shapes and attributes, on two lines."""
        shapes = ", ".join(f"{name}={list(shape)}" for name, shape in zip(INPUT_NAMES, self.shapes)
                           if shape is not None)
        return (f"{self.ident}\n    {shapes}; num_heads={self.num_heads} {self.dtype} "
                f"present={self.has_present} unidirectional={self.unidirectional}")


def generate_cases(seed: int, count: int) -> list[MhaCase]:
    """Return `count` cases drawn from `random.Random(seed)`; equal arguments give equal lists."""
    rng = random.Random(seed)
    return [_random_case(rng, index) for index in range(count)]


def _random_case(rng: random.Random, index: int) -> MhaCase:
    """Draw one case: a well-formed node, optional inputs, then at most one deliberate error."""
    tags: set[str] = set()
    fmt = rng.choice(FORMATS)
    tags.add(fmt)
    num_heads, n, b, s, length, h, hv = _geometry(rng, tags)
    d, dv = _hidden_sizes(rng, fmt, n, h, hv, tags)
    shapes, kv_length = _qkv_shapes(fmt, b, s, length, n, h, d, dv)
    past = _add_past(rng, fmt, shapes, b, n, h, hv, tags)
    has_present = rng.random() < (0.8 if past is not None else 0.3)
    tags.add("present" if has_present else "no_present")
    if past is not None and not has_present:
        tags.add("past_no_present")
    total = (past or 0) + kv_length
    hidden = d if fmt != "packed_qkv" else n * h
    v_hidden = dv if fmt in ("separate", "cross") else hidden
    _add_bias(rng, shapes, hidden, v_hidden, tags)
    _add_mask(rng, shapes, b, s, kv_length, total, tags)
    _add_attention_bias(rng, shapes, b, n, s, total, tags)
    _add_unsupported(rng, shapes, b, total, tags)
    if rng.random() < 0.4:
        _mutate(rng, shapes, tags)
    dtype = "fp16" if rng.random() < 0.3 else "fp32"
    unidirectional = rng.random() < 0.3
    if unidirectional:
        tags.add("unidirectional")
    ident = f"{index:04d}-{dtype}-n{num_heads}-" + "+".join(sorted(tags))
    return MhaCase(
        ident=ident, dtype=dtype, num_heads=num_heads, unidirectional=unidirectional,
        has_present=has_present, shapes=tuple(_frozen(shapes.get(name)) for name in INPUT_NAMES),
        total=total, tags=frozenset(tags),
    )


def _geometry(rng: random.Random, tags: set[str]) -> tuple[int, int, int, int, int, int, int]:
    """Return (num_heads attribute, N used for shapes, B, S, L, H, Hv)."""
    b, s, length = rng.choice(BATCH_SIZES), rng.choice(SEQUENCE_LENGTHS), rng.choice(SEQUENCE_LENGTHS)
    if 0 in (b, s, length):
        tags.add("zero_dim")
    special = rng.random()
    if special < 0.02:
        tags.add("num_heads_over_1024")
        return 1025, 1025, min(b, 2), min(s, 2), min(length, 2), 1, 1
    h = rng.choice(HEAD_SIZES)
    hv = h if rng.random() < 0.7 else rng.choice((1, 2, 3, 5))
    if hv != h:
        tags.add("hv_ne_h")
    if special < 0.035:
        tags.add("num_heads_zero")
        return 0, 1, b, s, length, h, hv
    n = rng.choice((1, 2, 2, 3, 4))
    return n, n, b, s, length, h, hv


def _hidden_sizes(rng: random.Random, fmt: str, n: int, h: int, hv: int, tags: set[str]) -> tuple[int, int]:
    """Return (D, Dv), sometimes not multiples of N (ORT derives H = D / N by floor division)."""
    d, dv = n * h, n * hv
    if n > 1 and fmt != "packed_qkv" and rng.random() < 0.08:
        d += rng.randrange(1, n)
        tags.add("hidden_not_divisible")
    if n > 1 and fmt == "separate" and rng.random() < 0.04:
        dv += rng.randrange(1, n)
        tags.add("v_hidden_not_divisible")
    return d, dv


def _qkv_shapes(fmt: str, b: int, s: int, length: int, n: int, h: int, d: int, dv: int) -> tuple[Shapes, int]:
    """Return the query/key/value shapes of a well-formed node of the format, and its L."""
    hv = dv // n
    if fmt == "separate":
        return {"query": [b, s, d], "key": [b, length, d], "value": [b, length, dv]}, length
    if fmt == "cross":
        return {"query": [b, s, d], "key": [b, n, length, d // n], "value": [b, n, length, hv]}, length
    if fmt == "packed_kv":
        return {"query": [b, s, d], "key": [b, length, n, 2, d // n]}, length
    if fmt == "packed_qkv":
        return {"query": [b, s, n, 3, h]}, s
    return {"query": [b, s, 3 * d]}, s


def _add_past(rng: random.Random, fmt: str, shapes: Shapes, b: int, n: int, h: int, hv: int,
              tags: set[str]) -> int | None:
    """Maybe add past_key / past_value [B, N, P, H] (past_value's last dim sometimes Hv); return P."""
    if rng.random() >= (0.35 if fmt == "separate" else 0.1):
        return None
    p = rng.choice((0, 1, 2, 3))
    head = shapes["query"][2] // n if len(shapes["query"]) == 3 else h  # ORT's H = D / N
    value_head = head
    if hv != h and rng.random() < 0.5:
        value_head = hv
        tags.add("past_value_hv")
    shapes["past_key"], shapes["past_value"] = [b, n, p, head], [b, n, p, value_head]
    tags.add("past")
    return p


def _add_bias(rng: random.Random, shapes: Shapes, hidden: int, v_hidden: int, tags: set[str]) -> None:
    """Maybe add the QKV bias: [2D + Dv], one element short, or rank 2."""
    if rng.random() >= 0.25:
        return
    length = 2 * hidden + v_hidden
    kind = rng.choice(("bias", "bias", "bias_wrong_length", "bias_rank2"))
    shapes["bias"] = {"bias": [length], "bias_wrong_length": [length + rng.choice((-1, 1))],
                      "bias_rank2": [1, length]}[kind]
    tags.add(kind)


def _add_mask(rng: random.Random, shapes: Shapes, b: int, s: int, length: int, total: int, tags: set[str]) -> None:
    """Maybe add a key padding mask of one of ORT's four kinds or of a wrong shape."""
    if rng.random() >= 0.4:
        return
    kinds = {
        "mask_b": [b], "mask_3b2": [3 * b + 2], "mask_bt": [b, total], "mask_bst": [b, s, total],
        "mask_bad_1d": [2 * b + 1], "mask_bad_2d": [b, total + 1], "mask_bad_3d": [b, s + 1, total],
        "mask_rank4": [b, 1, s, total],
    }
    if length != total:
        kinds["mask_b_l"] = [b, length]  # the old helper's (B, L); ORT 1.31.1 wants (B, T)
    kind = rng.choice(sorted(kinds))
    shapes["key_padding_mask"] = kinds[kind]
    tags.add(kind)


def _add_attention_bias(rng: random.Random, shapes: Shapes, b: int, n: int, s: int, total: int,
                        tags: set[str]) -> None:
    """Maybe add attention_bias [B or 1, N or 1, S, T], or one with a wrong dim or rank."""
    if rng.random() >= 0.35:
        return
    shape = [rng.choice((b, 1)), rng.choice((n, 1)), s, total]
    if 1 in shape[:2]:
        tags.add("abias_broadcast")
    kind = rng.choice(("abias",) * 4 + ("abias_bad_dim0", "abias_bad_dim1", "abias_bad_dim2",
                                        "abias_bad_dim3", "abias_rank3"))
    if kind == "abias_rank3":
        shape = shape[1:]
    elif kind != "abias":
        axis = int(kind[-1])
        shape[axis] = max((b, n)[axis], 1) + 1 if axis < 2 else shape[axis] + 1  # neither B/N nor 1
    shapes["attention_bias"] = shape
    tags.add(kind)


def _add_unsupported(rng: random.Random, shapes: Shapes, b: int, total: int, tags: set[str]) -> None:
    """Rarely add the inputs attnws does not model: past_sequence_length and cache_indirection."""
    if rng.random() < 0.03:
        shapes["past_sequence_length"] = [1]
        tags.add("past_sequence_length")
    if rng.random() < 0.03:
        shapes["cache_indirection"] = [b, 1, total]
        tags.add("cache_indirection")


def _bump(name: str, axis: int) -> Callable[[Shapes], None]:
    """Return a mutation that adds 1 to one dim of one input."""
    def mutate(shapes: Shapes) -> None:
        shapes[name][axis] += 1
    return mutate


def _drop_last_dim(name: str) -> Callable[[Shapes], None]:
    """Return a mutation that drops the last dim of an input."""
    def mutate(shapes: Shapes) -> None:
        shapes[name] = shapes[name][:-1]
    return mutate


def _drop(name: str) -> Callable[[Shapes], None]:
    """Return a mutation that removes an input."""
    def mutate(shapes: Shapes) -> None:
        del shapes[name]
    return mutate


# name -> (inputs it needs, minimum rank of the first of them, mutation)
MUTATIONS: dict[str, tuple[tuple[str, ...], int, Callable[[Shapes], None]]] = {
    "query_rank": (("query",), 1, _drop_last_dim("query")),
    "query_dim3": (("query",), 5, _bump("query", 3)),
    "key_batch": (("key",), 1, _bump("key", 0)),
    "value_batch": (("value",), 1, _bump("value", 0)),
    "key_dim2": (("key",), 3, _bump("key", 2)),
    "key_dim3": (("key",), 4, _bump("key", 3)),
    "value_dim1": (("value",), 2, _bump("value", 1)),
    "key_rank": (("key",), 1, _drop_last_dim("key")),
    "value_rank": (("value",), 1, _drop_last_dim("value")),
    "drop_key": (("key", "value"), 1, _drop("key")),
    "drop_past_key": (("past_key",), 1, _drop("past_key")),
    "drop_past_value": (("past_value",), 1, _drop("past_value")),
    "past_key_rank": (("past_key",), 1, _drop_last_dim("past_key")),
    "past_value_batch": (("past_value",), 1, _bump("past_value", 0)),
    "past_key_heads": (("past_key",), 1, _bump("past_key", 1)),
    "past_value_length": (("past_value",), 1, _bump("past_value", 2)),
    "past_key_head_size": (("past_key",), 1, _bump("past_key", 3)),
    "past_value_head_size": (("past_value",), 1, _bump("past_value", 3)),
}


def _mutate(rng: random.Random, shapes: Shapes, tags: set[str]) -> None:
    """Apply one applicable mutation, tagged `mut_<name>`: first draw the input to break, then how."""
    applicable = [(needs[0], name) for name, (needs, rank, _) in MUTATIONS.items()
                  if all(n in shapes for n in needs) and len(shapes[needs[0]]) >= rank]
    targets = sorted({target for target, _ in applicable})
    target = rng.choices(targets, [3 if t.startswith("past") else 1 for t in targets])[0]  # past is rarer
    name = rng.choice([name for t, name in applicable if t == target])
    MUTATIONS[name][2](shapes)
    tags.add(f"mut_{name}")


def _frozen(shape: list[int] | None) -> Shape | None:
    """Return the shape as a tuple (None stays None)."""
    return None if shape is None else tuple(shape)
