"""The package's shape: imports go one way between layers, no module imports itself round a circle,
and the layers that sit above another hand their functions in instead of being imported from below.

Every `import` and `from ... import` of attnws is read with `ast`, those inside functions included
(a lazy import is still an arrow).
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

import pytest

from attnws.model import commands as model_commands
from attnws.spec import commands as spec_commands
from attnws.spec.errors import UsageError
from attnws.spec.families import FAMILIES, FAMILY_MODULES

PACKAGE = Path(__file__).resolve().parents[1] / "attnws"

# What each layer may import (besides itself). The root modules (cli, __main__) compose them all.
LAYERS = {
    "spec": set(),
    "solver": {"spec"},
    "kernels": {"spec"},
    "model": {"spec", "solver"},
    "plot": {"spec", "solver", "model"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Return the attnws modules `path` imports, relative imports resolved; `from X import name`
    counts X.name when that is a module, and X itself when some name is not."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("attnws"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("attnws"):
                continue
            submodules = {f"{target}.{a.name}" for a in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
    return {m for m in found if m in known and m != name}


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(paths)
    return {name: imports_of(path, known) for name, path in paths.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or parts[-1] in LAYERS else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Return every arrow from a layer to one it may not import."""
    bad = []
    for source, targets in graph.items():
        own = layer(source)
        if own not in LAYERS:
            continue
        for target in targets:
            other = layer(target)
            if other != own and other not in LAYERS[own]:
                bad.append(f"{source} -> {target}")
    return sorted(bad)


def test_no_module_imports_itself_round_a_circle():
    assert cycles(import_graph()) == []


def test_no_layer_imports_a_layer_above_it_or_beside_it():
    assert upward(import_graph()) == []


def test_the_walk_sees_circles_and_upward_arrows():
    """Planted: a circle of two modules, and spec importing the solver from inside a function."""
    graph = import_graph()
    graph["attnws.spec.layout"] = graph["attnws.spec.layout"] | {"attnws.spec.containment"}
    graph["attnws.spec.containment"] = graph["attnws.spec.containment"] | {"attnws.spec.layout"}
    assert any({"attnws.spec.containment", "attnws.spec.layout"} <= set(c) for c in cycles(graph))
    source = "def f():\n    from ..solver.routes import dispatch_report\n"
    planted = PACKAGE / "spec" / "_planted_upward.py"
    known = set(graph) | {"attnws.spec._planted_upward"}
    try:
        planted.write_text(source)
        arrows = imports_of(planted, known)
    finally:
        planted.unlink()
    graph["attnws.spec._planted_upward"] = arrows
    assert upward(graph) == ["attnws.spec._planted_upward -> attnws.solver.routes"]


def _parsed(register, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_estimate_without_the_solver_registered_is_the_spec_estimate_alone():
    """The spec does not import the solver: without the solver's hooks, `estimate --target` gives
    the spec's estimate and no dispatch report, and `--policy tight` is refused."""
    ns = _parsed(spec_commands.register, ["estimate", "--target", "bert-base-pmha-fp16-sm80"])
    result = ns.handler(ns, lambda message: None)
    assert result.exit_code == 0 and "dispatch" not in result.json and "tight" not in result.json
    assert result.json["total_workspace_bytes"] > 0
    tight = _parsed(spec_commands.register, ["estimate", "--target", "bert-base-pmha-fp16-sm80", "--policy", "tight"])
    with pytest.raises(UsageError, match="--policy tight needs the solver"):
        tight.handler(tight, lambda message: None)


def test_model_plot_without_the_plot_layer_is_refused(tmp_path):
    ns = _parsed(model_commands.register, ["model", str(tmp_path / "m.onnx"), "--plot", str(tmp_path / "m.png")])
    with pytest.raises(UsageError, match="no plotter is registered"):
        ns.handler(ns, lambda message: None)


# -- the family shape -------------------------------------------------------------------------------

SPEC = PACKAGE / "spec"


def family_folders() -> list[Path]:
    return sorted(p.parent for p in SPEC.glob("*/__init__.py") if p.parent.name != "backends")


def shape_problems(folders: dict[str, set[str]]) -> list[str]:
    """Return what is wrong with the family folders (name -> module names): a folder the registry
    does not list or a family without a folder, and a folder whose modules differ from FAMILY_MODULES."""
    registered = {f.name for f in FAMILIES}
    problems = [f"{name}: not a registered family" for name in sorted(set(folders) - registered)]
    problems += [f"{name}: registered without a folder" for name in sorted(registered - set(folders))]
    problems += [f"{name}: {sorted(modules ^ set(FAMILY_MODULES))}" for name, modules in sorted(folders.items())
                 if name in registered and modules != set(FAMILY_MODULES)]
    return problems


def test_every_family_folder_is_registered_with_the_same_modules():
    folders = {p.name: {m.stem for m in p.glob("*.py")} - {"__init__"} for p in family_folders()}
    assert shape_problems(folders) == []
    planted = {**folders, "mha": folders["mha"] - {"fields"} | {"mha_only"}, "ring": set(FAMILY_MODULES)}
    assert shape_problems(planted) == ["ring: not a registered family", "mha: ['fields', 'mha_only']"]


def test_every_family_module_defines_the_same_hooks():
    """Each family module offers every function the shared modules (of every layer) call through
    the registry (`family_of(op).<module>.<hook>`, `op_fields(op).<hook>`): what one family has,
    every family has."""
    # The kernels and the model layer keep registries of their own (tested beside them).
    shared = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py")
                        if p.parent.parent != SPEC and not {"kernels", "model"} & set(p.relative_to(PACKAGE).parts))
    for module in FAMILY_MODULES:
        called = set(re.findall(rf"(?:family_of\([^()]*\)|family)\.{module}\.([A-Za-z_]+)", shared))
        if module == "fields":
            every = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
            called |= set(re.findall(r"op_fields\([^()]*\)\.([A-Za-z_]+)", every))
        called |= {"BACKENDS"} if module == "problem" else set()
        assert called or module == "builder", f"no shared module calls the {module} hooks"
        for family in FAMILIES:
            missing = {name for name in called if not hasattr(family.modules[module], name)}
            assert not missing, f"attnws.spec.{family.name}.{module} lacks {sorted(missing)}"


