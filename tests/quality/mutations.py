"""Planted bugs in the spec, and the harness that checks the theorems catch them.

Each `Mutation` patches spec modules (through pytest's monkeypatch, so it is undone) and names a
target on which some theorem PROVED for the real spec must come out REFUTED (with a counterexample
the concrete, mutated spec confirms on replay) or VACUOUS for the mutant. The `SHARED` bugs sit
where the runtime and ORT's estimate read the same code, so only the independent statement of
the kernels' footprint (`kernel_contract`) or the vacuity checks can catch them; they run on the
committed targets.
"""

from __future__ import annotations

import importlib
import sys
import types
from dataclasses import dataclass, replace
from typing import Any, Callable

from attnws.solver.gateway import Verdict
from attnws.solver.theorems import ProofResult, prove_target
from attnws.spec.backends import flash, mea, trt
from attnws.spec.problem import Backend
from attnws.spec.target import Target, load_target, target_from_dict
from attnws.solver.ledger import TARGETS_DIR

# attnws.spec re-exports functions under its submodules' names; fetch the modules themselves.
aggregate_mod, dispatch_mod, estimate_mod, options_mod, reach_mod, recipe_mod = (
    importlib.import_module(f"attnws.spec.{name}")
    for name in ("aggregate", "packed.dispatch", "estimate", "options", "packed.reachability", "packed.recipe"))


def _target(name: str, **fields: Any) -> Target:
    base = {"name": name, "batch": "1..4", "heads": "2..2", "head_size": "64..64", "sm": 80}
    return target_from_dict({**base, **fields})


PA_FP16 = _target("pa-fp16", op="pa", dtype="fp16", seq="1..512")
PA_FP32 = _target("pa-fp32", op="pa", dtype="fp32", seq="1..128")
PA_FP16_SM90 = _target("pa-fp16-sm90", op="pa", dtype="fp16", seq="1..256", sm=90)
PA_FP16_H128 = _target("pa-fp16-h128", op="pa", dtype="fp16", seq="1..256", head_size="128..128")
PA_FP16_H128_EXACT = _target("pa-fp16-h128-exact", op="pa", dtype="fp16", seq="1..384", head_size="128..128",
                             qkv_hidden_sizes=True)
PMHA_FP16_513 = _target("pmha-fp16-513", op="pmha", dtype="fp16", seq="1..513")
PMHA_FP32_256 = _target("pmha-fp32-256", op="pmha", dtype="fp32", seq="1..256")
PMHA_FLASH = _target("pmha-flash", op="pmha", dtype="fp16", seq="513..1024")
PA_FP32_LONG = _target("pa-fp32-long", op="pa", dtype="fp32", batch="1..1", heads="1..1", head_size="8..8",
                       seq="1..50000")

Patch = Callable[[Any], None]  # receives pytest's monkeypatch


@dataclass(frozen=True)
class Mutation:
    """A planted bug: what it does, how to plant it, and the target that exposes it."""

    name: str
    description: str
    plant: Patch
    target: Target


def _everywhere(original: Any, mutated: Any) -> Patch:
    """Replace a spec function in every attnws module that imported it (the spec's own
    `from .aggregate import root_layout` and the solver's alike), so the mutant is one spec."""

    def plant(mp: Any) -> None:
        for module in [m for name, m in sys.modules.items() if name.startswith("attnws.")]:
            for attr, value in list(vars(module).items()):
                if value is original:
                    mp.setattr(module, attr, mutated)

    return plant


def _without_route(backend: Backend) -> Patch:
    original = estimate_mod.reachability

    def mutated(p, config, domain):
        return [replace(v, reachable=False) if v.backend is backend else v for v in original(p, config, domain)]

    return lambda mp: mp.setattr(estimate_mod, "reachability", mutated)


def _aot_threshold(gates_name: str, option: str) -> Patch:
    original = getattr(reach_mod, gates_name)

    def mutated(p, *args):
        config = args[-1]
        shifted = replace(config, options=replace(config.options, **{option: getattr(config.options, option) + 1}))
        return original(p, *args[:-1], shifted)

    return lambda mp: mp.setattr(reach_mod, gates_name, mutated)


