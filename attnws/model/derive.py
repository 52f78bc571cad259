"""Dimensions the user should not have to spell out: what the model determines from the given ones.

`resolve` starts from the user's bounds (`--dim`, `--max-shape-override`) and, while some symbolic
dimension (`dim_param`) is unbound, infers shapes with the bound ones at their maxima and derives
more from what the graph and the operators determine:

- an operator's own constraints where ORT's max-shape inference applies: PackedAttention's and
  PackedMultiHeadAttention's cumulative_sequence_length is [B + 1] (a symbol there is B + 1, or B
  is that symbol - 1), token_offset is [B, S] and the packed token count T is at most B * S (a
  symbol there gets the maximum B * S: a safe maximum, the largest T a valid run has);
  MultiHeadAttention's and GroupQueryAttention's lengths are their own inputs, so nothing is
  derived from them (their readers have no `packing`);
- the graph: a symbol an elementwise operator broadcasts against a dimension the graph computes
  (a Shape / Gather / Add / Concat chain ONNX's data propagation evaluates at the bounds, or any
  other known dimension greater than 1), a Concat's non-axis dimensions and a MatMul's
  contraction, all equal by the operator's rule;
- a symbol whose name is its own formula, as ORT's symbolic shape inference names them
  ("past_sequence_length+sequence_length"): sums, products and subtracted constants of bound
  symbols (monotone, so the formula at the maxima is the maximum).

An equality ("equal") holds for every run; a maximum ("maximum") bounds the symbol only, so the
solver never takes it as exact. A bound the user gives always wins; a given value that contradicts
a derived equality (batch_plus_1 != batch + 1 on one node, a dimension a graph operator requires
equal to another) is a usage error, and a derived value that contradicts the node it was derived
from is attnws's own bug (InternalError); the spec's builders check every node's shapes again when
it is sized, so a wrong derivation never sizes a node silently. What no rule derives
and an attention node needs is `missing`, each symbol once, with the first place it is needed;
a symbol a rule would derive once another is given (T from B and S, B + 1 from B) is not asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

import onnx

from ..spec.errors import InternalError, UsageError
from ..spec.inputs import input_names
from ..spec.limits import INT32_MAX
from ..spec.printable import printable
from .bounds import ShapeBounds
from .functions import attention_sites
from .graph import all_graphs, walk
from .infer import infer_max_shapes, model_symbols, symbols_of
from .registry import reader_of
from .translate import MS_DOMAIN, Dim, shape_dims, token_inputs, unbound_dims

EQUAL, MAXIMUM = "equal", "maximum"



@dataclass(frozen=True)
class Derived:
    """One symbol the model determines: its value (an element count), whether it equals that
    value in every run or is at most it, the formula in the given symbols' names, and why."""

    name: str
    value: int
    relation: str  # EQUAL or MAXIMUM
    formula: str
    reason: str
    node: str = ""  # the attention node (graph path) whose rule derived it; "" for the graph's and a name's

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "relation": self.relation, "formula": self.formula,
                "reason": self.reason, "node": self.node or None}

    @property
    def text(self) -> str:
        """Return "batch_plus_1 = 17 (batch + 1): why" or "token_count <= 6144 (batch * seq), ...": why"."""
        sign = "=" if self.relation == EQUAL else "<="
        formula = f" ({printable(self.formula)})" if self.formula not in (str(self.value), self.name) else ""
        taken = "" if self.relation == EQUAL else ", taken as its maximum"
        return f"{printable(self.name)} {sign} {self.value:,}{formula}{taken}: {self.reason}"


@dataclass(frozen=True)
class Missing:
    """A symbolic dimension an attention node needs that neither the user nor the model bounds."""

    name: str
    where: str

    @property
    def flag(self) -> str:
        return f"--dim {self.name}=MAX"

    @property
    def text(self) -> str:
        return f"missing: {printable(self.flag)} ({self.where})"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "flag": self.flag, "where": self.where}


