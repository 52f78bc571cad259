"""What the model layer knows of one operator's ONNX node: the `NodeReader` interface.

Each spec family (`attnws.spec.<family>`) has one reader module, `attnws.model.readers.<family>`,
offering the same names: `Reader` (its `NodeReader` subclass) and `READERS` (one instance per
operator of the family). `attnws.model.registry` lists them by ONNX op type; the shared modules
(`translate`, `derive`, `contrib`, `report`, `reserve`, `render`) look a node's reader up there
and read its fields or call its methods instead of naming operators.

A reader's fields are ORT 1.31.1's com.microsoft schema for the operator (attribute types, the
required inputs, the int32 index inputs, the element types, the outputs) and how attnws reads the
node; its methods are what differs by family in words and in shapes. Input and output positions
are 0-based; dimensions are element counts.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..spec.hints import Hint, HintState, hint_at
from ..spec.inputs import input_names
from ..spec.problem import Op
from ..spec.target import DimRange

OutputType = tuple[int, list[int]] | None  # (ONNX element type, dims); None for an output left unknown
DimFactory = Callable[..., DimRange]  # (problem dimension name, its value[, lowest]) -> its range in a target


def output_present(outputs: Sequence[str], index: int) -> bool:
    """Return whether output `index` is present: within the node's outputs and named."""
    return index < len(outputs) and bool(outputs[index])


def static_dim(hints: Sequence[Hint], index: int, axis: int) -> bool:
    """Return whether input `index` has a known dimension at `axis` (hints read without bounds:
    -1 where a dimension is symbolic)."""
    hint = hint_at(hints, index)
    return not isinstance(hint, HintState) and axis < len(hint) and hint[axis] >= 0


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
    """An operator's ORT 1.31.1 com.microsoft schema: what `translate.checked_types` checks a node
    against. Every reader has it: a `NodeReader`, and a reader declared in progress
    (`registry.IN_PROGRESS_READERS`), which is not one.

    - `attribute_types`: the attributes ORT's schema declares, by name, with their
      `onnx.AttributeProto` types (any other attribute makes the model one ORT refuses).
    - `required_inputs`, `index_inputs` (type M: int32), `element_types` (type T: every other
      input, one type for all), `output_names` (by position; output 0 is the result).
    - `own_type_inputs`: inputs whose schema type is their own, not T.
    """

    op: Op
    attribute_types: Mapping[str, int]
    required_inputs: tuple[int, ...]
    index_inputs: tuple[int, ...]
    element_types: tuple[str, ...]
    output_names: tuple[str, ...]
    own_type_inputs: tuple[int, ...] = field(default=(), kw_only=True)

    @property
    def op_type(self) -> str:
        """Return the ONNX op type the reader reads (com.microsoft)."""
        return self.op.onnx_name

    @property
    def input_names(self) -> tuple[str, ...]:
        """Return the operator's inputs by position (the spec's names)."""
        return tuple(input_names(self.op))


@dataclass(frozen=True, eq=False)
class NodeReader(Schema, abc.ABC):
    """One operator's node as attnws reads it: its `Schema` and how the shared pipeline reads the
    node. Readers are singletons, compared by identity.

    - `any_domain`: whether a node of this op type in any domain is taken for this operator (and
      then refused outside com.microsoft); else only in com.microsoft and the default domain, the
      op type being a common name.
    - `ort_estimator`: whether ORT has a Level-1 estimator for the operator (else the Level-1
      bound is attnws's own, the same rules).
    - `packing`: where the node packs its tokens (`Packing`), from which attnws derives B + 1
      and T <= B * S; None when the node's lengths are its own inputs.
    - `flag_attributes`: integer attributes ORT takes as true only when exactly 1.
    - `present_outputs`: the outputs that come together or not at all (the KV cache); the node
      "has present" when all of them are present.
    - `unsized_inputs`: inputs attnws does not model that leave the output shapes unchanged:
      shape inference reads them as absent.
    """

    any_domain: bool
    ort_estimator: bool
    packing: Packing | None = None
    flag_attributes: tuple[str, ...] = ()
    present_outputs: tuple[int, ...] = ()
    unsized_inputs: tuple[int, ...] = ()

    @abc.abstractmethod
    def role(self, index: int, axis: int, rank: int) -> str:
        """Return what input `index` axis `axis` (of an input of `rank`) is to the operator, in
        words ("the batch size B"): where a missing symbolic dimension is needed."""

    @abc.abstractmethod
    def unmodelled(self, outputs: Sequence[str]) -> tuple[str, str]:
        """Return (reason, error status) when the node's outputs (names by position, "" omitted)
        make it one attnws cannot size whatever its shapes, else ("", "")."""

    @abc.abstractmethod
    def output_shapes(self, problem: Any, hints: Sequence[Hint], has_present: bool,
                      elem_type: int) -> list[OutputType]:
        """Return the node's output types by position for its validated problem (built from
        `hints` with `unsized_inputs` read as absent), all of element type `elem_type` (input 0's
        ONNX element type): what ONNX shape inference propagates."""

    @abc.abstractmethod
    def exact_dims(self, hints: Sequence[Hint], attributes: dict[str, Any]) -> frozenset[str]:
        """Return the problem dimensions (Target names: batch, seq, head_size, ...) that the node's
        static ONNX dimensions or its attributes fix, from hints read without bounds (-1 where a
        dimension is symbolic, `static_dim`)."""

    @abc.abstractmethod
    def target_fields(self, problem: Any, dim: DimFactory, exact_heads: bool) -> dict[str, Any]:
        """Return the family's own keyword arguments of the solver's `Target` for a sized node's
        problem: each dimension from `dim(name, value[, lowest])`, exact where the model fixes it;
        `exact_heads` says an attribute fixes the head sizes."""

    @abc.abstractmethod
    def absent_dim(self, dim: str) -> str:
        """Return why the node's target has no range for the pattern dimension `dim` (batch, seq,
        tokens, kv_seq, past), in words, or "" where the reader has nothing to say."""
