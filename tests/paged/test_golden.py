"""Replay ONNX Runtime 1.31.1's own PagedAttention CUDA test configurations against attnws.

The configurations are `tests/paged/golden_configs.json` (`docs/research/paged-tests.md` explains
every key): 289 from `test_paged_attention.py` (file "py"), 107 from
`test_paged_attention_int4.py` ("int4") and 55 from `paged_attention_op_test.cc` ("cc").

Each configuration becomes the node ORT's test builds: the input shapes it feeds, by schema name,
and its attributes, with the step's lengths, all through `attnws.spec.paged.builder
.build_paged_problem`. Then:

- where ORT's test expects a failure, the builder must raise `InvalidArgument` whose text contains
  ORT's expected text (or, for an error ORT raises at dispatch or on the route it picked, the shared
  `dispatch` must say it
  and its failure text must contain it);
- where ORT's test expects success, the builder must build and the shared `dispatch` must pick a
  backend under the configuration's device, `sdpa_kernel` provider option and environment;
  where the test asserts its dispatch line (`backend_asserted`), the backend must be the one the
  test asserts (ORT's backend names mapped to `Backend` members in `EXPECTED`).

How a configuration becomes a step (`runs_of`):

- lengths: the explicit `query_lengths` / `past_lengths`; where ORT's harness draws them with
  torch.randint (null in the JSON), every sequence sits at the harness bound: `max_query_len` S
  new tokens after `total_sequence_length - S` past ones (so T = B * S tokens and L = the total
  length). The draws are order-dependent CUDA RNG and cannot be reproduced here; the bound keeps
  S, L and T's relation to B (decode-shaped or not) what the harness sizes for.
- `attention_metadata`: absent, "rule" (the harness passes the exact [max(new), max(past+new)],
  shape 2) or the given vector, whose values are passed as they are (the builder's contract).
- a local window drawn by the unseeded `random.randint(1, T - 1)` is replayed at both ends.
- CUDA-graph tests replay every run of `replay_past_lengths`.
- device: the compute capability the test gates on (`min_sm`: 89 / 90 where it says so), sm80
  (A100: every CUDA class runs there) where it gates on less or nothing, sm90 for the cuDNN
  tests (cuDNN paged SDPA needs sm >= 90: on an older GPU the positive ones skip themselves and
  the negative ones hold trivially), and sm89 for fp8 XQA asserted without a gate.

Skipped, each with its reason and counted: the JSON's `not_run` matrices, the configurations with a
`release_note` (they rely on texts or kernels the 1.31.1 release lacks), and `UNEXPRESSIBLE`
(what the builder's API cannot state; `test_unexpressible_set_is_exactly_the_named_list`
recomputes it). Where attnws disagrees with ORT's test and the cause is an attnws bug, the case
is in `KNOWN_DISAGREEMENTS` and marked xfail(strict=True), so a fix turns it into a failure to
update; a disagreement whose cause is not settled is left failing. `ORT_TEST_DEFECTS` are ORT
tests whose literal expectation contradicts their own twin: replayed under the environment they
mean. `test_planted_*` show that the replay's checking function catches planted bugs (and keep
one known blind spot of ORT's assertions visible: Flash's minimum page from below).
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from attnws.spec.dispatch import dispatch
from attnws.spec.errors import InvalidArgument
from attnws.spec.options import RuntimeConfig
from attnws.spec.paged import builder as paged_builder
from attnws.spec.paged import dispatch as paged_dispatch
from attnws.spec.paged.builder import build_paged_problem
from attnws.spec.problem import Backend

GOLDEN: dict = json.loads(Path(__file__).with_name("golden_configs.json").read_text())
CONFIGS: list[dict] = GOLDEN["configs"]
NOT_RUN: list[dict] = GOLDEN["not_run"]


class Unexpressible(Exception):
    """The configuration states something attnws's builder or RuntimeConfig cannot represent."""


