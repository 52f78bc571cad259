"""What each operator family declares of its own, for the shared records and the parser to take:
the fields it adds to `Geometry` (one concrete problem) and `Target` (a box of problems), each with
its default, and the problem flags its operators take (`Flag`).

The declarations live in each family's `fields` module (`GEOMETRY_FIELDS`, `TARGET_FIELDS`,
`FLAG_SPECS`), a light module that imports no shared record, and are read here by the folder
names of `attnws.spec.problem.FAMILY_NAMES`: the records are built before the registry
(`attnws.spec.families`) loads the families' other modules, which use them. A name two families
declare (MultiHeadAttention's past length, GroupQueryAttention's cache capacity: both `past`) is
one field or flag, with one default, kind and placeholder.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import InternalError
from .problem import FAMILY_NAMES, Op

# What a bare N means for a dimension flag: a maximum (1..N: the counts that vary at run time),
# a range from zero (0..N: a past length, whose 0 is the first decoding step) or exact (N..N: what
# the model fixes).
MAXIMUM, FROM_ZERO, EXACT = "maximum", "from_zero", "exact"
FLAG_KINDS = ("dimension", "switch", "integer", "number", "choice", "value")


@dataclass(frozen=True)
class Flag:
    """One problem flag: `dest` is the namespace attribute (and the key a target file or a shape
    record gives it under), `help` what it means for the declaring family's operators. `kind`:
    a dimension (N or LO..HI, read as `reading` says), a switch (present or not), an integer, a
    decimal number, one of `choices`, or a value the family reads itself. `bare`: for a choice,
    the choice the flag takes when given without one (`--head-sink` alone: initializer); '' when
    it needs one."""

    dest: str
    help: str
    kind: str = "value"
    metavar: str | None = None
    choices: tuple[str, ...] = ()
    reading: str = ""
    bare: str = ""

    def __post_init__(self) -> None:
        if self.kind not in FLAG_KINDS or (self.kind == "dimension") != bool(self.reading):
            raise InternalError(f"flag {self.dest}: kind {self.kind!r} with reading {self.reading!r}")
        if self.bare and (self.kind != "choice" or self.bare not in self.choices):
            raise InternalError(f"flag {self.dest}: a bare value {self.bare!r} that is not one of its choices")


def fields_modules() -> list[ModuleType]:
    """Return each family's `fields` module, in the registry's order."""
    return [importlib.import_module(f"{__package__}.{name}.fields") for name in FAMILY_NAMES]


def own_fields(record: str) -> list[tuple[str, Any]]:
    """Return (name, default) of every family's own fields of `record` ("GEOMETRY" or "TARGET"),
    in the registry's order, each name once; raise InternalError where two families give one
    name two defaults."""
    merged: dict[str, Any] = {}
    for module in fields_modules():
        for name, default in getattr(module, f"{record}_FIELDS"):
            if name in merged and merged[name] != default:
                raise InternalError(f"{record.lower()} field {name}: defaults {merged[name]!r} and {default!r}")
            merged.setdefault(name, default)
    return list(merged.items())


@dataclass(frozen=True)
class FlagUse:
    """A problem flag as the parser adds it: the declaration (help merged over the operators that
    take it) and, per operator, how that operator reads it (a dimension's `reading`)."""

    flag: Flag
    ops: tuple[Op, ...]
    readings: dict[Op, str]

    def reading(self, op: Op) -> str:
        """Return what a bare N means for the operator (its family's reading)."""
        return self.readings.get(op, "")


def _short(ops: list[Op]) -> str:
    names = [op.value.upper() for op in ops]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def flag_uses() -> dict[str, FlagUse]:
    """Return every family's problem flags by namespace attribute, in the registry's order: the
    operators that take each (each family's `FLAGS`), and one declaration whose help says what it
    means for each of them ("GQA only: ...", or "MHA: ...; GQA: ..." where the families differ).
    Raise InternalError where a family leaves a flag of its operators undeclared, or two families
    declare one flag of different kinds or placeholders."""
    helps: dict[str, dict[str, list[Op]]] = {}
    first: dict[str, Flag] = {}
    readings: dict[str, dict[Op, str]] = {}
    choices: dict[str, list[str]] = {}
    for module in fields_modules():
        specs = {f.dest: f for f in module.FLAG_SPECS}
        for op, dests in module.FLAGS.items():
            for dest in dests:
                if dest not in specs:
                    raise InternalError(f"{op.onnx_name}'s flag {dest} has no declaration (FLAG_SPECS)")
                spec = first.setdefault(dest, specs[dest])
                if (spec.kind, spec.metavar, spec.bare) != (specs[dest].kind, specs[dest].metavar, specs[dest].bare):
                    raise InternalError(f"flag {dest} is declared as two kinds, placeholders or bare values")
                helps.setdefault(dest, {}).setdefault(specs[dest].help, []).append(op)
                readings.setdefault(dest, {})[op] = specs[dest].reading
                choices.setdefault(dest, []).extend(c for c in specs[dest].choices if c not in choices[dest])
    uses = {}
    for dest, spec in first.items():
        groups = helps[dest]
        ops = [op for group in groups.values() for op in group]
        text = (f"{_short(ops)} only: {next(iter(groups))}" if len(groups) == 1 else
                "; ".join(f"{_short(group)}: {help_}" for help_, group in groups.items()))
        flag = Flag(dest, text, spec.kind, spec.metavar, tuple(sorted(choices[dest])), spec.reading, spec.bare)
        uses[dest] = FlagUse(flag, tuple(ops), readings[dest])
    return uses
