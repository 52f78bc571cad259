"""What `attnws model` says to reserve: ORT's bound and the proven maxima, per node, per memory
pattern (`--pattern`) and in total (the peak under ORT's arena, the sum under a planner that keeps
every node's workspace alive together).

The proven maxima are checked against the specification itself: no runtime workspace of a shape
in the node's box (or the pattern's) exceeds them, and one shape (the witness) attains them."""

from __future__ import annotations

import itertools

import pytest

from attnws.spec.command_line import EXIT_OK, EXIT_REJECTED
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.spec.errors import UsageError
from attnws.spec.estimate import estimate_exact
from attnws.spec.hints import Geometry
from attnws.spec.mha.problem import MhaFormat
from attnws.spec.problem import Op
from attnws.spec.units import format_bytes

from .builders import run, save
from .test_mha_model import DECODER, DECODER_BOUNDS, dim_args

SELF = dict(op=Op.MHA, element_size=2, heads=2, head_size=8, qkv_bias=True, with_past=True, with_present=True,
            unidirectional=True)
CROSS = dict(op=Op.MHA, element_size=2, heads=2, head_size=8, qkv_bias=True, kv_seq=1500, mha_format=MhaFormat.CROSS)


def runtime(**dims) -> int:
    est = estimate_exact(Geometry(**dims))
    return est.total_workspace_bytes if est.ok else 0


def self_maximum(seqs, batches=range(1, 5), pasts=range(0, 25), kv=None) -> int:
    """The largest runtime workspace of the decoder's self attention over the box (B, S, P): its
    key is projected from the query's hidden states, so L = S in every run (with `kv`, L ranges
    over it apart from S, as a model layer blind to the graph would take it)."""
    return max(runtime(batch=b, seq=s, kv_seq=s if kv is None else l, past=p, **SELF)
               for b, s, l, p in itertools.product(batches, seqs, kv or [None], pasts))


@pytest.fixture(scope="module")
def decoder():
    return run(str(DECODER), *dim_args(DECODER_BOUNDS), "--policy", "tight", "--pattern", "decode:seq=1",
               "--pattern", "cached:past=1..4095", "--pattern", "long:seq=9..16")


def test_proven_maxima_per_node_are_the_specifications(decoder):
    checks = decoder.json["checks"]
    assert list(checks) == ["main/Attention_0", "main/Attention_1", "main/Attention_2"]  # Attention_3 is unavailable
    assert checks["main/Attention_2"]["shared_from"] == "main/Attention_0"
    cross_maximum = max(runtime(batch=b, seq=s, **CROSS) for b, s in itertools.product(range(1, 5), range(1, 9)))
    for path, flags, whole in (("main/Attention_0", SELF, self_maximum(range(1, 9))),
                               ("main/Attention_1", CROSS, cross_maximum)):
        tight = checks[path]["tight"]
        assert tight["method"] == "proven maximum" and tight["verdict"] == "PROVED"
        assert tight["tight_total_bytes"] == whole <= tight["ort_total_bytes"]
        witness = {k: v for k, v in tight["witness"].items()
                   if k in ("batch", "seq", "kv_seq", "past") and v is not None}
        assert runtime(**{**flags, **witness}) == whole  # attained


def test_a_pattern_has_its_own_proven_maximum_on_each_node(decoder):
    checks = decoder.json["checks"]
    decode = checks["main/Attention_0"]["patterns"]["decode"]
    assert decode["applies"] and decode["dims"] == {"seq": "1..1"}
    assert decode["result"]["verdict"] == "PROVED" and decode["result"]["details"]["witness"]["seq"] == 1
    assert decode["reserve_bytes"] == self_maximum([1]) < checks["main/Attention_0"]["tight"]["tight_total_bytes"]
    cross = checks["main/Attention_1"]["patterns"]["decode"]
    assert cross["reserve_bytes"] == max(runtime(batch=b, seq=1, **CROSS) for b in range(1, 5))
    cached = checks["main/Attention_0"]["patterns"]["cached"]
    assert cached["dims"] == {"past": "1..24"}  # clipped to the node's past 0..24
    assert cached["reserve_bytes"] == self_maximum(range(1, 9), pasts=range(1, 25))


def test_the_key_length_is_read_from_the_graph_so_decode_is_not_loose(decoder):
    """The self attention's key [B, L, D] is projected from the query's hidden states: the graph
    keeps L = S, so the target ties them (kv_seq None) and decode (S = 1) has L = 1; taking L over
    1..8 apart from S would reserve more. The cross attention's L is the encoder's 1,500 (exact)."""
    checks = decoder.json["checks"]
    decode = checks["main/Attention_0"]["patterns"]["decode"]
    assert decode["result"]["details"]["witness"]["kv_seq"] is None  # the target's L = S
    assert decode["reserve_bytes"] == self_maximum([1]) < self_maximum([1], kv=range(1, 9))
    assert checks["main/Attention_1"]["patterns"]["decode"]["result"]["details"]["witness"]["kv_seq"] == 1500


