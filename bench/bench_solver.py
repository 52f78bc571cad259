"""Solver cost against exhaustive enumeration, and proof time as the sequence bound grows.

Run: python3 bench/bench_solver.py [exhaustive] [growth] [pairs] [random] [second] [mha] [gqa] [paged]
(not part of pytest; all eight by default). Prints the numbers of this run:
1. safe_bound by Z3 versus `estimate_exact` at every (B, S) of a small box (T = 1 fixed so the
   box is enumerable), and the ratio exhaustive / solver;
2. all theorems on a PMHA fp16 target with S up to 512, 4096 and 65535, and each time's ratio to
   the first;
3. the non-monotonic pair search on every committed target and on a PA attention-bias target:
   seconds per minimal pair (threshold pairs are asked for first);
4. `--theorem all` on 200 seeded random targets (op, dtype, formats, biases, sm 75-90, option
   modes, S up to 4096): the fraction decided (no UNKNOWN), the solver's time, and the time an
   exhaustive enumeration of the same boxes would take, extrapolated from the measured rate of
   `estimate_exact` on a sample of their shapes (printed as such);
5. with `--second-opinion cvc5` on every committed target: the fraction of the decided Z3 queries
   cvc5 decides (the same answer) within its resource limit, and the time ratio cvc5 / Z3;
6. `--theorem all` on 100 seeded random MultiHeadAttention targets (formats, masks, cache, bias,
   direction, S and L up to 4096, P up to 2048, sm 75-90, option modes): the fraction decided,
   the solver's time per target, and how many targets refute each finding;
7. `--theorem all` on 100 seeded random GroupQueryAttention targets (group sizes, head sizes, caches
   of 64 to 4096 rows, windows and windowed caches, packed QKV, bf16, rotary, softcap, smooth
   softmax, head sinks, quantized caches, sm 75-120, the session option set or not, XQA / fast
   decode / cuDNN switched off or on): the fraction decided, the solver's time per target, and how
   many targets refute each theorem;
8. `--theorem all` on 100 seeded random PagedAttention targets (group and head sizes, block sizes
   16 to 256, caches of up to 16,384 keys, unquantized / int8 / fp8 / int4 caches, rotary, head
   sinks, attention_metadata given or not, sm 75-90, XQA / paged decode / native XQA switched):
   the fraction decided, the solver's time per target, and how many targets refute each theorem.
"""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from attnws.solver.counterexamples import nonmonotonic_pairs
from attnws.solver.gateway import Limits, Verdict
from attnws.solver.ledger import committed_targets
from attnws.solver.results import context
from attnws.solver.session import Session
from attnws.solver.theorems import THEOREMS, prove_target
from attnws.spec.estimate import estimate_exact, estimate_geometry
from attnws.spec.errors import WorkspaceError
from attnws.spec.target import Target, target_from_dict

PA_ATTENTION_BIAS = {"name": "pa-fp16-attn-bias-sm80", "op": "pa", "dtype": "fp16", "attn_bias": True, "sm": 80,
                     "batch": "1..8", "seq": "1..128", "heads": "1..1", "head_size": "64..64", "tokens": "1..1024"}


def exhaustive_vs_solver(batch: int, seq: int) -> None:
    target = target_from_dict({"name": f"bench-b{batch}-s{seq}", "op": "pmha", "dtype": "fp32", "batch": f"1..{batch}",
                               "seq": f"1..{seq}", "tokens": "1..1", "heads": "12..12", "head_size": "64..64"})
    bound = estimate_geometry(target.max_geometry(), target.config).total_workspace_bytes
    start = time.perf_counter()
    worst = max(estimate_exact(target.geometry(batch=b, seq=s, heads=12, head_size=64, tokens=1),
                               target.config).total_workspace_bytes
                for b in range(1, batch + 1) for s in range(1, seq + 1))
    enumerated = time.perf_counter() - start
    start = time.perf_counter()
    result = THEOREMS["safe_bound"](context(target))
    solved = time.perf_counter() - start
    agree = (worst <= bound) == (result.verdict is Verdict.PROVED)
    print(f"B<={batch} S<={seq}: exhaustive {batch * seq} shapes {enumerated:.2f}s, Z3 {solved:.2f}s "
          f"({result.verdict.value}, agree={agree}), ratio {enumerated / solved:.1f}x")