# -- ORT's backend names (the `SdpaKernel=` of its dispatch line) as attnws backends --------------
# ORT prints SdpaKernel=XQA for one-token and speculative (2..8 tokens) paged XQA alike.
XQA_ANY = frozenset({Backend.XQA, Backend.XQA_SPEC})
FLASH, MEA, DECODE, CUDNN = (frozenset({b}) for b in (Backend.FLASH, Backend.MEA, Backend.PAGED_DECODE,
                                                       Backend.CUDNN))
# expected_backend -> (allowed backends or None for any, excluded backends)
EXPECTED: dict[str, tuple[frozenset | None, frozenset]] = {
    "XQA": (XQA_ANY, frozenset()),
    "DECODER_ATTENTION": (DECODE, frozenset()),
    "EFFICIENT_ATTENTION": (MEA, frozenset()),
    "FLASH_ATTENTION": (FLASH, frozenset()),
    "CUDNN_FLASH_ATTENTION": (CUDNN, frozenset()),
    "not XQA": (None, XQA_ANY),
    "not CUDNN_FLASH_ATTENTION": (None, CUDNN),
    "FLASH_ATTENTION, EFFICIENT_ATTENTION or DECODER_ATTENTION (not XQA)": (FLASH | MEA | DECODE, XQA_ANY),
    "FLASH_ATTENTION or DECODER_ATTENTION (not XQA)": (FLASH | DECODE, XQA_ANY),
    # the C++ test asserts FLASH_ATTENTION when its XQA probe fails; attnws takes the probe to pass
    "XQA (FLASH_ATTENTION when the probe fails)": (XQA_ANY | FLASH, frozenset()),
}

# -- element types: the cache tensor's type (uint8 + k/v_cache_dtype 'int4' for "int4") as the
# builder's `cache_type` (None: the query's own type) -------------------------------------------
CACHE_TYPES = {"float16": None, "bfloat16": None, "int8": "int8", "float8e4m3fn": "fp8", "int4": "int4"}
# k_cache_dtype / v_cache_dtype values ORT accepts (paged-attention.md §1); others are rejected by
# the attribute check, which the builder makes of its `cache_type`.
ORT_CACHE_DTYPES = ("", "float16", "bfloat16", "int8", "float8e4m3fn", "int4", "float4e2m1")

# -- configurations the builder / RuntimeConfig cannot state (index -> why) ------------------------
_PER_SIDE = ("the builder takes one cache type (the cache tensor's element type, 'int4' for a uint8 cache "
             "with k/v_cache_dtype int4); a per-side cache-dtype attribute checked against the tensor's element "
             "type cannot be stated")
UNEXPRESSIBLE: dict[int, str] = {
    109: _PER_SIDE + " (k_cache_dtype 'int4' on an int8 cache)",
    110: _PER_SIDE + " (v_cache_dtype 'int4' on an int8 cache)",
    111: _PER_SIDE + " (k_cache_dtype 'float16' on an int8 cache)",
    112: _PER_SIDE + " (v_cache_dtype 'float16' on an int8 cache)",
    282: "the builder takes inputs only: the presence of the value_cache_out output cannot be stated",
    324: _PER_SIDE + " (k_cache_dtype '' on a uint8 cache)",
    325: _PER_SIDE + " (k_cache_dtype 'float4e2m1' on a uint8 cache)",
    326: _PER_SIDE + " (v_cache_dtype '' on a uint8 cache)",
    327: _PER_SIDE + " (v_cache_dtype 'float4e2m1' on a uint8 cache)",
    441: "ORT_TEST_ONLY_PAGED_ATTENTION_XQA_SHARED_MEMORY_LIMIT=0 forces native XQA's shared-memory probe to fail; "
         "attnws takes that probe to pass (dispatch.py docstring) and RuntimeConfig refuses the variable",
}

# -- disagreements that are attnws bugs: xfail(strict=True) (index -> what and why) ----------------
KNOWN_DISAGREEMENTS: dict[int, str] = {}  # none left: each one found was fixed in the spec