@dataclass(frozen=True)
class Resolution:
    """The bounds with what the model determines, and the model inferred at them."""

    bounds: ShapeBounds  # the user's
    derived: tuple[Derived, ...]
    missing: tuple[Missing, ...]
    inferred: onnx.ModelProto

    @property
    def values(self) -> dict[str, int]:
        return {d.name: d.value for d in self.derived}


# -- the constraints of an operator that packs its tokens ------------------------------------------

def cumulative_length(batch: int) -> int:
    """cumulative_sequence_length's length for batch size B: B + 1."""
    return batch + 1


def batch_of_cumulative(length: int) -> int:
    """The batch size B whose cumulative_sequence_length has this length: length - 1."""
    return length - 1


def token_maximum(batch: int, seq: int) -> int:
    """The largest packed token count T of B sequences of at most S tokens: B * S."""
    return batch * seq


# -- reading dimensions ------------------------------------------------------------------------------

def declared_symbols(model: onnx.ModelProto) -> set[str]:
    """Every symbol the model's declared types name, in its graphs and its functions' value_info."""
    out = model_symbols(model)
    for function in model.functions:
        for info in getattr(function, "value_info", ()):
            out |= symbols_of(info.type)
    return out


def _declared(model: onnx.ModelProto) -> dict[str, list[Dim]]:
    """The model's declared tensor shapes by name (graph inputs, outputs, value_info): where a
    dimension's symbol is read back for a formula."""
    out: dict[str, list[Dim]] = {}
    for graph in all_graphs(model.graph):
        for info in (*graph.value_info, *graph.output, *graph.input):
            dims = shape_dims(info.type)
            if dims is not None:
                out[info.name] = dims
    return out


def bound_symbols(model: onnx.ModelProto, bounds: ShapeBounds) -> set[str]:
    """Return the symbols the user's bounds give: by --dim, and through the graph inputs
    --max-shape-override names."""
    return set(bounds.dims) | set(_override_bindings(model, bounds.overrides))


def _override_bindings(model: onnx.ModelProto, overrides: dict[str, tuple[int, ...]]) -> dict[str, int]:
    """The symbols --max-shape-override binds, read off the graph inputs it names."""
    out: dict[str, int] = {}
    for info in model.graph.input:
        if info.name in overrides:
            for dim, value in zip(shape_dims(info.type) or [], overrides[info.name]):
                if isinstance(dim, str):
                    out.setdefault(dim, value)
    return out


# -- formulas in symbols' names ----------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_.]*)|(\*|\+|-|\(|\)))")


def formula_terms(text: str) -> list[str] | None:
    """Return the symbols a formula name reads ("past_sequence_length+sequence_length" reads two),
    or None when the name is not a formula attnws evaluates: sums and products of symbols and
    integers, integers subtracted (monotone: the value at the maxima is the maximum)."""
    try:
        _, terms = _parse(text, None)
    except ValueError:
        return None
    return terms


def evaluate_formula(text: str, values: dict[str, int]) -> int | None:
    """Return the formula's value at `values`, None when a symbol is unbound or it is no formula."""
    try:
        value, _ = _parse(text, values)
    except (ValueError, KeyError):
        return None
    return value