def growth() -> None:
    first = None
    for seq in (512, 4096, 65535):
        target = target_from_dict({"name": f"bench-s{seq}", "op": "pmha", "dtype": "fp16", "batch": "1..32",
                                   "seq": f"1..{seq}", "heads": "12..12", "head_size": "64..64", "sm": 90})
        start = time.perf_counter()
        results = prove_target(target, names=list(THEOREMS))
        seconds = time.perf_counter() - start
        first = first or seconds
        verdicts = ",".join(f"{r.theorem}={r.verdict.value}" for r in results)
        print(f"S<={seq}: all theorems {seconds:.2f}s (x{seconds / first:.2f} of S<=512): {verdicts}")


def pair_times() -> None:
    targets = [*committed_targets(), target_from_dict(PA_ATTENTION_BIAS)]
    slowest = 0.0
    for target in targets:
        start = time.perf_counter()
        pairs, status = nonmonotonic_pairs(target, Session(target.name, Limits()))
        seconds = time.perf_counter() - start
        per_pair = seconds / max(len(pairs), 1)
        slowest = max(slowest, per_pair) if pairs else slowest
        print(f"pairs {target.name}: {len(pairs)} in {seconds:.2f}s ({per_pair:.2f}s per pair), {status.describe()}")
    print(f"pairs: slowest {slowest:.2f}s per minimal pair")


def random_target(rng: random.Random, index: int) -> Target:
    """Return a seeded random target: a box of shapes across every flag the spec models."""
    op = rng.choice(["pa", "pmha"])
    fmt = rng.choice(["packed", "separate"])
    head = rng.choice([8, 16, 24, 32, 40, 64, 80, 96, 128, 136, 160, 256])
    data = {"name": f"random-{index}", "op": op, "dtype": rng.choice(["fp16", "fp32"]),
            "batch": f"1..{rng.choice([1, 2, 4, 8, 32])}", "seq": f"1..{rng.choice([64, 128, 384, 512, 1024, 4096])}",
            "heads": f"{(n := rng.choice([1, 2, 3, 8, 12, 16]))}..{n}", "sm": rng.choice([75, 80, 86, 89, 90]),
            "head_size": f"{head}..{head}" if rng.random() < 0.7 else f"1..{head}",
            "sdpa_kernel": rng.choice([0, 0, 0, 1, 2, 3, 4, 16, 32 | 4]),
            "trt_runner": rng.choice(["auto", "auto", "available", "unknown"]),
            "attn_bias": rng.random() < 0.3}
    if data["attn_bias"]:
        data.update(attn_bias_broadcast_batch=rng.random() < 0.5, attn_bias_broadcast_heads=rng.random() < 0.5)
    if op == "pmha":
        data.update(format=fmt, qkv_bias=rng.random() < 0.4)
        if fmt == "separate" and rng.random() < 0.3:
            hv = rng.choice([8, 32, 64, 136])
            data["v_head_size"] = f"{hv}..{hv}"
    if rng.random() < 0.2:
        data["env"] = {rng.choice(["ORT_DISABLE_FLASH_ATTENTION", "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION",
                                   "ORT_DISABLE_FUSED_ATTENTION", "ORT_DISABLE_TRT_FLASH_ATTENTION"]): "1"}
    return target_from_dict(data)


def box_size(target: Target) -> int:
    """Return the number of shapes in the target's box (tokens 1..B*S for each B, S)."""
    heads = target.heads.hi - target.heads.lo + 1
    heads_sizes = (target.head_size.hi - target.head_size.lo + 1) * (target.hv.hi - target.hv.lo + 1 if
                                                                      target.v_head_size else 1)
    seq = range(target.seq.lo, target.seq.hi + 1)
    return heads * heads_sizes * sum(b * s for b in range(target.batch.lo, target.batch.hi + 1) for s in seq)


def enumeration_rate(target: Target, rng: random.Random, samples: int = 200) -> float:
    """Return the measured seconds per shape of `estimate_exact` on random shapes of the box."""
    start = time.perf_counter()
    for _ in range(samples):
        b, s = rng.randint(target.batch.lo, target.batch.hi), rng.randint(target.seq.lo, target.seq.hi)
        h = rng.randint(target.head_size.lo, target.head_size.hi)
        try:
            estimate_exact(target.geometry(batch=b, seq=s, heads=target.heads.hi, head_size=h,
                                           tokens=rng.randint(1, b * s)), target.config)
        except WorkspaceError:
            pass
    return (time.perf_counter() - start) / samples


def prove_timed(target: Target) -> tuple[list, float, str]:
    """Return every theorem's result on the target, the seconds they took, and "" when all were
    decided, else "name:undecided,theorems"."""
    start = time.perf_counter()
    results = prove_target(target, names=list(THEOREMS))
    seconds = time.perf_counter() - start
    undecided = [r.theorem for r in results if r.verdict is Verdict.UNKNOWN]
    return results, seconds, f"{target.name}:{','.join(undecided)}" if undecided else ""