def _trt_flash_from_384(mp: Any) -> None:
    def trt_supported(d, sm, head_size, seq, trt_flash_enabled):
        return d.any_(trt.flash_supported(d, sm, head_size, seq + 1, trt_flash_enabled),
                      trt.xmma_supported(d, sm, head_size, seq))

    shim = types.SimpleNamespace(**{k: getattr(trt, k) for k in dir(trt) if not k.startswith("__")})
    shim.supported = trt_supported
    mp.setattr(dispatch_mod, "trt", shim)


def _unaligned_scratch(mp: Any) -> None:
    mp.setattr(recipe_mod, "unfused_scratch_bytes", lambda d, p: d.mul(
        p.element_size, p.batch_size, p.num_heads, p.sequence_length, p.sequence_length, what="unaligned scratch"))


def _capacity_by_tokens(mp: Any) -> None:
    mp.setattr(recipe_mod, "qkv_capacity_bytes", lambda d, p: d.mul(
        p.element_size, p.token_count, p.num_heads, recipe_mod.qkv_head_size(d, p), what="capacity by T"))


def accumulator_from_128(d: Any, p: Any) -> Any:
    """The MEA accumulator with an off-by-one rule: Hv >= 128 instead of Hv > 128 (either family)."""
    if p.element_size == 4:
        return 0
    return d.ite(p.v_head_size >= 128, lambda: d.mul(4, p.batch_size, p.sequence_length, p.num_heads,
                                                      p.v_head_size, what="accumulator"), 0)


def _accumulator_from_128(mp: Any) -> None:
    mp.setattr(mea, "accumulator_bytes", accumulator_from_128)


def _lse_in_element_size(mp: Any) -> None:
    mp.setattr(flash, "softmax_lse_bytes", lambda d, p: d.mul(
        p.element_size, p.batch_size, p.sequence_length, p.num_heads, what="LSE in element size"))


def _no_s_squared_check(mp: Any) -> None:
    original = recipe_mod.fits_int32

    def mutated(d, *factors, what):
        return d.mul(*factors, what=what) if what == "unfused S * S" else original(d, *factors, what=what)

    mp.setattr(recipe_mod, "fits_int32", mutated)


def _projection_without_element_size(mp: Any) -> None:
    mp.setattr(recipe_mod, "projection_bytes", lambda d, p, n: d.mul(p.token_count, n, what="projection T * n"))


def _direct_reads(rule: Callable[[Any, Backend, Any], bool]) -> Patch:
    """Replace the recipe's "reads the inputs directly" rule by rule(p, backend, original)."""
    original = recipe_mod.reads_inputs_directly

    def plant(mp: Any) -> None:
        mp.setattr(recipe_mod, "reads_inputs_directly", lambda p, backend: rule(p, backend, original))

    return plant


def _mea_reads_packed(p: Any, backend: Backend, original: Any) -> bool:
    packed = p.qkv_format is not None and p.qkv_format.value == "packed"
    return original(p, backend) or (backend is Backend.MEA and packed and not p.has_bias)


def _bias_ignored(p: Any, backend: Backend, original: Any) -> bool:
    return original(replace(p, has_bias=False), backend)


def _env_ignored(name: str) -> Patch:
    original = options_mod.env_bool

    def plant(mp: Any) -> None:
        mp.setattr(options_mod, "env_bool", lambda env, key, default: default if key == name else
                   original(env, key, default))

    return plant


def _unfused_always_fails(mp: Any) -> None:
    real = recipe_mod.validate_unfused_geometry

    def mutated(d, p):
        real(d, p)
        d.require(False, lambda: recipe_mod.InvalidArgument("planted: the unfused route always fails"))

    mp.setattr(recipe_mod, "validate_unfused_geometry", mutated)


def _lse_times_four(mp: Any) -> None:
    real = flash.softmax_lse_bytes
    mp.setattr(flash, "softmax_lse_bytes", lambda d, p: d.mul(4, real(d, p), what="4x LSE"))


def _committed(name: str) -> Target:
    return load_target(TARGETS_DIR / f"{name}.json")