def _parse(text: str, values: dict[str, int] | None) -> tuple[int, list[str]]:
    """Parse (and with `values`, evaluate) a formula name; ValueError when it is none, KeyError
    when `values` lacks one of its symbols."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    stripped = text.rstrip()
    while pos < len(stripped):
        match = _TOKEN.match(stripped, pos)
        if match is None or match.end() == pos:
            raise ValueError(text)
        number, name, op = match.groups()
        tokens.append(("n", number) if number else ("s", name) if name else ("o", op))
        pos = match.end()
    if not any(kind == "o" and value in "+*-" for kind, value in tokens):
        raise ValueError(text)  # a plain name, not a formula
    terms: list[str] = []
    index = 0

    def peek() -> tuple[str, str] | None:
        return tokens[index] if index < len(tokens) else None

    def take() -> tuple[str, str]:
        nonlocal index
        if index >= len(tokens):
            raise ValueError(text)
        index += 1
        return tokens[index - 1]

    def atom() -> tuple[int, bool]:  # (value, is a constant)
        kind, value = take()
        if kind == "n":
            return int(value), True
        if kind == "s":
            terms.append(value)
            if values is None:
                return 0, False
            return values[value], False
        if value == "(":
            inner = expr()
            if take() != ("o", ")"):
                raise ValueError(text)
            return inner
        raise ValueError(text)

    def product() -> tuple[int, bool]:
        value, constant = atom()
        while peek() == ("o", "*"):
            take()
            right, right_constant = atom()
            value, constant = value * right, constant and right_constant
        return value, constant

    def expr() -> tuple[int, bool]:
        value, constant = product()
        while peek() in (("o", "+"), ("o", "-")):
            _, op = take()
            right, right_constant = product()
            if op == "-" and not right_constant:
                raise ValueError(text)  # a symbol subtracted: its maximum is not the formula's
            value, constant = (value + right if op == "+" else value - right), constant and right_constant
        return value, constant

    value, _ = expr()
    if index != len(tokens):
        raise ValueError(text)
    return value, terms


# -- one round of derivation ---------------------------------------------------------------------------

BROADCAST_OPS = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor",
    "Where", "PRelu",
})


@dataclass
class _Round:
    """What one inference at the current bounds determines."""

    free: set[str]  # symbols bound by neither the user nor a derivation
    given: dict[str, int]  # the user's symbols (--dim and what overrides bind)
    dim_flags: set[str]  # the symbols given by --dim (the rest by --max-shape-override)
    declared: dict[str, list[Dim]]
    candidates: dict[str, list[Derived]]
    derived: dict[str, Derived]  # the derivations so far

    def add(self, name: str, value: int, relation: str, formula: str, reason: str, node: str = "") -> None:
        if name in self.free and 0 <= value <= INT32_MAX:
            self.candidates.setdefault(name, []).append(Derived(name, value, relation, formula, reason, node))

    def origin(self, tensor: str, axis: int) -> str | None:
        """The symbol the model declares at tensor's axis (None when it declares none)."""
        dims = self.declared.get(tensor)
        if dims is None or axis >= len(dims) or not isinstance(dims[axis], str):
            return None
        return dims[axis]

    def name(self, tensor: str, axis: int, value: int) -> str:
        symbol = self.origin(tensor, axis)
        return symbol if symbol is not None else str(value)

    def given_text(self, symbol: str) -> str:
        value = self.given[symbol]
        return f"--dim {symbol}={value}" if symbol in self.dim_flags else \
            f"{symbol} = {value} (from --max-shape-override)"


def _node_dims(site: Any) -> list[list[Dim] | None]:
    return [shape_dims(site.scope.type_of(name)) if name else None for name in site.node.input]