def random_targets(count: int = 200, seed: int = 0) -> None:
    rng = random.Random(seed)
    solver_seconds = enumeration_seconds = 0.0
    undecided_names = []
    for index in range(count):
        target = random_target(rng, index)
        _, seconds, undecided = prove_timed(target)
        solver_seconds += seconds
        undecided_names += [undecided] if undecided else []
        enumeration_seconds += enumeration_rate(target, rng) * box_size(target)
    decided = count - len(undecided_names)
    print(f"random targets: {decided}/{count} decided = {decided / count:.1%}; solver {solver_seconds:.1f}s, "
          f"exhaustive enumeration (extrapolated from the measured rate) {enumeration_seconds:.3g}s, "
          f"ratio {enumeration_seconds / solver_seconds:.3g}x")
    for name in undecided_names:
        print(f"  undecided: {name}")


def random_mha_target(rng: random.Random, index: int) -> Target:
    """Return a seeded random MultiHeadAttention target across the flags its family models."""
    fmt = rng.choice(["separate", "separate", "cross", "packed_kv", "packed_qkv"])
    head = rng.choice([8, 16, 32, 40, 64, 80, 128, 136, 256])
    cache = fmt == "separate" and rng.random() < 0.4
    data = {"name": f"random-mha-{index}", "op": "mha", "dtype": rng.choice(["fp16", "fp32"]),
            "batch": f"1..{rng.choice([1, 2, 8, 32])}", "seq": f"1..{rng.choice([1, 64, 384, 512, 4096])}",
            "heads": f"{(n := rng.choice([1, 2, 8, 12, 16]))}..{n}", "sm": rng.choice([75, 80, 86, 89, 90]),
            "head_size": f"{head}..{head}" if rng.random() < 0.7 else f"1..{head}", "format": fmt,
            "mask": rng.choice(["none", "none", "1d_key_seq_len", "1d_key_seq_len_start", "2d_key_padding",
                                "3d_attention"]),
            "sdpa_kernel": rng.choice([0, 0, 0, 1, 2, 4, 8, 16, 64, 64 | 4]),
            "qkv_bias": fmt != "packed_kv" and rng.random() < 0.4, "unidirectional": rng.random() < 0.3,
            "attn_bias": rng.random() < 0.2, "with_present": cache}
    if fmt != "packed_qkv":
        data["kv_seq"] = f"1..{rng.choice([1, 128, 129, 1500, 4096])}"
    if cache and rng.random() < 0.7:
        data.update(with_past=True, past=f"0..{rng.choice([16, 512, 2048])}")
    if fmt == "separate" and rng.random() < 0.3:
        data["v_head_size"] = f"{(hv := rng.choice([8, 64, 136, 256]))}..{hv}"
    return target_from_dict(data)


def random_family_targets(label: str, make: Any, count: int, seed: int = 0) -> None:
    """`--theorem all` on `count` seeded targets `make(rng, index)` draws (a draw the builder refuses
    at its maxima, InvalidArgument, is no target): the fraction decided, the time, the refutations."""
    rng = random.Random(seed)
    total, refuted, undecided_names, proved = 0.0, {}, [], 0
    for index in range(count):
        try:
            target = make(rng, index)
        except WorkspaceError:
            continue
        proved += 1
        results, seconds, undecided = prove_timed(target)
        total += seconds
        undecided_names += [undecided] if undecided else []
        for r in results:
            if r.verdict is Verdict.REFUTED:
                refuted[r.theorem] = refuted.get(r.theorem, 0) + 1
    decided = proved - len(undecided_names)
    print(f"random {label} targets: {decided}/{proved} decided = {decided / proved:.1%} ({count - proved} drawn "
          f"boxes refused at their maxima); solver {total:.1f}s ({total / proved:.2f}s per target); refuted: "
          + (", ".join(f"{name} {n}" for name, n in sorted(refuted.items())) or "none"))
    for name in undecided_names:
        print(f"  undecided: {name}")