# -- ORT tests whose literal expectation contradicts ORT's own twin test (index -> why, the
# environment the test means): replayed under the meant environment. The literal reading is
# checked to contradict the twin in `test_ort_test_defects_contradict_their_twins`.
ORT_TEST_DEFECTS: dict[int, tuple[str, int, dict[str, str]]] = {
    index: ("the test passes per_channel_xqa=False to its helper, which never applies it, so as written it runs "
            "under the default ORT_ENABLE_XQA_PER_CHANNEL_KV=1 and asserts no XQA, while its twin asserts XQA for "
            "the same node and environment; replayed with ORT_ENABLE_XQA_PER_CHANNEL_KV=0, as the test means",
            twin, {"ORT_ENABLE_XQA_PER_CHANNEL_KV": "0"})
    for index, twin in ((201, 199), (202, 200))
}


# -- building the node ---------------------------------------------------------------------------
def _lengths(c: dict, past_override: list[int] | None = None) -> tuple[list[int], list[int]]:
    """(new tokens, past tokens) per sequence; harness bounds where the test draws them."""
    b = c["batch_size"]
    q, p = c["query_lengths"], c["past_lengths"]
    tiled_q = re.search(r"query_lengths = \[(\d+)\]\*(\d+)", c["rule"])
    tiled_p = re.search(r"past_lengths = \[(\d+)\]\*(\d+)", c["rule"])
    if q is None and tiled_q:
        q = [int(tiled_q.group(1))] * int(tiled_q.group(2))
    if p is None and tiled_p:
        p = [int(tiled_p.group(1))] * int(tiled_p.group(2))
    if q is None:
        q = [c["max_query_len"]] * b
    if p is None:
        p = [c["total_sequence_length"] - c["max_query_len"]] * b
    if past_override is not None:
        p = list(past_override)
    assert len(q) == len(p) == b, (c["test"], len(q), len(p), b)
    return q, p


def _windows(c: dict) -> list[int]:
    """The local window; both ends of random.randint(1, T - 1) where the test draws it unseeded."""
    if c["local_window_size"] is not None:
        return [c["local_window_size"]]
    drawn = re.search(r"local_window_size: random\.randint\((\d+), (\d+)-(\d+)\)", c["rule"])
    assert drawn, c["rule"]
    low, high = int(drawn.group(1)), int(drawn.group(2)) - int(drawn.group(3))
    return [low, high]


def _cache_type(c: dict) -> str | None:
    cache_type = CACHE_TYPES[c["cache_dtype"]]
    tensor = c["cache_dtype"]
    for side, value in c.get("attributes", {}).items():
        if value == tensor or (value == "" and tensor != "int4"):
            continue  # names the tensor's own type (or '' = use it)
        if value not in ORT_CACHE_DTYPES:
            cache_type = value  # an unknown dtype string: the builder's attribute check
            continue
        raise Unexpressible(f"{side} = {value!r} on a {tensor} cache: {_PER_SIDE}")
    return cache_type


def _rotary_width(c: dict, h: int) -> int:
    """cos/sin width (rotary_dim / 2): the MLA rope dimension (stated, or H - Hv = H - kv_lora_rank
    under the latent layout), the width a note states, else the whole head."""
    if c.get("qk_rope_head_dim"):
        return c["qk_rope_head_dim"] // 2
    if c["kv_cache_layout"] == "LATENT" and c["v_head_size"]:
        return (h - c["v_head_size"]) // 2
    stated = re.search(r"cos/sin width (\d+)", c.get("note", ""))
    return int(stated.group(1)) if stated else h // 2