def _packed_relations(r: _Round, site: Any) -> None:
    """An operator that packs its tokens (its reader's `packing`): B + 1 and T <= B * S."""
    reader = reader_of(site.node.op_type)
    packing = reader.packing
    if packing is None or site.node.domain != MS_DOMAIN:
        return
    dims = _node_dims(site)
    names = list(site.node.input)
    to, cu = packing.token_offset, packing.cumulative_sequence_length
    offsets = dims[to] if to < len(dims) else None
    lengths = dims[cu] if cu < len(dims) else None
    where = f"{site.node.op_type} node {printable(site.label)}"
    batch = seq = None
    if offsets is not None and len(offsets) == 2:
        batch, seq = offsets
    if lengths is not None and len(lengths) == 1:
        length = lengths[0]
        if isinstance(length, str) and isinstance(batch, int):
            r.add(length, cumulative_length(batch), EQUAL, f"{r.name(names[to], 0, batch)} + 1",
                  f"cumulative_sequence_length of {where} (input {cu}) is [B + 1], B = {batch} from token_offset",
                  site.path)
        elif isinstance(batch, str) and isinstance(length, int) and length >= 1:
            r.add(batch, batch_of_cumulative(length), EQUAL, f"{r.name(names[cu], 0, length)} - 1",
                  f"token_offset of {where} (input {to}) is [B, S] and its cumulative_sequence_length "
                  f"[B + 1] = [{length}]", site.path)
        elif isinstance(batch, int) and isinstance(length, int) and length != cumulative_length(batch):
            symbols = (r.origin(names[cu], 0), r.origin(names[to], 0))
            what = (f"{where} takes token_offset [B, S] = [{batch}, {seq}] and cumulative_sequence_length [B + 1] = "
                    f"[{length}], but {batch} + 1 != {length}")
            wrong = [r.derived[s] for s in symbols if s in r.derived and r.derived[s].node == site.path]
            if wrong:  # our derivation contradicts the node it was derived from: our bug, never the user's
                raise InternalError(f"the derived {wrong[0].name} = {wrong[0].value} contradicts the model: {what}")
            for symbol in symbols:
                if symbol in r.given:
                    raise UsageError(f"{r.given_text(symbol)} contradicts the model: {what}")
    if not (isinstance(batch, int) and isinstance(seq, int)):
        return
    bound = token_maximum(batch, seq)
    formula = f"{r.name(names[to], 0, batch)} * {r.name(names[to], 1, seq)}"
    for index in token_inputs(packing, dims[0] if dims else None):
        shape = dims[index] if index < len(dims) else None
        if not shape:
            continue
        tokens = shape[0]
        if isinstance(tokens, str):
            r.add(tokens, bound, MAXIMUM, formula,
                  f"the packed token count T of {where} (input {index}, {input_names(reader.op)[index]}) is at most "
                  f"B * S, B = {batch} and S = {seq} from token_offset", site.path)
        elif isinstance(tokens, int) and tokens > bound:
            symbol = r.origin(names[index], 0)
            if symbol in r.given:
                raise UsageError(f"{r.given_text(symbol)} exceeds {formula} = {bound:,}: the packed token count T of "
                                 f"{where} is at most B * S")


Entry = tuple[Dim, str | None]  # a dimension and the symbol the model declares there (None: none)


def _aligned(shapes: list[list[Entry]]) -> Iterator[list[Entry]]:
    """The dimensions broadcasting lines up, from the right."""
    rank = max((len(s) for s in shapes), default=0)
    for offset in range(1, rank + 1):
        yield [s[-offset] for s in shapes if len(s) >= offset]


def _tie(r: _Round, group: list[Entry], where: str, ones_broadcast: bool) -> None:
    """Dimensions an operator requires equal (or 1, where it broadcasts): free symbols among them
    take the known value; known values that differ where a given symbol sits are a usage error."""
    values = {d for d, _ in group if isinstance(d, int) and not (ones_broadcast and d == 1)}
    if len(values) > 1:
        given = next((symbol for d, symbol in group if isinstance(d, int) and symbol in r.given), None)
        if given is not None:
            shown = " and ".join(f"{v:,}" for v in sorted(values))
            raise UsageError(f"{r.given_text(given)} contradicts the model: {where} requires the dimensions {shown} "
                             f"equal{' (or 1)' if ones_broadcast else ''}")
        return
    if len(values) != 1:
        return
    (value,) = values
    for d, _ in group:
        if isinstance(d, str):
            r.add(d, value, EQUAL, str(value), f"{where} requires it equal to a dimension of {value} the graph "
                                               "computes from the bounds")


def _graph_relations(r: _Round, inferred: onnx.ModelProto) -> None:
    """Equalities the graph's own operators impose (see the module docstring), on the nodes that
    read a free symbol or one the user gives."""
    for site in walk(inferred.graph):
        node = site.node
        if node.domain not in ("", "ai.onnx") or not (node.op_type in BROADCAST_OPS or node.op_type in ("Concat",
                                                                                                      "MatMul")):
            continue
        dims = [shape_dims(site.scope.type_of(name)) if name else None for name in node.input]
        if not dims or any(d is None for d in dims):
            continue
        shapes = [[(d, r.origin(name, axis)) for axis, d in enumerate(shape)] for name, shape in zip(node.input, dims)]
        if not any((isinstance(d, str) and d in r.free) or symbol in r.given for s in shapes for d, symbol in s):
            continue
        where = f"node {printable(site.label)} ({node.op_type})"
        if node.op_type in BROADCAST_OPS:
            for group in _aligned(shapes):
                _tie(r, group, where, ones_broadcast=True)
        elif node.op_type == "Concat":
            axis = next((a.i for a in node.attribute if a.name == "axis"), None)
            if axis is None or len({len(s) for s in shapes}) != 1 or not shapes[0]:
                continue
            rank = len(shapes[0])
            for k in range(rank):
                if k != axis % rank:
                    _tie(r, [s[k] for s in shapes], where, ones_broadcast=False)
        elif len(shapes) == 2 and shapes[0] and shapes[1]:
            a, b = shapes
            _tie(r, [a[-1], b[-2] if len(b) >= 2 else b[-1]], where, ones_broadcast=False)
            if len(a) >= 3 and len(b) >= 3:
                for group in _aligned([a[:-2], b[:-2]]):
                    _tie(r, group, where, ones_broadcast=True)


