"""What the model layer knows of one operator's ONNX node: the `NodeReader` interface.

Each spec family (`attnws.spec.<family>`) has one reader module, `attnws.model.readers.<family>`,
offering the same names: `Reader` (its `NodeReader` subclass) and `READERS` (one instance per
operator of the family). `attnws.model.registry` lists them by ONNX op type; the shared modules
(`translate`, `derive`, `contrib`, `report`, `reserve`, `render`, `prove`) look a node's reader up
there and call its hooks instead of naming operators or families.

A reader's fields are ORT 1.31.1's com.microsoft schema for the operator (`Schema`: attribute
types, the required attributes and inputs, each input's type constraint and the types it allows,
the outputs) and how attnws reads the node; its hooks are what differs by family. The shared
pipeline calls every hook for every reader: the abstract ones each family states; the others
have the shared behaviour as their default, which a family overrides where its nodes need more
(GroupQueryAttention's `estimate`, which is ORT's own estimator with the session's option and
the model's constants; its `unstated`). Input and output positions are 0-based; dimensions are element counts.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..spec.estimate import ELEMENT_TYPES, Estimate, config_problem, estimate_for_node, problem_from_hints
from ..spec.hints import MISSING, Hint, HintState, hint_at
from ..spec.inputs import input_names
from ..spec.families import family_of
from ..spec.problem import Op
from ..spec.target import DimRange, Target

OutputType = tuple[int, list[int]] | None  # (ONNX element type, dims); None for an output left unknown
# (problem dimension name, its value[, lowest]) -> its range in a target, or None for a dimension
# the model keeps equal to its partner (the reader's `ties`: the target's None, L = S)
DimFactory = Callable[..., DimRange | None]


def output_present(outputs: Sequence[str], index: int) -> bool:
    """Return whether output `index` is present: within the node's outputs and named."""
    return index < len(outputs) and bool(outputs[index])


def static_dim(hints: Sequence[Hint], index: int, axis: int) -> bool:
    """Return whether input `index` has a known dimension at `axis` (hints read without bounds:
    -1 where a dimension is symbolic)."""
    hint = hint_at(hints, index)
    return not isinstance(hint, HintState) and axis < len(hint) and hint[axis] >= 0


def dim_at(hints: Sequence[Hint], index: int, axis: int) -> int | None:
    """Return input `index`'s dimension at `axis`, None where the input is absent, shapeless or
    shorter."""
    hint = hint_at(hints, index)
    return None if isinstance(hint, HintState) or axis >= len(hint) else hint[axis]


# The cache layout a session assumes where neither `attnws model --cache-layout` nor a
# genai_config.json gives one (`Session.cache_layout`): the one place it is written.
DEFAULT_CACHE_LAYOUT = "shared"


@dataclass(frozen=True)
class Session:
    """What a node's estimate may read beyond the node: ONNX Runtime's session options and the
    model's constants.

    - `max_total_sequence_length`: the session option
      `ep.cuda.gqa_workspace_max_total_sequence_length` (`attnws model --max-total-seq`; 0 unset).
    - `constants`: the names of the model's initializers (ORT prepacks a constant input at session
      creation).
    - `cache_layout`: how a GroupQueryAttention node's past and present hold its cache, "shared" (one
      buffer) or "separate" (present a tensor of its own: a growing cache), `attnws model
      --cache-layout` or genai_config.json's; `DEFAULT_CACHE_LAYOUT` where neither gives it.
    """

    max_total_sequence_length: int = 0
    constants: frozenset[str] = frozenset()
    cache_layout: str = DEFAULT_CACHE_LAYOUT


@dataclass(frozen=True)
class Packing:
    """Where an operator that packs its tokens shows its packing, by input position:
    token_offset [B, S], cumulative_sequence_length [B + 1], the inputs whose dimension 0 is the
    packed token count T, and attention_bias [B or 1, N or 1, S, S]. When query has
    `packed_query_rank` (Q, K and V packed into it), only input 0 carries T."""

    token_offset: int
    cumulative_sequence_length: int
    token_inputs: tuple[int, ...]
    attention_bias: int
    packed_query_rank: int | None = None

    def tokens_of(self, query_rank: int | None) -> tuple[int, ...]:
        """Return the inputs whose dimension 0 is T, for a query of this rank (None: unknown)."""
        if query_rank is not None and query_rank == self.packed_query_rank:
            return self.token_inputs[:1]
        return self.token_inputs


