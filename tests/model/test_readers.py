"""The model layer's node readers: one module per spec family, the same names in each, a registry
that covers exactly the spec's operators, and no other module of `attnws/model` naming an operator.
"""

from __future__ import annotations

import ast
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Sequence

import onnx
import pytest

from attnws.model import registry
from attnws.model.reader import NodeReader, Session
from attnws.model.registry import FAMILY_READERS, READERS, reader_for, reader_of
from attnws.spec.families import FAMILIES
from attnws.spec.hints import MISSING
from attnws.spec.inputs import input_names
from attnws.spec.problem import Op
from tests.imports import top_level_names

MODEL = Path(registry.__file__).resolve().parent
READER_FOLDER = MODEL / "readers"
# The modules that may name operators: the readers (the folder) and the registry.
NAMING = {MODEL / "registry.py"}
# Modules outside the readers that genuinely name operators, and why.
ALLOWED = {
    # Builds the example packed encoder (tests, benchmarks, the README's pictures): which of the
    # packed operators it builds, and their inputs, is its subject, not a node it reads.
    MODEL / "examples.py",
}


# -- the registry ---------------------------------------------------------------------------------------

def registry_faults(families: Sequence[Any], family_readers: dict[str, Any]) -> list[str]:
    """Return what is wrong with a reader registry against the spec's families: every family has a
    reader module in FAMILY_READERS, in the spec's order, reading exactly the family's operators."""
    faults = []
    names = [f.name for f in families]
    faults += [f"{name}: no reader" for name in names if name not in family_readers]
    faults += [f"{name}: a reader of no spec family" for name in family_readers if name not in names]
    if list(family_readers) != [name for name in names if name in family_readers]:
        faults.append(f"FAMILY_READERS {list(family_readers)} is not in the spec's order {names}")
    for family in families:
        module = family_readers.get(family.name)
        if module is not None and tuple(r.op for r in module.READERS) != family.ops:
            faults.append(f"{family.name}: its readers read {[r.op for r in module.READERS]}, not {list(family.ops)}")
    return faults


def test_the_registry_has_one_reader_module_per_spec_family_in_the_spec_order():
    assert registry_faults(FAMILIES, FAMILY_READERS) == []
    assert list(FAMILY_READERS) == [f.name for f in FAMILIES]
    for name, module in FAMILY_READERS.items():
        assert module.__name__ == f"attnws.model.readers.{name}"
    on_disk = {p.stem for p in READER_FOLDER.glob("*.py")} - {"__init__"}
    assert on_disk == set(FAMILY_READERS)


def _unread(f: Any, r: dict[str, Any]) -> tuple[Any, str]:
    """The spec's last family without a reader."""
    name = f[-1].name
    return (f, {k: v for k, v in r.items() if k != name}), f"{name}: no reader"


def _out_of_order(f: Any, r: dict[str, Any]) -> tuple[Any, str]:
    return (f, dict(reversed(r.items()))), "is not in the spec's order"


def _planted_family(f: Any, r: dict[str, Any]) -> tuple[Any, str]:
    return ((*f, replace(f[0], name="planted")), r), "planted: no reader"


def _stray_reader(f: Any, r: dict[str, Any]) -> tuple[Any, str]:
    return (f, {**r, "planted": r[f[0].name]}), "planted: a reader of no spec family"


def _wrong_operators(f: Any, r: dict[str, Any]) -> tuple[Any, str]:
    first, last = f[0], f[-1]
    return ((replace(first, ops=last.ops), *f[1:]), r), f"{first.name}: its readers read"


@pytest.mark.parametrize("plant", [_unread, _out_of_order, _planted_family, _stray_reader, _wrong_operators],
                         ids=lambda plant: plant.__name__.strip("_").replace("_", " "))
def test_the_registry_check_sees_a_planted_fault(plant):
    args, fault = plant(FAMILIES, FAMILY_READERS)
    faults = registry_faults(*args)
    assert any(fault in f for f in faults), faults


IN_PROGRESS_WORDS = ("in_progress", "inprogress")


def in_progress_names(source: str) -> list[str]:
    """Return where the source names an "in progress" path in code: a module, function, class,
    variable, attribute or string (a JSON key) whose name says so (docstrings and comments are
    prose, not code)."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            names = [node.value]
        found += [f"line {node.lineno}: {name}" for name in names
                  if any(word in name.lower() for word in IN_PROGRESS_WORDS)]
    return found


def test_no_model_module_names_an_in_progress_path():
    """Every family's nodes flow through the one pipeline: no model module keeps a side path."""
    assert not (MODEL / "in_progress.py").exists()
    for path in sorted(MODEL.rglob("*.py")):
        assert in_progress_names(path.read_text()) == [], path.relative_to(MODEL.parent)


def test_the_in_progress_check_sees_a_planted_side_path():
    planted = '''"""Prose may say in_progress."""
from .in_progress import check_nodes
IN_PROGRESS_READERS = {}

def in_progress_reader(op_type):
    """A docstring may say in_progress_reader."""
    return {"in_progress_nodes": registry.in_progress}
'''
    assert sorted(in_progress_names(planted)) == [
        "line 2: in_progress", "line 3: IN_PROGRESS_READERS", "line 5: in_progress_reader",
        "line 7: in_progress", "line 7: in_progress_nodes"]


def test_the_readers_cover_exactly_the_spec_operators_by_onnx_op_type():
    assert sorted(r.op.value for r in READERS.values()) == sorted(o.value for o in Op)
    assert [r.op for r in READERS.values()] == [op for family in FAMILIES if family.name in FAMILY_READERS
                                                 for op in family.ops]
    for op_type, reader in READERS.items():
        assert op_type == reader.op_type == reader.op.onnx_name
        assert reader_of(op_type) is reader is reader_for(reader.op)