def random_gqa_target(rng: random.Random, index: int) -> Target:
    """Return a seeded random GroupQueryAttention target across the options its family models."""
    kv_heads, group = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4, 5, 6, 7, 8])
    head = rng.choice([64, 80, 96, 128, 256])
    past = rng.choice([64, 256, 1024, 4096])
    window = rng.choice([None, None, None, 32, past])
    data = {"name": f"random-gqa-{index}", "op": "gqa", "dtype": rng.choice(["fp16", "fp16", "bf16"]),
            "heads": kv_heads * group, "kv_heads": kv_heads, "head_size": head, "past": past,
            "batch": f"1..{rng.choice([1, 2, 4, 8])}", "seq": f"1..{rng.choice([1, 16, past])}",
            "total_seq": f"1..{past}", "sm": rng.choice([75, 80, 86, 89, 90, 120]),
            "format": rng.choice(["separate", "separate", "packed_qkv"]), "rotary": head % 16 == 0 and rng.random() < 0.7,
            "softcap": rng.choice([None, None, None, 50.0]), "smooth_softmax": rng.random() < 0.1,
            "head_sink": rng.random() < 0.1, "kv_quant": rng.choice([None, None, None, "int8", "fp8"])}
    if window is not None:
        data["window"] = window
        data["sliding_window_cache"] = window == past and head % 32 == 0 and rng.random() < 0.5
    if not data.get("sliding_window_cache") and rng.random() < 0.8:
        data["max_total_seq"] = past
    if rng.random() < 0.4:
        data["env"] = {rng.choice(["ORT_ENABLE_XQA", "ORT_DISABLE_FLASH_DECODE", "ORT_ENABLE_CUDNN_FLASH_ATTENTION"]):
                       rng.choice(["0", "1"])}
    return target_from_dict({k: v for k, v in data.items() if v is not None})


def random_paged_target(rng: random.Random, index: int) -> Target:
    """Return a seeded random PagedAttention target across the options its family models (a node
    ORT refuses at its maxima, such as an int4 cache of another head size, raises)."""
    kv_heads, group = rng.choice([1, 2, 8]), rng.choice([1, 4, 6, 8])
    head, block = rng.choice([64, 128, 256]), rng.choice([16, 64, 128, 256])
    blocks = rng.choice([4, 32, 512 // block or 1])
    capacity, batch, seq = block * blocks, rng.choice([1, 4, 16]), rng.choice([1, 8, 256])
    quant = rng.choice([None, None, "int8", "fp8", "int4"])
    data = {"name": f"random-paged-{index}", "op": "paged", "dtype": rng.choice(["fp16", "fp16", "bf16"]),
            "heads": kv_heads * group, "kv_heads": kv_heads, "head_size": head, "block_size": block,
            "max_blocks": blocks, "batch": f"1..{batch}", "seq": f"1..{min(seq, capacity)}",
            "tokens": f"1..{batch * min(seq, capacity)}", "kv_len": f"1..{capacity}",
            "sm": rng.choice([75, 80, 86, 89, 90]), "rotary": rng.random() < 0.5, "kv_quant": quant,
            "kv_scale": rng.choice(["per_tensor", "per_channel"]) if quant else None,
            "metadata": rng.choice([None, "bounds"]), "head_sink": rng.random() < 0.1}
    if rng.random() < 0.3:
        data["env"] = {rng.choice(["ORT_ENABLE_XQA", "ORT_DISABLE_DECODER_ATTENTION", "ORT_ENABLE_XQA_NATIVE_KV"]):
                       rng.choice(["0", "1"])}
    return target_from_dict({k: v for k, v in data.items() if v is not None})


def second_opinion() -> None:
    queries = confirmed = disagreements = 0
    z3_seconds = cvc5_seconds = 0.0
    for target in committed_targets():
        for r in prove_target(target, Limits(second_opinion="cvc5"), list(THEOREMS)):
            queries += r.opinion.queries
            confirmed += r.opinion.confirmed
            disagreements += len(r.opinion.disagreements)
            z3_seconds += r.seconds
            cvc5_seconds += r.opinion.seconds
    print(f"second opinion: cvc5 confirms {confirmed}/{queries} = {confirmed / queries:.1%} of the decided queries "
          f"of every committed target ({disagreements} disagreements); cvc5 {cvc5_seconds:.1f}s, Z3 {z3_seconds:.1f}s, "
          f"ratio {cvc5_seconds / z3_seconds:.1f}x")


if __name__ == "__main__":
    parts = set(sys.argv[1:]) or {"exhaustive", "growth", "pairs", "random", "second", "mha", "gqa", "paged"}
    if "exhaustive" in parts:
        for b, s in ((4, 256), (16, 512)):
            exhaustive_vs_solver(b, s)
    if "growth" in parts:
        growth()
    if "pairs" in parts:
        pair_times()
    if "random" in parts:
        random_targets()
    if "second" in parts:
        second_opinion()
    if "mha" in parts:
        random_family_targets("MHA", random_mha_target, 100)
    if "gqa" in parts:
        random_family_targets("GQA", random_gqa_target, 100)
    if "paged" in parts:
        random_family_targets("PagedAttention", random_paged_target, 100)
