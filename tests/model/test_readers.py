"""The model layer's node readers: one module per spec family, the same names in each, a registry
that covers exactly the spec's operators, and no other module of `attnws/model` naming an operator.
"""

from __future__ import annotations

import ast
from pathlib import Path

import onnx

from attnws.model import registry
from attnws.model.reader import NodeReader
from attnws.model.registry import FAMILY_READERS, IN_PROGRESS_READERS, READERS, in_progress_reader, reader_for, reader_of
from attnws.spec.families import FAMILIES, IN_PROGRESS
from attnws.spec.inputs import input_names
from attnws.spec.problem import Op
from tests.imports import top_level_names
from tests.test_architecture import import_graph

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

def test_the_registry_has_one_reader_module_per_spec_family_in_the_spec_order():
    assert list(FAMILY_READERS) == [f.name for f in FAMILIES]
    for family in FAMILIES:
        module = FAMILY_READERS[family.name]
        assert module.__name__ == f"attnws.model.readers.{family.name}"
        assert tuple(r.op for r in module.READERS) == family.ops, family.name
    on_disk = {p.stem for p in READER_FOLDER.glob("*.py")} - {"__init__"}
    assert on_disk == set(FAMILY_READERS) | set(IN_PROGRESS_READERS)


def test_an_in_progress_reader_is_one_of_the_spec_in_progress_families_and_no_registered_one():
    assert set(IN_PROGRESS_READERS) <= set(IN_PROGRESS) and not set(IN_PROGRESS_READERS) & set(FAMILY_READERS)
    for name, module in IN_PROGRESS_READERS.items():
        assert module.__name__ == f"attnws.model.readers.{name}"
        assert top_level_names(Path(module.__file__)) >= {"Reader", "READERS"}
        assert all(r.op_type not in READERS and in_progress_reader(r.op_type) is r for r in module.READERS)


def test_the_readers_cover_exactly_the_spec_operators_by_onnx_op_type():
    assert [r.op for r in READERS.values()] == [op for family in FAMILIES for op in family.ops]
    assert {r.op for r in READERS.values()} == set(Op)
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
        assert {"float", "float16"} <= set(reader.element_types)
        p = reader.packing
        if p is not None:
            assert (names[p.token_offset], names[p.cumulative_sequence_length], names[p.attention_bias]) == \
                ("token_offset", "cumulative_sequence_length", "attention_bias")
            assert p.token_offset in reader.index_inputs and p.cumulative_sequence_length in reader.index_inputs
            assert p.tokens_of(None) == p.token_inputs
            if p.packed_query_rank is not None:
                assert p.tokens_of(p.packed_query_rank) == p.token_inputs[:1]


def test_only_the_registry_imports_the_readers_and_the_readers_import_only_the_interface():
    graph = import_graph()
    readers = {f"attnws.model.readers.{name}" for name in (*FAMILY_READERS, *IN_PROGRESS_READERS)}
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