def test_a_pattern_that_does_not_apply_says_why_and_counts_the_whole_maximum(decoder):
    checks = decoder.json["checks"]
    cached = checks["main/Attention_1"]["patterns"]["cached"]
    assert not cached["applies"] and cached["result"] is None
    assert cached["reason"] == "the node has no past_key / past_value (no cache)"
    assert cached["reserve_bytes"] == checks["main/Attention_1"]["tight"]["tight_total_bytes"]
    long = checks["main/Attention_0"]["patterns"]["long"]
    assert not long["applies"] and long["reason"] == ("seq 9..16 is not inside the node's 1..8: the pattern misses the "
                                                   "node's S")
    assert "    cached  does not apply: the node has no past_key / past_value (no cache); the node's whole " \
           "reservation 385,024 B counts for it" in decoder.text


def test_totals_give_peak_and_sum_for_ort_the_proven_maxima_and_each_pattern(decoder):
    doc, checks = decoder.json, decoder.json["checks"].values()
    sized = [n["estimate"]["total_workspace_bytes"] for n in doc["nodes"] if n["estimate"]["status"] == "ok"]
    proven = [c["tight"]["tight_total_bytes"] for c in checks]
    assert doc["totals"]["ort"] == {"peak": max(sized), "sum": sum(sized)}
    assert doc["totals"]["proven"] == {"peak": max(proven), "sum": sum(proven)}
    for name in ("decode", "cached", "long"):
        values = [c["patterns"][name]["reserve_bytes"] for c in checks]
        assert doc["totals"]["patterns"][name] == {"peak": max(values), "sum": sum(values)}
    assert doc["totals"]["patterns"]["long"] == doc["totals"]["proven"]  # applies nowhere
    table = decoder.text[decoder.text.index("model totals"):].splitlines()
    assert table[1:3] == ["  peak: what ORT's arena needs, reusing one workspace as the nodes run one after another",
                          "  sum:  what a planner needs that keeps every node's workspace alive together"]
    assert table[-5].split() == ["Level-1", "bound", *format_bytes(max(sized)).split(),
                                 *format_bytes(sum(sized)).split()]
    assert table[-4].startswith("  proven maximum  ") and table[-3].startswith("  pattern decode  ")
    assert decoder.exit_code == EXIT_REJECTED  # Attention_3 (output_qk) is not sized


def test_node_blocks_print_the_proven_maximum_and_the_patterns(decoder):
    text = decoder.text
    assert "  tight policy: reserve 3,072 B, the proven maximum over every valid shape, needed at B=4 S=8" in text
    assert "  memory patterns (each its proven maximum over the pattern's shapes of this node; attnws's root " \
           "11,264 B):" in text
    decode = self_maximum([1])
    assert f"    decode  reserve {format_bytes(decode)}, {11_264 / decode:.1f}x below attnws's (seq 1..1; needed at " \
           "B=4 S=1" in text
    assert text.splitlines()[0].endswith("(385,024 B and 391,168 B by their proven maxima)")
    assert ("    cached  reserve 3,072 B, 3.7x below attnws's (past 1..24 (clipped to the node's dimensions); "
            "needed at") in text


def test_a_pattern_alone_runs_the_solver(tmp_path):
    path = save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), tmp_path)
    result = run(path, "--dim", "batch=4", "--dim", "seq=8", "--pattern", "short:seq=1..4")
    assert result.exit_code == EXIT_OK
    doc = result.json
    assert doc["totals"]["proven"] is not None and set(doc["totals"]["patterns"]) == {"short"}
    check = doc["checks"]["main/attention_0"]
    assert check["tight"]["method"] == "proven maximum" and check["patterns"]["short"]["result"]["verdict"] == "PROVED"
    assert check["patterns"]["short"]["reserve_bytes"] <= check["tight"]["tight_total_bytes"]


def test_the_lead_line_gives_the_proven_peak_and_sum_beside_orts(tmp_path):
    path = save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), tmp_path)
    result = run(path, "--dim", "batch=4", "--dim", "seq=8", "--policy", "tight", "--sm", "90")
    t = result.json["totals"]
    assert 0 < t["proven"]["peak"] < t["ort"]["peak"] and t["proven"]["sum"] == 2 * t["proven"]["peak"]
    assert result.text.splitlines()[0] == (
        f"reserve {format_bytes(t['proven']['peak'])} for attention workspace, the proven maximum (ORT's bound "
        f"{format_bytes(t['ort']['peak'])}): the peak, the largest node's, when ORT's arena reuses one workspace as "
        f"the nodes run one after another; {format_bytes(t['proven']['sum'])} (ORT's bound "
        f"{format_bytes(t['ort']['sum'])}), the sum, if a planner keeps every node's workspace alive together")


@pytest.mark.parametrize("argv,message", [
    (["--pattern", "decode"], "expected NAME:DIM=RANGE"),
    (["--pattern", "decode:heads=1"], "'heads' is not a dimension a pattern sets"),
    (["--pattern", "decode:seq=1", "--pattern", "decode:seq=2"], "the name 'decode' is given twice"),
    (["--pattern", "decode:seq=5..2"], "range 5..2 must satisfy"),
])
def test_malformed_patterns_are_usage_errors(argv, message, tmp_path):
    path = save(packed_encoder(EncoderSpec(layers=1, hidden=64, heads=4, ffn=64)), tmp_path)
    with pytest.raises(UsageError, match=message):
        run(path, "--dim", "batch=4", "--dim", "seq=8", *argv)