@dataclass(frozen=True, eq=False)
class Schema:
    """An operator's ORT 1.31.1 com.microsoft schema, as ORT registers it
    (`onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema`, compared in
    `tests/model/test_schema_types.py`): what `translate.checked_types` checks a node against.

    - `attribute_types`: the attributes ORT's schema declares, by name, with their
      `onnx.AttributeProto` types (any other attribute makes the model one ORT refuses);
      `required_attributes`, those a node must carry.
    - `required_inputs`: the inputs a node must have (ORT's "Single" parameters).
    - `input_types`: each input's type by position, as ORT's schema writes it: a type constraint
      variable ("T", "T_CACHE", "M") or one fixed type ("tensor(int64)").
    - `type_constraints`: each variable's allowed element types (ONNX names, "float16"). ORT binds
      a variable to the type of the first input that has it, and refuses the model when a later
      input of that variable has another type, or when an input's type is not one its variable
      (or its fixed type) allows.
    - `output_names` (by position; output 0 is the result).
    """

    op: Op
    attribute_types: Mapping[str, int]
    required_attributes: tuple[str, ...]
    required_inputs: tuple[int, ...]
    input_types: tuple[str, ...]
    type_constraints: Mapping[str, tuple[str, ...]]
    output_names: tuple[str, ...]

    def allowed_types(self, index: int) -> tuple[str | None, tuple[str, ...]]:
        """Return input `index`'s type constraint variable (None for a fixed type) and the element
        types (ONNX names) it allows."""
        kind = self.input_types[index]
        if kind in self.type_constraints:
            return kind, self.type_constraints[kind]
        return None, (kind.removeprefix("tensor(").removesuffix(")"),)

    def inputs_of(self, variable: str) -> tuple[int, ...]:
        """Return the inputs, by position, whose type is the constraint variable `variable`."""
        return tuple(i for i, kind in enumerate(self.input_types) if kind == variable)

    @property
    def index_inputs(self) -> tuple[int, ...]:
        """The int32 index inputs (type M), by position."""
        return self.inputs_of("M")

    @property
    def op_type(self) -> str:
        """Return the ONNX op type the reader reads (com.microsoft)."""
        return self.op.onnx_name

    @property
    def input_names(self) -> tuple[str, ...]:
        """Return the operator's inputs by position (the spec's names)."""
        return tuple(input_names(self.op))


@dataclass(frozen=True)
class NodeInputs:
    """What the adapter reads from one attention node, and the reader that read it: input 0's
    element type, each input's ONNX element type (`elem_types`, 0 unknown or absent), the
    attributes, one hint per input position, why the shapes are not fully known, the output names
    and the input names each hint was read from (by position; "" omitted)."""

    reader: "NodeReader"
    element_type: str | None  # ONNX name of input 0's element type ("float16"), None when unknown
    attributes: dict[str, Any]
    hints: tuple[Hint, ...]
    unresolved: tuple[str, ...]
    outputs: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    elem_types: tuple[int, ...] = ()

    @property
    def op(self) -> Op:
        """The node's operator."""
        return self.reader.op

    @property
    def sizing_attributes(self) -> dict[str, Any]:
        """The attributes as ORT's kernel reads them for sizing: a flag attribute (the reader's
        `flag_attributes`) is true only when it is exactly 1 (ORT compares with 1)."""
        flags = [name for name in self.reader.flag_attributes if name in self.attributes]
        if not flags:
            return self.attributes
        return {**self.attributes, **{name: int(self.attributes[name] == 1) for name in flags}}

    def has_output(self, index: int) -> bool:
        """Return whether output `index` is present (named and within the node's outputs)."""
        return output_present(self.outputs, index)

    @property
    def has_present(self) -> bool:
        """Whether the node has every one of the reader's present outputs (the KV cache; False
        for an operator without them)."""
        present = self.reader.present_outputs
        return bool(present) and all(self.has_output(i) for i in present)

    def elem_type(self, index: int) -> int:
        """Return input `index`'s ONNX element type (0: absent or unknown)."""
        return self.elem_types[index] if index < len(self.elem_types) else 0

    def unmodelled(self) -> tuple[str, str]:
        """Return (reason, error status) when the node's outputs make it one attnws cannot size
        whatever its shapes, else ("", "") (the reader's `unmodelled`)."""
        return self.reader.unmodelled(self.outputs)


def attention_fields(p: Any, dim: DimFactory) -> dict[str, Any]:
    """Return the `Target` fields of the shared attention problem (the packed family's and
    MultiHeadAttention's: `num_heads`, `qk_head_size`, the bias and attention-bias flags): heads
    exact (an attribute), head_size from `dim`."""
    return {"heads": DimRange(p.num_heads, p.num_heads), "head_size": dim("head_size", p.qk_head_size),
            "qkv_bias": p.has_bias, "attn_bias": p.has_attention_bias,
            "attn_bias_broadcast_batch": bool(p.broadcast_attn_bias_dim_0),
            "attn_bias_broadcast_heads": bool(p.broadcast_attn_bias_dim_1)}


