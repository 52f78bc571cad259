"""The operator families and where each keeps its modules: the registry every shared entry point
(`dispatch`, `recipe`, `reachability`, `footprint`, `estimate`, `runtime_failures`) looks a
problem's family up in, instead of naming families.

A family is a folder `attnws/spec/<name>/` holding one module per name in `FAMILY_MODULES`, each
with the same functions (its hooks):

- `problem`: the family's problem dataclass; `BACKENDS`, its routes in cascade order.
- `builder`: the builders, every check ORT makes of the input shapes, in ORT's order.
- `inputs`: `input_names(op)`, `geometry_hints(g)`, `problem_from_hints(...)` (the positional
  shapes ORT's adapter reads), `runtime_problem(g, d)` (the validated problem for a `Geometry`
  read as runtime shapes), `attribute_problem(op, num_heads, qkv_hidden_sizes)` (what the node's
  attributes get wrong) and `nonzero_dims(index, shape)` (the dimensions a zero hint may not have).
- `dispatch`: `cascade_gates(d, p, config, runner_valid)` and `output_is_empty(d, p)`.
- `reachability`: `reachability(p, config, domain)`.
- `recipe`: `recipe(p, backend, *, trt_runner_available, route_gates, d)`, `validate_views(d, r)`
  (containment) and `aligned_quantities(r)` (what must be a multiple of 256).
- `footprint`: `footprint(p, backend, d)` and `reads_inputs_directly(p, backend)`, written
  without the recipes.
- `estimate`: `head_domain(op, qkv_hidden_sizes)`, `note(p, config, backends, failures)` and
  `side_allocations_of(p, config, backend)` (what a route allocates beside the workspace).
- `failures`: `route_failures(d, p, config, backend)`, the family's own run-time errors.
- `fields`: how the family's problems are described beyond what every family has: `FLAGS` (its
  operators' own CLI flags), `DIMENSIONS`, `OWN_FIELDS` (its own `Target` fields), the format enum
  and default, the working set, and the hooks that read them from the command line, target files
  and shapes documents, check them and say them in words.

What every family uses is written once beside them: ORT's backends (`backends/`), the gates, the
statement vocabulary, the validation of shapes. Adding a family is a folder and its registration
in `attnws.spec.problem` (its name in `FAMILY_NAMES`, its operators in `Op`, a backend of its own
in `Backend`): the shared records, flags and failure catalogue take what it declares from it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import InternalError
from .problem import FAMILY_NAMES, Backend, Op

FAMILY_MODULES = ("problem", "builder", "inputs", "dispatch", "reachability", "recipe", "footprint", "estimate",
                  "failures", "fields")


@dataclass(frozen=True)
class Family:
    """One operator family: its folder name, its operators, and its modules by `FAMILY_MODULES` name."""

    name: str
    ops: tuple[Op, ...]
    modules: dict[str, ModuleType]

    @classmethod
    def load(cls, name: str) -> "Family":
        """Import `attnws.spec.<name>.<module>` for every module name; the operators are its
        problem module's `OPS`."""
        modules = {m: importlib.import_module(f"{__package__}.{name}.{m}") for m in FAMILY_MODULES}
        return cls(name, modules["problem"].OPS, modules)

    def __getattr__(self, module: str) -> Any:
        try:
            return self.__dict__["modules"][module]
        except KeyError:
            raise AttributeError(module) from None

    @property
    def backends(self) -> tuple[Backend, ...]:
        """The family's backends, in its dispatch cascade's order."""
        return self.modules["problem"].BACKENDS


FAMILIES = tuple(Family.load(name) for name in FAMILY_NAMES)


def family_of(op: Op) -> Family:
    """Return the family the operator belongs to."""
    for family in FAMILIES:
        if op in family.ops:
            return family
    raise InternalError(f"no family registers {op.onnx_name}")


def op_fields(op: Op) -> Any:
    """Return the `fields` module of the operator's family."""
    return family_of(op).fields


COMMON_DIMENSIONS = ("batch", "seq", "heads", "head_size", "v_head_size")
# Every dimension a target may have: the common ones, then each family's own (T, K; L, P).
DIMENSIONS = tuple(dict.fromkeys(COMMON_DIMENSIONS + tuple(
    dim for family in FAMILIES for dims in family.fields.DIMENSIONS.values() for dim in dims)))


COMMON_LABELS = {"batch": "B", "seq": "S", "heads": "N", "head_size": "H", "v_head_size": "Hv"}


def _labels() -> dict[str, str]:
    """Every dimension's short name in words: the common ones, then each family's (a name two
    families share has one label)."""
    labels = dict(COMMON_LABELS)
    for family in FAMILIES:
        for name, label in family.fields.DIMENSION_LABELS.items():
            if labels.setdefault(name, label) != label:
                raise InternalError(f"dimension {name} is labelled {labels[name]} and {label}")
    return labels


DIMENSION_LABELS = _labels()
# The order shapes are shown in: B and S, each family's lengths, N, each family's head counts, the
# head sizes, then each family's other dimensions (`fields.DIMENSION_PLACES`: "length", "heads").
SHOWN_ORDER = tuple(dict.fromkeys((
    "batch", "seq", *(n for f in FAMILIES for n, place in f.fields.DIMENSION_PLACES.items() if place == "length"),
    "heads", *(n for f in FAMILIES for n, place in f.fields.DIMENSION_PLACES.items() if place == "heads"),
    "head_size", "v_head_size", *DIMENSION_LABELS)))


def shape_words(dims: dict[str, Any]) -> str:
    """Return a shape's dimensions in the short form every message uses, "B=1 S=15 N=12 H=64"
    (unset ones left out)."""
    return " ".join(f"{DIMENSION_LABELS[name]}={dims[name]}" for name in SHOWN_ORDER if dims.get(name) is not None)


def options_line(g: Any) -> str:
    """Return the node options that change a geometry's bytes, each said on or off, as one line
    ("options: rotary off, ..."), or '' for a family whose problem line already says them all:
    the family's `fields.options_line`. A target's is its maximum geometry's."""
    return op_fields(g.op).options_line(g)


def dtype_problem(op: Op, dtype: str | None) -> str:
    """Return why the operator cannot take the element type ('' when it can, or none is given):
    each family's `fields.DTYPES` names its operators' types."""
    if dtype is None or dtype in op_fields(op).DTYPES[op]:
        return ""
    owners = [o.onnx_name for family in FAMILIES for o in family.ops if dtype in family.fields.DTYPES[o]]
    named = owners[0] if len(owners) == 1 else f"{', '.join(owners[:-1])} and {owners[-1]}"
    return f"dtype {dtype}: only {named} {'runs' if len(owners) == 1 else 'run'} {dtype} here, not {op.onnx_name}"


def op_dimensions(op: Op) -> tuple[str, ...]:
    """Return the operator's dimensions, in DIMENSIONS order."""
    own = COMMON_DIMENSIONS + op_fields(op).DIMENSIONS[op]
    return tuple(n for n in DIMENSIONS if n in own)


def family_backends(op: Op) -> tuple[Backend, ...]:
    """Return the backends of the operator's family, in its cascade's order."""
    return family_of(op).backends