def _formula_relations(r: _Round, known: dict[str, int]) -> None:
    for symbol in sorted(r.free):
        value = evaluate_formula(symbol, known)
        if value is not None:
            r.add(symbol, value, EQUAL, symbol, "its name is its formula, in bound symbols")


def _choose(candidates: dict[str, list[Derived]]) -> dict[str, Derived]:
    """One derivation per symbol: the equality when every equality agrees (none is chosen when
    they disagree), else the smallest maximum."""
    out = {}
    for name, found in candidates.items():
        equal = [d for d in found if d.relation == EQUAL]
        if equal:
            if len({d.value for d in equal}) == 1:
                out[name] = equal[0]
            continue
        out[name] = min(found, key=lambda d: d.value)
    return out


# -- what is still missing ---------------------------------------------------------------------------

def _missing(inferred: onnx.ModelProto, free: set[str], known: set[str]) -> tuple[Missing, ...]:
    """Each symbol an attention node's reasons name as unbound (`translate.unbound_dims`: the one
    reading of both), once, at the first place it is read; one attnws derives once others are
    given is not asked for: a packed node's B + 1 and T (from B and S), a formula name (its terms
    are asked for instead)."""
    places: dict[str, str] = {}
    askable: set[str] = set()
    for site in attention_sites(inferred.graph):
        reader = reader_of(site.node.op_type)
        names = input_names(reader.op)
        for u in unbound_dims(site):
            place = (f"{reader.role(u.index, u.axis, u.rank)} of {site.node.op_type} node {printable(site.label)}, "
                     f"input {u.index} ({names[u.index]}) axis {u.axis}")
            terms = formula_terms(u.name)
            if terms is not None and all(t in known or t in free for t in terms):
                for term in terms:  # derived once its terms are given: ask for those
                    if term in free:
                        places.setdefault(term, f"a term of {u.name!r}, {place}")
                        askable.add(term)
                continue
            places.setdefault(u.name, place)
            if not u.derivable:
                askable.add(u.name)
    return tuple(Missing(name, where) for name, where in places.items() if name in askable)


# -- the whole resolution ------------------------------------------------------------------------------

def resolve(model: onnx.ModelProto, bounds: ShapeBounds) -> Resolution:
    """Return the bounds with everything the model determines from them (see the module docstring)
    and the model inferred at them."""
    given = {**_override_bindings(model, bounds.overrides), **bounds.dims}
    free = declared_symbols(model) - set(given)
    derived: dict[str, Derived] = {}
    declared = _declared(model)
    for _ in range(len(free) + 1):
        inferred = infer_max_shapes(model, bounds, {d.name: d.value for d in derived.values()})
        left = free - set(derived)
        r = _Round(left, given, set(bounds.dims), declared, {}, derived)
        for site in attention_sites(inferred.graph):
            _packed_relations(r, site)  # also refuses given values that contradict an equality
        _graph_relations(r, inferred)  # likewise
        if not left:
            break
        _formula_relations(r, {**given, **{d.name: d.value for d in derived.values()}})
        new = _choose(r.candidates)
        if not new:
            break
        derived.update(new)
    missing = _missing(inferred, free - set(derived), set(given) | set(derived))
    return Resolution(bounds, tuple(derived.values()), missing, inferred)