def node_of(c: dict, past_override: list[int] | None = None, window: int | None = None) -> dict[str, Any]:
    """The builder keywords of the node ORT's test runs (shapes by input name, attributes, lengths)."""
    variation = c.get("graph_variation", "")
    if "value_cache_out output present" == variation:
        raise Unexpressible("the presence of the value_cache_out output cannot be stated")
    n, nk, h, bs = c["num_heads"], c["kv_num_heads"], c["head_size"], c["block_size"]
    latent = c["kv_cache_layout"] == "LATENT"
    q, p = _lengths(c, past_override)
    t = sum(q)
    kv = [a + b for a, b in zip(q, p)]
    cache_type = _cache_type(c)
    cache = [c["num_blocks"], bs, nk, (h + 1) // 2 if cache_type == "int4" else h]
    table = [len(c["block_table"]), len(c["block_table"][0])] if "block_table" in c else \
        [c["batch_size"], c["max_blocks_per_sequence"]]
    shapes: dict[str, Any] = dict(key_cache=list(cache), cumulative_sequence_length=[c["batch_size"] + 1],
                                  past_seqlens=[c["batch_size"]], block_table=table)
    if latent:
        shapes.update(query=[t, n * h], key=[t, nk * h])
        if variation == "value input present":
            shapes.update(value=[t, nk * h])
        if variation == "value_cache input present":
            shapes.update(value_cache=list(cache))
    elif c["packed_qkv"]:
        shapes.update(query=[t, (n + 2 * nk) * h], value_cache=list(cache))
    else:
        shapes.update(query=[t, n * h], key=[t, nk * h], value=[t, nk * h], value_cache=list(cache))
    doubled = re.search(r"(key|value)_cache last dimension doubled", c.get("note", ""))
    if doubled:
        shapes[f"{doubled.group(1)}_cache"][3] *= 2
    if c["do_rotary"]:
        rows = max(max(kv), table[1] * bs)
        shapes.update(cos_cache=[rows, _rotary_width(c, h)], sin_cache=[rows, _rotary_width(c, h)])
    if c["slot_mapping"]:
        shapes.update(slot_mapping=[t])
    if c["head_sink"]:
        shapes.update(head_sink=[n])
    if c["qk_norm"]:
        shapes.update(q_norm_weight=[h], k_norm_weight=[h])
    k_quant = c["quant_type"]
    v_quant = "NONE" if latent else c.get("v_quant_type", k_quant)
    scale_shape = {"PER_TENSOR": [1], "PER_CHANNEL": [nk, 1, h]}
    if k_quant != "NONE":
        shapes.update(k_scale=scale_shape[k_quant])
    if v_quant != "NONE":
        shapes.update(v_scale=scale_shape[v_quant])
    metadata = c["attention_metadata"]
    lower = 0
    if metadata is None:
        s, length = max(q), max(kv)
    else:
        vector = [max(q), max(kv)] if metadata == "rule" else list(metadata)
        shapes.update(attention_metadata=[len(vector)])
        s, length = vector[0], vector[1]
        lower = vector[2] if len(vector) == 3 else 0
    return dict(
        **shapes, num_heads=n, kv_num_heads=nk, max_query_len=s, max_kv_len=length, kv_lower_bound=lower,
        scale=c.get("scale"), softcap=c["softcap"], local_window_size=c["local_window_size"] if window is None
        else window, is_causal=int(c["is_causal"]), do_rotary=int(c["do_rotary"]),
        rotary_offset=c.get("rotary_offset") or 0, kv_cache_layout=c["kv_cache_layout"],
        v_head_size=c["v_head_size"] or 0, cache_type=cache_type, k_quant_type=k_quant, v_quant_type=v_quant,
        is_bf16=c["dtype"] == "bfloat16",
    )


def runs_of(c: dict) -> list[tuple[str, dict[str, Any]]]:
    """(label, builder keywords) for every run the test makes: each CUDA-graph replay and each end of
    an unseeded random window."""
    pasts = c.get("replay_past_lengths") or [None]
    runs = []
    for r, past in enumerate(pasts):
        for window in _windows(c):
            label = f"run {r} past {past}" if past is not None else "run"
            if c["local_window_size"] is None:
                label += f" window {window}"
            runs.append((label, node_of(c, past, window)))
    return runs


def device_sm(c: dict) -> int:
    """The device's compute capability: the test's gate, at least sm80; sm90 for the cuDNN tests;
    sm89 for fp8 XQA asserted without a gate (paged fp8 XQA exists on sm89 and sm >= 90 only)."""
    sm = c["min_sm"] if (c["min_sm"] or 0) >= 80 else 80
    expected = c["expected_backend"] or ""
    if "CUDNN" in expected:
        return max(sm, 90)
    if c["cache_dtype"] == "float8e4m3fn" and expected.startswith("XQA"):
        return max(sm, 89)
    return sm


def config_of(c: dict, env: dict[str, str] | None = None) -> RuntimeConfig:
    """The runtime configuration the test runs under: device, sdpa_kernel and environment."""
    sdpa = int((c.get("provider_options") or {}).get("sdpa_kernel", 0))
    try:
        return RuntimeConfig.make(sm=device_sm(c), sdpa_kernel=sdpa, env={**c["env"], **(env or {})})
    except InvalidArgument as error:
        raise Unexpressible(f"RuntimeConfig refuses the test's environment: {error}") from None


# -- the check ------------------------------------------------------------------------------------
def replay(c: dict, env: dict[str, str] | None = None) -> list[str]:
    """Replay one configuration (`env`: variables set over the test's own); return every
    disagreement with ORT's test (empty: attnws agrees). Raise Unexpressible where the
    configuration cannot be stated."""
    config = config_of(c, env)
    runs = runs_of(c)
    error = c["expects_error"]
    asserted = bool(c.get("backend_asserted"))
    expected = c["expected_backend"]
    if asserted and expected not in EXPECTED:
        return [f"unknown expected backend {expected!r}"]
    found = []
    for label, node in runs:
        try:
            problem = build_paged_problem(**node)
        except InvalidArgument as raised:
            if error is not None and error in str(raised):
                continue
            want = f"an error containing {error!r}" if error is not None else "success"
            found.append(f"{label}: ORT's test expects {want}; the builder raises: {raised}")
            continue
        outcome = dispatch(problem, config)  # the shared dispatch: the cascade, then the route's run-time failures
        backend = outcome.backends[0] if outcome.backends else None
        if error is not None:
            if error in outcome.failure:
                continue
            found.append(f"{label}: ORT's test expects an error containing {error!r}; attnws builds the node and "
                         f"selects {backend} (failure: {outcome.failure!r})")
            continue
        if backend is None or outcome.failure:
            found.append(f"{label}: ORT's test runs the node; attnws: {outcome.failure}")
            continue
        if not asserted:
            continue
        allowed, excluded = EXPECTED[expected]
        if (allowed is not None and backend not in allowed) or backend in excluded:
            skipped = "; ".join(f"{b.value}: {why}" for b, why in outcome.skipped)
            found.append(f"{label}: ORT's test asserts {expected}; attnws selects {backend.value} "
                         f"(passed over: {skipped})")
    return found


def skip_reason(index: int, c: dict) -> str | None:
    if "release_note" in c:
        return f"relies on what the 1.31.1 release lacks: {c['release_note']}"
    if index in UNEXPRESSIBLE:
        return f"unexpressible: {UNEXPRESSIBLE[index]}"
    return None


def case_id(index: int, c: dict) -> str:
    name = c["test"].split(".", 1)[-1] if c["file"] != "cc" else c["test"]
    name = re.sub(r"[^A-Za-z0-9_.=,+-]+", "_", name).strip("_")
    return f"{c['file']}-{index:03d}-{name[:70]}"


def _param(index: int, c: dict) -> Any:
    marks = []
    if index in KNOWN_DISAGREEMENTS:
        marks.append(pytest.mark.xfail(strict=True, reason=f"attnws bug: {KNOWN_DISAGREEMENTS[index]}"))
    return pytest.param(index, c, id=case_id(index, c), marks=marks)


@pytest.mark.parametrize(("index", "c"), [_param(i, c) for i, c in enumerate(CONFIGS)])
def test_ort_paged_config(index: int, c: dict) -> None:
    reason = skip_reason(index, c)
    if reason is not None:
        pytest.skip(reason)
    found = replay(c, ORT_TEST_DEFECTS[index][2] if index in ORT_TEST_DEFECTS else None)
    assert not found, "\n".join(found)


def _matrix_size(entry: dict) -> int:
    return math.prod(len(values) for values in entry["product"].values())


@pytest.mark.parametrize("entry", NOT_RUN, ids=[f"not_run-{i}" for i in range(len(NOT_RUN))])
def test_not_run_matrix(entry: dict) -> None:
    """ORT's matrices that never run: skipped, with their size, never dropped silently."""
    pytest.skip(f"{entry['test']}: {_matrix_size(entry)} combinations never run: {entry['reason']}")


# -- the lists above cannot drift ------------------------------------------------------------------
def test_counts_match_the_notes() -> None:
    counts = dict(re.findall(r"(\w+)=(\d+)", GOLDEN["notes"].split("Counts:")[1]))
    assert len(CONFIGS) == int(counts["total"]) == 451
    for name in ("py", "int4", "cc"):
        assert sum(c["file"] == name for c in CONFIGS) == int(counts[name])


def test_unexpressible_set_is_exactly_the_named_list() -> None:
    """Recompute which configurations raise Unexpressible; it must be UNEXPRESSIBLE, no more."""
    raised = set()
    for index, c in enumerate(CONFIGS):
        try:
            config_of(c)
            runs_of(c)
        except Unexpressible:
            raised.add(index)
    assert raised == set(UNEXPRESSIBLE)


def test_every_expected_backend_is_mapped() -> None:
    assert {c["expected_backend"] for c in CONFIGS} - {None} == set(EXPECTED)


def test_known_disagreements_are_not_skipped() -> None:
    assert all(skip_reason(i, CONFIGS[i]) is None for i in KNOWN_DISAGREEMENTS)
    assert not set(KNOWN_DISAGREEMENTS) & set(ORT_TEST_DEFECTS)


@pytest.mark.parametrize("index", sorted(ORT_TEST_DEFECTS))
def test_ort_test_defects_contradict_their_twins(index: int) -> None:
    """As written, the test asserts no XQA where its twin (same node, same environment) asserts
    XQA: attnws agrees with the twin, so the literal reading disagrees."""
    c, (_, twin, _) = CONFIGS[index], ORT_TEST_DEFECTS[index]
    same = ("batch_size", "num_heads", "kv_num_heads", "head_size", "block_size", "cache_dtype", "quant_type", "env")
    assert all(c[key] == CONFIGS[twin][key] for key in same)
    assert replay(CONFIGS[twin]) == []
    assert any("asserts not XQA; attnws selects xqa" in line for line in replay(c))


# -- planted bugs: the checking function must catch each ---------------------------------------------
def _replayable() -> list[tuple[int, dict]]:
    return [(i, c) for i, c in enumerate(CONFIGS) if skip_reason(i, c) is None and i not in KNOWN_DISAGREEMENTS]


def _disagreeing() -> dict[int, list[str]]:
    return {i: found for i, c in _replayable()
            if (found := replay(c, ORT_TEST_DEFECTS[i][2] if i in ORT_TEST_DEFECTS else None))}


@pytest.fixture
def baseline() -> set[int]:
    """The configurations that disagree before any bug is planted (reported per configuration by
    test_ort_paged_config): a planted bug must add to them."""
    return set(_disagreeing())


def test_planted_flash_min_block_16_is_invisible_to_ort_assertions(monkeypatch: pytest.MonkeyPatch,
                                                                    baseline: set[int]) -> None:
    """A known blind spot, kept visible: with Flash's minimum page planted at 16 for every head
    size, Flash takes the small-page steps (blocks 16..128 at H 64) that ORT's tests run on MEA or
    the decode kernel, but no ORT configuration asserts a backend there (they force one with
    sdpa_kernel, or only comment on it: 'Flash cannot address these pages', not asserted). The
    replay's verdicts do not change; the selections do. If a golden configuration starts to pin
    the rule, this test fails: move the plant to the caught list."""
    building = [(i, c) for i, c in _replayable() if c["expects_error"] is None]
    before = {i: _selections(c) for i, c in building}
    monkeypatch.setattr(paged_dispatch, "flash_min_block", lambda d, head_size: 16)
    assert set(_disagreeing()) - baseline == set()
    after = {i: _selections(c) for i, c in building}
    changed = {i for i in before if before[i] != after[i]}
    assert {62, 63, 64} <= changed  # test_small_block_size[16/32/64]: MEA before, Flash after
    assert all(set(after[i]) == {Backend.FLASH} for i in (62, 63, 64))


def _selections(c: dict) -> list[Backend | None]:
    config = config_of(c)
    return [(dispatch(build_paged_problem(**node), config).backends or (None,))[0] for _, node in runs_of(c)]


def test_planted_flash_min_block_512_is_caught(monkeypatch: pytest.MonkeyPatch, baseline: set[int]) -> None:
    monkeypatch.setattr(paged_dispatch, "flash_min_block", lambda d, head_size: 512)
    caught = set(_disagreeing()) - baseline
    assert {430, 432, 439} <= set(caught)  # the C++ Flash split-KV tests, Flash asserted


def test_planted_xqa_group_six_dropped_is_caught(monkeypatch: pytest.MonkeyPatch, baseline: set[int]) -> None:
    monkeypatch.setattr(paged_dispatch, "XQA_GROUPS", (4, 8, 16, 32))
    caught = set(_disagreeing()) - baseline
    assert {175, 177, 399} <= set(caught)  # GqaGroupSize=6 dispatch asserted


def test_planted_decode_gate_closed_is_caught(monkeypatch: pytest.MonkeyPatch, baseline: set[int]) -> None:
    """A route that vanishes is caught even where the test only forces its backend (not asserted)."""
    monkeypatch.setattr(paged_dispatch, "paged_decode_gates",
                        lambda d, p, config: [paged_dispatch._gate("planted", False, "planted")])
    caught = {i: lines for i, lines in _disagreeing().items() if i not in baseline}
    assert {116, 131, 145} <= set(caught)  # sdpa_kernel 512, backend_asserted false
    assert all("ORT fails at run time" in line for line in caught[116])


def test_planted_builder_bugs_are_caught(monkeypatch: pytest.MonkeyPatch, baseline: set[int]) -> None:
    """A builder that refuses a valid block size, or misses ORT's metadata-shape check."""
    monkeypatch.setattr(paged_builder, "BLOCK_SIZES", tuple(2**k for k in range(5, 31)))
    assert {62, 100, 263, 289} <= set(_disagreeing()) - baseline  # block size 16 must build
    monkeypatch.undo()
    monkeypatch.setattr(paged_builder, "_check_metadata", lambda metadata, attention_metadata: None)
    assert 429 in set(_disagreeing()) - baseline  # 'must have shape (2) or (3)' expected


def test_planted_expectation_swaps_are_caught() -> None:
    """A swapped expected message, a swapped asserted backend, and an error expected on a
    configuration that builds: each must come back as a disagreement."""
    message = copy.deepcopy(CONFIGS[427])  # expects 'must not exceed max_kv_len_bound'
    message["expects_error"] = CONFIGS[426]["expects_error"]  # 'entries must be non-negative'
    assert replay(message)
    backend = copy.deepcopy(CONFIGS[175])  # XQA asserted
    backend["expected_backend"] = "DECODER_ATTENTION"
    assert replay(backend)
    unexpected = copy.deepcopy(CONFIGS[8])
    unexpected["expects_error"] = "head_sink"
    assert replay(unexpected)
    not_asserted = copy.deepcopy(backend)
    not_asserted["backend_asserted"] = False  # a target only: any route passes
    assert replay(not_asserted) == []