def test_every_reader_module_offers_the_same_names():
    offered = {name: top_level_names(Path(module.__file__)) for name, module in FAMILY_READERS.items()}
    assert all(names == {"Reader", "READERS"} for names in offered.values()), offered
    for module in FAMILY_READERS.values():
        assert issubclass(module.Reader, NodeReader) and not module.Reader.__abstractmethods__
        assert module.READERS and all(type(r) is module.Reader for r in module.READERS)


def test_each_reader_agrees_with_the_spec_inputs_and_onnx_types():
    """Positions a reader names are inputs the spec's operator has, where the spec names them."""
    for reader in READERS.values():
        names = input_names(reader.op)
        positions = set(reader.required_inputs) | set(reader.index_inputs) | set(reader.unsized_inputs)
        assert positions <= set(range(len(names)))
        assert 0 in reader.required_inputs and reader.output_names[0] == "output"
        assert set(reader.present_outputs) <= set(range(1, len(reader.output_names)))
        assert reader.attribute_types["num_heads"] == onnx.AttributeProto.INT
        assert set(reader.flag_attributes) <= set(reader.attribute_types)
        assert "float16" in reader.type_constraints["T"]  # and float, but for PagedAttention (fp16 / bf16 only)
        assert set(reader.session_options) <= {f.name for f in fields(Session)}
        assert set(reader.assumptions) <= set(reader.session_options)  # said of an option the reader reads
        p = reader.packing
        if p is not None:
            assert (names[p.token_offset], names[p.cumulative_sequence_length], names[p.attention_bias]) == \
                ("token_offset", "cumulative_sequence_length", "attention_bias")
            assert p.token_offset in reader.index_inputs and p.cumulative_sequence_length in reader.index_inputs
            assert p.tokens_of(None) == p.token_inputs
            if p.packed_query_rank is not None:
                assert p.tokens_of(p.packed_query_rank) == p.token_inputs[:1]


@pytest.mark.parametrize("key, expected", [
    ((2, 8, 16), {"seq": 8, "kv_seq": 8}),  # separate [B, L, D]
    ((2, 4, 1500, 8), {"seq": 8, "kv_seq": 1500}),  # cross [B, N, L, H]: dim 2
    ((2, 8, 2, 2, 8), {"seq": 8, "kv_seq": 8}),  # packed KV [B, L, N, 2, H]
    (None, {"seq": 8, "kv_seq": 8}),  # packed QKV: no key, L = S
    ((2, -1, 16), {"seq": 8, "kv_seq": -1}),
], ids=["separate", "cross", "packed kv", "packed qkv", "unknown"])
def test_multihead_attention_reads_its_key_length_where_its_format_puts_it(key, expected):
    """`dims_read` gives both dimensions of each of the reader's `ties` (kv_seq and seq)."""
    reader = READERS["MultiHeadAttention"]
    hints = ((2, 8, 16), MISSING if key is None else key)
    assert reader.ties == {"kv_seq": "seq"} and reader.dims_read(hints) == expected


def test_only_the_registry_imports_the_readers_and_the_readers_import_only_the_interface():
    from tests.test_architecture import import_graph  # here: the other checks do not need it

    graph = import_graph()
    readers = {f"attnws.model.readers.{name}" for name in FAMILY_READERS}
    for source, targets in graph.items():
        if source not in ("attnws.model.registry", "attnws.model.readers"):
            assert not targets & readers, f"{source} imports {sorted(targets & readers)}"
    for module in readers:
        model = {t for t in graph[module] if t.startswith("attnws.model.")}
        assert model <= {"attnws.model.reader"}, f"{module} imports {sorted(model)}"


# -- no other module names an operator ---------------------------------------------------------------------

def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (prose, not code)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def operator_names(source: str) -> list[str]:
    """Return where the source names an operator in code: `Op.<member>`, or an ONNX op type in a
    string (f-string parts included; docstrings, prose, are not code)."""
    tree = ast.parse(source)
    prose = _docstrings(tree)
    op_types = [op.onnx_name for op in Op]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Op" \
                and node.attr in Op.__members__:
            found.append(f"line {node.lineno}: Op.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            found += [f"line {node.lineno}: {name!r}" for name in op_types if name in node.value]
    return found


def test_no_model_module_outside_the_readers_names_an_operator():
    for path in sorted(MODEL.rglob("*.py")):
        if path.parent == READER_FOLDER or path in NAMING | ALLOWED:
            continue
        assert operator_names(path.read_text()) == [], path.relative_to(MODEL.parent)


def test_the_allowed_modules_still_name_an_operator():
    """An allowance no longer needed is dropped, not kept."""
    for path in ALLOWED:
        assert operator_names(path.read_text()), path


def test_the_check_sees_a_planted_operator_name():
    planted = '''"""A docstring may say PackedAttention and Op.MHA: it is prose."""

def reserve(op, text):
    """MultiHeadAttention in a docstring is prose too."""
    if op is Op.MHA:
        return f"no {op.onnx_name} node; PackedMultiHeadAttention then"
    return {"PackedAttention": Op.PA}
'''
    assert sorted(operator_names(planted)) == [
        "line 5: Op.MHA", "line 6: 'MultiHeadAttention'", "line 6: 'PackedMultiHeadAttention'",
        "line 7: 'PackedAttention'", "line 7: Op.PA",
    ]