def family_crossings(graph: dict[str, set[str]]) -> list[str]:
    """Return each import from one family's spec module into another family's."""
    names = [f.name for f in FAMILIES]

    def family(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) >= 4 and parts[:2] == ["attnws", "spec"] and parts[2] in names else None

    return sorted(f"{s} -> {t}" for s, targets in graph.items() for t in targets
                  if family(s) and family(t) and family(s) != family(t))


def registry_bypasses(graph: dict[str, set[str]]) -> list[str]:
    """Return each import from a shared spec module (not the registry) into a family's behaviour."""
    behaviour = {"dispatch", "reachability", "recipe", "footprint", "estimate", "failures", "inputs", "builder"}
    families = {f.name for f in FAMILIES}
    return sorted(f"{s} -> {t}" for s, targets in graph.items() for t in targets
                  if s.startswith("attnws.spec.") and s.count(".") == 2 and s != "attnws.spec.families"
                  and t.count(".") == 3 and t.split(".")[2] in families and t.split(".")[3] in behaviour)


def test_no_family_imports_another_family():
    graph = import_graph()
    assert family_crossings(graph) == []
    graph["attnws.spec.mha.recipe"] = graph["attnws.spec.mha.recipe"] | {"attnws.spec.packed.recipe"}
    assert family_crossings(graph) == ["attnws.spec.mha.recipe -> attnws.spec.packed.recipe"]


def test_shared_modules_do_not_reach_into_a_family_for_its_behaviour():
    """The shared entry points go through the registry: none imports a family's behaviour."""
    graph = import_graph()
    assert registry_bypasses(graph) == []
    graph["attnws.spec.containment"] = graph["attnws.spec.containment"] | {"attnws.spec.mha.recipe"}
    assert registry_bypasses(graph) == ["attnws.spec.containment -> attnws.spec.mha.recipe"]


def backend_twins(sources: dict[str, str]) -> list[str]:
    """Return each function of `sources` (spec path -> text, outside backends/) that has the name
    of something `attnws.spec.backends` defines."""
    defined: dict[str, str] = {}
    for path in (SPEC / "backends").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) or isinstance(node, ast.Assign):
                names = [node.name] if isinstance(node, ast.FunctionDef) else [
                    t.id for t in node.targets if isinstance(t, ast.Name)]
                defined.update({n: path.stem for n in names if not n.startswith("_")})
    return [f"{where} defines {node.name}, which backends/{defined[node.name]}.py defines"
            for where, text in sources.items() for node in ast.parse(text).body
            if isinstance(node, ast.FunctionDef) and node.name in defined]


def test_each_backend_is_written_once():
    """What `attnws.spec.backends` defines is defined nowhere else in the spec."""
    sources = {str(p.relative_to(SPEC)): p.read_text() for p in SPEC.rglob("*.py") if p.parent.name != "backends"}
    assert backend_twins(sources) == []
    planted = {"packed/recipe.py": "def softmax_lse_bytes(d, p):\n    return 4 * p.batch_size\n"}
    assert backend_twins(planted) == ["packed/recipe.py defines softmax_lse_bytes, which backends/flash.py defines"]
