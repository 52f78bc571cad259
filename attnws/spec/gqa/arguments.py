"""GroupQueryAttention's node flags and target files, for every command that takes a node
(`attnws estimate|dispatch|prove|counterexamples --op gqa`, `attnws validate --op gqa`): the
flags (`add_box_arguments`) and the box they describe (`box_from_args`), a committed target by
name or a target file (`load_gqa_target`). Usage errors are `UsageError`.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..command_line import PROOFS_DIR, add_config_arguments, config_over, in_range, integer, number, parse_dim, parse_env
from ..documents import DocumentError, read_user_json
from ..errors import InvalidArgument, UsageError
from ..options import RuntimeConfig
from ..target import DimRange
from .node import KV_QUANT, GqaBox, check_box, gqa_target_from_dict

OP = "gqa"  # the --op value the shared commands take GroupQueryAttention by
GQA_TARGETS_DIR = PROOFS_DIR / "gqa-targets"
BOX_FLAGS = ("batch", "seq", "total_seq", "past", "heads", "kv_heads", "head_size")


def add_box_arguments(parser: argparse.ArgumentParser, exact: bool) -> None:
    g = parser.add_argument_group("GroupQueryAttention node")
    g.add_argument("--target", default=None, metavar="NAME|FILE",
                   help="a committed GroupQueryAttention target (`attnws targets --op gqa`) or a target file")
    shape = "N (exact)" if exact else "N (1..N) or LO..HI"
    g.add_argument("--batch", default=None, metavar="N", help=f"batch size B: {shape}")
    g.add_argument("--seq", default=None, metavar="N", help=f"new tokens S: {shape}")
    g.add_argument("--total-seq", dest="total_seq", default=None, metavar="N",
                   help=f"total_sequence_length T, the key length: {shape}")
    g.add_argument("--past", type=integer, default=None, metavar="P",
                   help="the past / present cache's capacity, shared by past and present (default: T's maximum); "
                        "with --sliding-window-cache, the window")
    g.add_argument("--heads", type=integer, default=None, metavar="N", help="num_heads")
    g.add_argument("--kv-heads", dest="kv_heads", type=integer, default=None, metavar="N", help="kv_num_heads")
    g.add_argument("--head-size", dest="head_size", type=integer, default=None, metavar="H", help="head size")
    g.add_argument("--dtype", choices=["fp16", "bf16"], default=None, help="the Q/K/V element type (default fp16)")
    g.add_argument("--window", type=integer, default=None, metavar="W", help="local_window_size (default -1: none)")
    g.add_argument("--sliding-window-cache", dest="sliding_window_cache", action="store_true", default=None,
                   help="sliding_window_cache=1: the cache holds the window only (its capacity --past = --window)")
    g.add_argument("--rotary", action="store_true", default=None, help="do_rotary=1 with cos / sin caches")
    g.add_argument("--packed-qkv", dest="packed_qkv", action="store_true", default=None,
                   help="query packs Q, K and V: [B, S, (N + 2 Nk) H]")
    g.add_argument("--softcap", type=number, default=None, metavar="F", help="softcap (default 0)")
    g.add_argument("--smooth-softmax", dest="smooth_softmax", action="store_true", default=None,
                   help="smooth_softmax=1")
    g.add_argument("--head-sink", dest="head_sink", action="store_true", default=None, help="a head_sink input [N]")
    g.add_argument("--kv-quant", dest="kv_quant", choices=list(KV_QUANT), default=None,
                   help="the KV cache's quantization, per-tensor scales (default none)")
    g.add_argument("--max-total-seq", dest="max_total_seq", type=integer, default=None, metavar="N",
                   help="the session option ep.cuda.gqa_workspace_max_total_sequence_length, which ORT's estimator "
                        "needs for a non-windowed cache (default: unset)")
    add_config_arguments(parser)


def _dim(raw: Any, name: str, exact: bool) -> DimRange:
    """N is a maximum (1..N), or exactly N for a command that takes one shape; LO..HI a range."""
    text = str(raw)
    found = parse_dim(text, name)
    if ".." not in text:
        return DimRange(found.hi, found.hi) if exact else DimRange(min(1, found.hi), found.hi)
    if exact and not found.exact:
        raise UsageError(f"--{name.replace('_', '-')} {raw}: this command takes one shape (N)")
    return found


def box_from_args(ns: argparse.Namespace, exact: bool = False) -> GqaBox:
    """The box the flags (or the target, with flags overriding its configuration) describe."""
    if ns.target is not None:
        given = [f"--{name.replace('_', '-')}" for name in BOX_FLAGS if getattr(ns, name) is not None]
        if given:
            raise UsageError(f"--target {ns.target} fixes the node; {' '.join(given)} cannot be added to it")
        box = load_gqa_target(ns.target)
        return replace(box, config=config_over(ns, box.config, box.env), env=env_over(ns, box.env))
    missing = [f"--{name.replace('_', '-')}" for name in ("heads", "kv_heads", "head_size", "total_seq")
               if getattr(ns, name) is None]
    if missing:
        raise UsageError(f"a GroupQueryAttention node needs {', '.join(missing)} (or --target)")
    for name in ("heads", "kv_heads", "head_size"):
        in_range(getattr(ns, name), f"--{name.replace('_', '-')}", 1, 2**31 - 1)
    total = _dim(ns.total_seq, "total_seq", exact)
    past = total.hi if ns.past is None else in_range(ns.past, "--past", 1, 2**31 - 1)
    box = GqaBox(
        name="flags", num_heads=ns.heads, kv_num_heads=ns.kv_heads, head_size=ns.head_size, past=past,
        batch=_dim(ns.batch or 1, "batch", exact), seq=_dim(ns.seq or 1, "seq", exact), total_seq=total,
        config=config_over(ns, RuntimeConfig(), ()), env=env_over(ns, ()), is_bf16=ns.dtype == "bf16",
        is_packed_qkv=bool(ns.packed_qkv), do_rotary=bool(ns.rotary),
        local_window_size=-1 if ns.window is None else ns.window, sliding_window_cache=bool(ns.sliding_window_cache),
        softcap=ns.softcap or 0.0, smooth_softmax=bool(ns.smooth_softmax), head_sink=bool(ns.head_sink),
        kv_quant=ns.kv_quant or "none", max_total_sequence_length=ns.max_total_seq or 0)
    check_box(box)
    return box


def env_over(ns: argparse.Namespace, env: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The box's environment with --env applied, sorted pairs."""
    return tuple(sorted({**dict(env), **parse_env(ns.env)}.items()))


def load_gqa_target(name: str) -> GqaBox:
    """The box a committed target's name or a target file describes; a bad file is a usage error."""
    path = Path(name)
    if not path.exists():
        path = GQA_TARGETS_DIR / f"{path.name.removesuffix('.json')}.json"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in GQA_TARGETS_DIR.glob("*.json")))
        raise UsageError(f"--target {name!r}: no such file or committed GroupQueryAttention target (known: {known})")
    try:
        return gqa_target_from_dict(read_user_json(path, f"--target {name}"), str(path.name), path.stem)
    except (DocumentError, InvalidArgument) as error:
        raise UsageError(f"--target {name}: {error}") from None




def without_op(args: list[str]) -> tuple[list[str], bool]:
    """Return the arguments without `--op gqa` / `--op=gqa`, and whether it was there."""
    for i, arg in enumerate(args):
        if arg == "--op" and args[i + 1:i + 2] == [OP]:
            return args[:i] + args[i + 2:], True
        if arg == f"--op={OP}":
            return args[:i] + args[i + 1:], True
    return args, False