@dataclass(frozen=True, eq=False)
class NodeReader(Schema, abc.ABC):
    """One operator's node as attnws reads it: its `Schema` and how the shared pipeline reads the
    node. Readers are singletons, compared by identity.

    - `any_domain`: whether a node of this op type in any domain is taken for this operator (and
      then refused outside com.microsoft); else only in com.microsoft and the default domain, the
      op type being a common name.
    - `packing`: where the node packs its tokens (`Packing`), from which attnws derives B + 1
      and T <= B * S; None when the node's lengths are its own inputs.
    - `flag_attributes`: integer attributes ORT takes as true only when exactly 1.
    - `present_outputs`: the outputs that come together or not at all (the KV cache); the node
      "has present" when all of them are present.
    - `unsized_inputs`: inputs attnws does not model that leave the output shapes unchanged:
      shape inference reads them as absent.
    - `ties`: target dimensions the target leaves None when the model keeps them equal to a
      partner in every run (dimension -> partner; MultiHeadAttention's kv_seq -> seq: L = S),
      both read by `dims_read`.
    - `session_options`: the `Session` fields the reader's `estimate` or `target_fields` reads.
    - `assumptions`: what the model report says, one line under its title, of a session option
      the reader reads (a `Session` field, by name) that neither the command line nor a
      genai_config.json gives: the value its default assumes, and the flag that sets another.
    - `value_advice`: what a `--dim` refused as changing nothing (`inert`) adds where the graph
      computes the value of one of the node's index inputs from that symbol: what bounds the
      value the node's estimate reads instead (a sentence; "" for nothing).
    """

    any_domain: bool
    packing: Packing | None = None
    flag_attributes: tuple[str, ...] = ()
    present_outputs: tuple[int, ...] = ()
    unsized_inputs: tuple[int, ...] = ()
    ties: Mapping[str, str] = field(default_factory=dict)
    session_options: tuple[str, ...] = ()
    assumptions: Mapping[str, str] = field(default_factory=dict)
    value_advice: str = ""

    @property
    def ort_estimator(self) -> bool:
        """Whether ORT has a Level-1 estimator for the operator (else the Level-1 bound is
        attnws's own, the same rules): its spec family's `estimate.ORT_ESTIMATOR`."""
        return family_of(self.op).estimate.ORT_ESTIMATOR

    @abc.abstractmethod
    def role(self, index: int, axis: int, rank: int) -> str:
        """Return what input `index` axis `axis` (of an input of `rank`) is to the operator, in
        words ("the batch size B"): where a missing symbolic dimension is needed."""

    @abc.abstractmethod
    def unmodelled(self, outputs: Sequence[str]) -> tuple[str, str]:
        """Return (reason, error status) when the node's outputs (names by position, "" omitted)
        make it one attnws cannot size whatever its shapes, else ("", "")."""

    @abc.abstractmethod
    def output_shapes(self, node: NodeInputs, problem: Any) -> list[OutputType]:
        """Return the node's output types by position, what ONNX shape inference propagates:
        `problem` is `sizing_problem`'s for the node (None where its shapes are unresolved or
        give none)."""

    @abc.abstractmethod
    def exact_dims(self, hints: Sequence[Hint], attributes: dict[str, Any]) -> frozenset[str]:
        """Return the problem dimensions (Target names: batch, seq, head_size, ...) that the node's
        static ONNX dimensions or its attributes fix, from hints read without bounds (-1 where a
        dimension is symbolic, `static_dim`)."""

    @abc.abstractmethod
    def target_fields(self, problem: Any, dim: DimFactory, exact_heads: bool, session: Session) -> dict[str, Any]:
        """Return the keyword arguments of the solver's `Target` for a sized node's problem beyond
        its operator, element size, B, S and the configuration: each dimension from
        `dim(name, value[, lowest])`, exact where the model fixes it; `exact_heads` says an
        attribute fixes the head sizes; `session` what the estimate read."""

    @abc.abstractmethod
    def absent_dim(self, dim: str) -> str:
        """Return why the node's target has no range for the pattern dimension `dim` (batch, seq,
        tokens, kv_seq, past), in words, or "" where the reader has nothing to say."""

    # -- hooks with the shared behaviour as their default -----------------------------------------

    def estimate(self, node: NodeInputs, config: Any, session: Session) -> Estimate:
        """Return the node's Level-1 estimate (its shapes resolved and its outputs modelled):
        ORT's adapter (`estimate_for_node`: op type, element type, num_heads, qkv_hidden_sizes,
        the present outputs, the positional shapes read as maxima)."""
        return estimate_for_node(self.op_type, node.element_type, node.sizing_attributes, node.hints, config,
                                 has_present=node.has_present)

    def sizing_problem(self, node: NodeInputs) -> Any:
        """Return the spec's problem for the node's shapes (the `unsized_inputs` read as absent),
        None where num_heads and the shapes do not give one; raise the builder's error where the
        spec refuses them: what `output_shapes` sizes the outputs from."""
        element_size = ELEMENT_TYPES.get(node.element_type)
        num_heads = node.attributes.get("num_heads")
        sizes = node.attributes.get("qkv_hidden_sizes")
        if config_problem(self.op, element_size, num_heads, sizes):
            return None
        sized = tuple(MISSING if i in self.unsized_inputs else hint for i, hint in enumerate(node.hints))
        problem, _ = problem_from_hints(self.op, element_size, num_heads, sized, sizes, has_present=node.has_present,
                                        unidirectional=bool(node.sizing_attributes.get("unidirectional", 0)))
        return problem

    def dims_read(self, hints: Sequence[Hint]) -> dict[str, int]:
        """Return the target dimensions the node's input shapes give, by name (those of `ties`
        at least), each where the node has it."""
        return {}

    def unstated(self, estimate: Estimate, target: Target) -> str:
        """Return why the solver's target does not state the node its estimate sized (in words),
        or "" where it does."""
        return ""