SHARED = [
    Mutation("projection-without-element-size", "PA's projection sized in elements, not bytes (runtime and estimate)",
             _projection_without_element_size, _committed("bert-base-pa-fp16-sm75")),
    Mutation("mea-reads-packed-qkv", "MEA reads PMHA's packed [T, N, 3, H] input directly (no workspace)",
             _direct_reads(_mea_reads_packed), _committed("bert-base-pmha-fp32-sm80")),
    Mutation("qkv-bias-ignored-for-direct-reads", "a QKV bias does not force materialization",
             _direct_reads(_bias_ignored), _committed("bert-large-pmha-fp16-sm80-sdpa-mea")),
    Mutation("env-disable-flash-ignored", "ORT_DISABLE_FLASH_ATTENTION is ignored by the kernel options",
             _env_ignored("ORT_DISABLE_FLASH_ATTENTION"), _committed("bert-large-pmha-fp16-sm90-no-flash-env")),
    Mutation("every-shape-fails", "a regression makes the unfused route fail for every shape",
             _unfused_always_fails, _committed("bert-base-pa-fp32-sm86")),
    Mutation("lse-4x", "the Flash LSE reserved four times over (runtime and estimate)", _lse_times_four,
             _committed("bert-large-pmha-fp16-sm90")),
]

MUTATIONS = [
    Mutation("unaligned-scratch", "drop the 256 alignment of the unfused scratch regions", _unaligned_scratch, PA_FP32),
    Mutation("capacity-by-tokens", "size the QKV capacity (and so the unfused views' end) by T instead of B*S",
             _capacity_by_tokens, PA_FP32),
    Mutation("sum-routes", "aggregate routes by sum instead of max",
             lambda mp: mp.setattr(aggregate_mod, "max", sum, raising=False), PA_FP16),
    Mutation("no-unfused", "omit unfused from the reachable set", _without_route(Backend.UNFUSED), PA_FP32),
    Mutation("no-mea", "omit MEA from the reachable set", _without_route(Backend.MEA), PA_FP16_SM90),
    Mutation("no-trt", "omit TRT from the reachable set", _without_route(Backend.TRT), PA_FP16),
    Mutation("flash-threshold-514", "AOT packed-QKV Flash threshold 513 shifted to 514",
             _aot_threshold("_flash_gates", "min_seq_flash_packed_qkv"), PMHA_FP16_513),
    Mutation("mea-fp32-threshold-257", "AOT fp32 MEA threshold 256 shifted to 257",
             _aot_threshold("_mea_gates", "min_seq_mea_fp32"), PMHA_FP32_256),
    Mutation("trt-flash-from-384", "runtime TRT-flash regime starts at S 384 instead of 385", _trt_flash_from_384,
             PA_FP16_H128_EXACT),
    Mutation("accumulator-from-128", "MEA float32 accumulator for Hv >= 128 instead of Hv > 128",
             _accumulator_from_128, PA_FP16_H128),
    Mutation("no-int32-s-squared", "drop the unfused int32 S*S check", _no_s_squared_check, PA_FP32_LONG),
    Mutation("lse-element-size", "Flash LSE sized in the element size instead of 4 bytes", _lse_in_element_size,
             PMHA_FLASH),
    Mutation("no-projection-in-root", "forget PA's projection in the aggregate root",
             _everywhere(aggregate_mod.root_layout, lambda projection, attention, d=None: (0, attention)), PA_FP16),
    *SHARED,
]


@dataclass(frozen=True)
class Kill:
    """The theorems that caught a mutation: PROVED for the spec, REFUTED for the mutant."""

    mutation: Mutation
    killers: tuple[ProofResult, ...]

    @property
    def killed(self) -> bool:
        return bool(self.killers)


CAUGHT = (Verdict.REFUTED, Verdict.VACUOUS)


def run_mutation(mutation: Mutation, monkeypatch: Any) -> Kill:
    """Prove the default (safety) theorems on the mutation's target for the spec, then for the
    mutant (the target re-read under the mutant, so its options are resolved by the mutant too)."""
    baseline = {r.theorem: r.verdict for r in prove_target(mutation.target)}
    with monkeypatch.context() as mp:
        mutation.plant(mp)
        mutant = prove_target(target_from_dict(mutation.target.as_dict()))
    killers = tuple(r for r in mutant if r.verdict in CAUGHT and baseline[r.theorem] is Verdict.PROVED)
    return Kill(mutation, killers)
