"""The kernels layer has the spec's family shape: one folder per spec family, every one in the
registry, with the same modules, each offering the hooks the one harness calls through
`attnws.kernels.families`; a family's other modules are the ones its hook modules compose (a module
per route); no family imports another; the backends' kernels are written once, in
`attnws/kernels/backends/`, and nowhere in a family. Each check is a function of plain data, run on
the package and on a planted violation, so a check that can no longer fire fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

from attnws.kernels.families import FAMILIES as KERNEL_FAMILIES, FAMILY_MODULES, kernel_family
from attnws.spec.families import FAMILIES

from tests.imports import top_level_names
from tests.test_architecture import import_graph

KERNELS = Path(__file__).resolve().parents[2] / "attnws" / "kernels"
BACKENDS = "backends"
SPEC_NAMES = sorted(f.name for f in FAMILIES)
FAMILY_NAMES = SPEC_NAMES
def folders() -> dict[str, set[str]]:
    """Return each package folder under attnws/kernels (backends included) -> its module names."""
    return {p.parent.name: {m.stem for m in p.parent.glob("*.py")} - {"__init__"}
            for p in KERNELS.glob("*/__init__.py")}


def definitions() -> dict[str, dict[str, set[str]]]:
    """Return folder -> module -> the names it defines, for backends and every family folder."""
    return {folder: {module: top_level_names(KERNELS / folder / f"{module}.py") for module in modules}
            for folder, modules in folders().items()}


# -- the checks, on data ------------------------------------------------------------------------------

def composed(graph: dict[str, set[str]], found: dict[str, set[str]], modules: tuple[str, ...]) -> dict[str, set[str]]:
    """Return family -> the modules of its own folder its hook modules (`modules`) import, directly
    or through one another."""
    out = {}
    for family, present in found.items():
        package = f"attnws.kernels.{family}."
        reached, todo = set(), [package + m for m in modules if m in present]
        while todo:
            for target in graph.get(todo.pop(), set()):
                name = target[len(package):] if target.startswith(package) else ""
                if name in present and name not in modules and name not in reached:
                    reached.add(name)
                    todo.append(target)
        out[family] = reached
    return out


def folder_problems(found: dict[str, set[str]], families: list[str], modules: tuple[str, ...],
                    extra: dict[str, set[str]]) -> list[str]:
    """Return what is wrong with the folders: not exactly the families (and backends), or a family
    lacking a module of `modules`, or holding one besides them that `extra` (what its hook modules
    compose) does not name."""
    problems = []
    registered = sorted(set(found) - {BACKENDS})
    if registered != families:
        problems.append(f"family folders {registered}, the spec's families {families}")
    for name in families:
        if name in found:
            missing = sorted(set(modules) - found[name])
            stray = sorted(found[name] - set(modules) - extra.get(name, set()))
            if missing:
                problems.append(f"{name}: lacks {missing}")
            if stray:
                problems.append(f"{name}: modules no hook composes {stray}")
    return problems


def allowed_extras(found: dict[str, set[str]]) -> dict[str, set[str]]:
    """Return family -> the modules beside FAMILY_MODULES it may hold: those its hooks compose."""
    reached = composed(import_graph(), found, FAMILY_MODULES)
    return {name: reached.get(name, set()) for name in found}


def crossing_imports(graph: dict[str, set[str]], families: list[str]) -> list[str]:
    """Return every arrow from a kernels family module to another family's module, and every arrow
    from the backends to any family."""
    def family(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) >= 4 and parts[:2] == ["attnws", "kernels"] else None

    bad = []
    for source, targets in graph.items():
        own = family(source)
        if own not in families and own != BACKENDS:
            continue
        bad += [f"{source} -> {t}" for t in targets if family(t) in families and family(t) != own]
    return sorted(bad)


def duplicated_backends(defined: dict[str, dict[str, set[str]]], families: list[str]) -> list[str]:
    """Return each family module named as a backend module, and each name a backend module defines
    that a family module defines again."""
    backends = defined[BACKENDS]
    by_name = {name: module for module, names in backends.items() for name in names}
    bad = []
    for family in families:
        for module, names in defined.get(family, {}).items():
            if module in backends:
                bad.append(f"{family}/{module}.py is a backend module's name")
            bad += [f"{family}/{module}.py defines {n}, which backends/{by_name[n]}.py defines"
                    for n in sorted(names & set(by_name))]
    return bad


def missing_hooks(called: dict[str, set[str]], defined: dict[str, dict[str, set[str]]],
                  families: list[str]) -> list[str]:
    """Return each hook the shared modules call (`module -> functions`) that a family lacks."""
    return [f"{family}/{module}.py lacks {hook}" for module, hooks in called.items() for family in families
            for hook in sorted(hooks - defined.get(family, {}).get(module, set()))]


def called_hooks() -> dict[str, set[str]]:
    """Return module -> the functions the shared kernels modules call as `family.<module>.<hook>`
    or `kernel_family(...).<module>.<hook>`."""
    shared = "\n".join(p.read_text() for p in KERNELS.glob("*.py"))
    called: dict[str, set[str]] = {}
    for module, hook in re.findall(r"(?:kernel_family\([^()]*\)|family)\.([a-z_]+)\.([A-Za-z_]+)\(", shared):
        called.setdefault(module, set()).add(hook)
    return called


def shared_reaching_into_families(graph: dict[str, set[str]], families: list[str]) -> list[str]:
    """Return each arrow from a shared kernels module (the root) to a family's module: the root
    goes through the registry."""
    return sorted(f"{source} -> {t}" for source, targets in graph.items()
                  if source.startswith("attnws.kernels.") and source.count(".") == 2
                  for t in targets if t.startswith("attnws.kernels.") and t.count(".") >= 3
                  and t.split(".")[2] in families)


# -- the package ----------------------------------------------------------------------------------------

def test_the_registry_is_keyed_by_every_spec_family():
    assert sorted(KERNEL_FAMILIES) == SPEC_NAMES and all(kernel_family(f.ops[0]).name == f.name for f in FAMILIES)


def test_the_family_folders_are_the_spec_families_with_the_same_modules():
    found = folders()
    assert folder_problems(found, FAMILY_NAMES, FAMILY_MODULES, allowed_extras(found)) == []


def test_the_route_modules_a_family_composes_are_found():
    reached = composed(import_graph(), folders(), FAMILY_MODULES)
    assert reached["gqa"] == {"xqa_route", "flash_route", "mea_route", "unfused_route", "preparation"}
    assert reached["packed"] == reached["mha"] == set()


def test_no_family_imports_another_and_the_backends_import_none():
    assert crossing_imports(import_graph(), FAMILY_NAMES) == []


def test_the_shared_modules_reach_the_families_through_the_registry_only():
    assert shared_reaching_into_families(import_graph(), FAMILY_NAMES) == []


def test_the_backend_kernels_are_not_duplicated_in_a_family():
    assert duplicated_backends(definitions(), FAMILY_NAMES) == []


def test_every_family_offers_every_hook_the_shared_modules_call():
    called = called_hooks()
    assert set(FAMILY_MODULES) - {"layouts"} <= set(called), called
    assert missing_hooks(called, definitions(), FAMILY_NAMES) == []


# -- planted violations: each check fires ------------------------------------------------------------

def test_a_family_folder_missing_or_extra_is_caught():
    found = folders()
    extra = allowed_extras(found)
    assert folder_problems({**found, "xyz": set(FAMILY_MODULES)}, FAMILY_NAMES, FAMILY_MODULES, extra)
    assert folder_problems({k: v for k, v in found.items() if k != FAMILY_NAMES[0]}, FAMILY_NAMES, FAMILY_MODULES,
                           extra)


def test_a_family_with_an_extra_or_a_missing_module_is_caught():
    found = folders()
    extra = allowed_extras(found)
    planted = {**found, FAMILY_NAMES[0]: found[FAMILY_NAMES[0]] | {"mha_only_glue"}}
    assert folder_problems(planted, FAMILY_NAMES, FAMILY_MODULES, extra) == [
        f"{FAMILY_NAMES[0]}: modules no hook composes ['mha_only_glue']"]
    planted = {**found, "gqa": found["gqa"] - {"checks"}}
    assert folder_problems(planted, FAMILY_NAMES, FAMILY_MODULES, extra) == ["gqa: lacks ['checks']"]


def test_a_route_module_no_hook_imports_is_not_composed():
    graph = import_graph()
    graph["attnws.kernels.gqa.routes"] = graph["attnws.kernels.gqa.routes"] - {"attnws.kernels.gqa.xqa_route"}
    assert "xqa_route" not in composed(graph, folders(), FAMILY_MODULES)["gqa"]


def test_a_family_importing_another_is_caught():
    graph = import_graph()
    first, second = FAMILY_NAMES[:2]
    source, target = f"attnws.kernels.{first}.routes", f"attnws.kernels.{second}.layouts"
    graph[source] = graph[source] | {target}
    assert crossing_imports(graph, FAMILY_NAMES) == [f"{source} -> {target}"]
    graph["attnws.kernels.backends.flash"] = graph["attnws.kernels.backends.flash"] | {target}
    assert f"attnws.kernels.backends.flash -> {target}" in crossing_imports(graph, FAMILY_NAMES)


def test_a_shared_module_importing_a_family_is_caught():
    graph = import_graph()
    target = f"attnws.kernels.{FAMILY_NAMES[0]}.reference"
    graph["attnws.kernels.validate"] = graph["attnws.kernels.validate"] | {target}
    assert shared_reaching_into_families(graph, FAMILY_NAMES) == [f"attnws.kernels.validate -> {target}"]


def test_a_backend_kernel_copied_into_a_family_is_caught():
    defined = definitions()
    family = FAMILY_NAMES[-1]
    planted = {**defined, family: {**defined[family], "routes": defined[family]["routes"] | {"flash_attention"}}}
    assert duplicated_backends(planted, FAMILY_NAMES) == [
        f"{family}/routes.py defines flash_attention, which backends/flash.py defines"]
    renamed = {**defined, family: {**defined[family], "trt": set()}}
    assert duplicated_backends(renamed, FAMILY_NAMES) == [f"{family}/trt.py is a backend module's name"]


def test_a_family_lacking_a_hook_is_caught():
    defined = definitions()
    family = FAMILY_NAMES[0]
    planted = {**defined, family: {**defined[family], "cost": defined[family]["cost"] - {"stage_seconds"}}}
    assert missing_hooks(called_hooks(), planted, FAMILY_NAMES) == [f"{family}/cost.py lacks stage_seconds"]
