"""The kernels layer has the spec's family shape: one folder per spec family with the same modules,
each offering the hooks the shared harness calls through `attnws.kernels.families`, but for the
families its `IN_PROGRESS` declares (a folder of any modules, left out of the registry); no family
imports another; the backends' kernels are written once, in `attnws/kernels/backends/`, and
nowhere in a family. Each check is a function of plain data, run on the package and on a planted
violation, so a check that can no longer fire fails too.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnws.kernels.families import FAMILIES as KERNEL_FAMILIES, FAMILY_MODULES, IN_PROGRESS, kernel_family
from attnws.spec.errors import InternalError
from attnws.spec.families import FAMILIES

from tests.imports import top_level_names
from tests.test_architecture import import_graph

KERNELS = Path(__file__).resolve().parents[2] / "attnws" / "kernels"
BACKENDS = "backends"
SPEC_NAMES = sorted(f.name for f in FAMILIES)
# A family whose kernels are in progress (attnws.kernels.families.IN_PROGRESS) has a folder of any
# modules before it registers, held to the import and backend rules like a registered family's.
IN_PROGRESS_NAMES = sorted(IN_PROGRESS)
FAMILY_NAMES = sorted(set(SPEC_NAMES) - set(IN_PROGRESS_NAMES))


def folders() -> dict[str, set[str]]:
    """Return each package folder under attnws/kernels (backends included) -> its module names."""
    return {p.parent.name: {m.stem for m in p.parent.glob("*.py")} - {"__init__"}
            for p in KERNELS.glob("*/__init__.py")}


def definitions() -> dict[str, dict[str, set[str]]]:
    """Return folder -> module -> the names it defines, for backends and every family folder."""
    return {folder: {module: top_level_names(KERNELS / folder / f"{module}.py") for module in modules}
            for folder, modules in folders().items()}


# -- the checks, on data ------------------------------------------------------------------------------

def folder_problems(found: dict[str, set[str]], families: list[str], modules: tuple[str, ...],
                    in_progress: tuple[str, ...] = ()) -> list[str]:
    """Return what is wrong with the folders: not exactly the families (and backends, and folders
    of families in progress), or a family whose modules are not exactly `modules`."""
    problems = []
    registered = sorted(set(found) - {BACKENDS, *in_progress})
    if registered != families:
        problems.append(f"family folders {registered}, the spec's families {families}")
    for name in families:
        if name in found and found[name] != set(modules):
            problems.append(f"{name}: modules differ by {sorted(found[name] ^ set(modules))}")
    return problems


def in_progress_problems(in_progress: dict[str, str], spec_families: list[str], registered: list[str],
                         found: dict[str, set[str]]) -> list[str]:
    """Return what is wrong with the declarations of families in progress: each names a spec
    family, says why, has its folder and is not in the registry."""
    problems = []
    for name, why in sorted(in_progress.items()):
        if name not in spec_families:
            problems.append(f"{name}: declared in progress but no spec family")
        if not why.strip():
            problems.append(f"{name}: declared in progress without saying why")
        if name not in found:
            problems.append(f"{name}: declared in progress but has no folder")
        if name in registered:
            problems.append(f"{name}: declared in progress but registered")
    return problems


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

def test_the_registry_is_keyed_by_the_spec_families_but_those_in_progress():
    assert sorted(KERNEL_FAMILIES) == FAMILY_NAMES and FAMILY_NAMES


def test_the_families_in_progress_are_declared_as_such():
    assert in_progress_problems(IN_PROGRESS, SPEC_NAMES, sorted(KERNEL_FAMILIES), folders()) == []
    for family in FAMILIES:  # the shared harness never reaches one
        if family.name in IN_PROGRESS:
            with pytest.raises(InternalError, match="in progress"):
                kernel_family(family.ops[0])


def test_the_family_folders_are_the_spec_families_with_the_same_modules():
    assert folder_problems(folders(), FAMILY_NAMES, FAMILY_MODULES, tuple(IN_PROGRESS_NAMES)) == []


def test_no_family_imports_another_and_the_backends_import_none():
    assert crossing_imports(import_graph(), FAMILY_NAMES + IN_PROGRESS_NAMES) == []


def test_the_shared_modules_reach_the_families_through_the_registry_only():
    assert shared_reaching_into_families(import_graph(), FAMILY_NAMES) == []


def test_the_backend_kernels_are_not_duplicated_in_a_family():
    assert duplicated_backends(definitions(), FAMILY_NAMES + IN_PROGRESS_NAMES) == []


def test_every_family_offers_every_hook_the_shared_modules_call():
    called = called_hooks()
    assert {"inputs", "routes", "reference", "cost"} <= set(called), called
    assert missing_hooks(called, definitions(), FAMILY_NAMES) == []


# -- planted violations: each check fires ------------------------------------------------------------

def test_a_family_folder_missing_or_extra_is_caught():
    found = folders()
    in_progress = tuple(IN_PROGRESS_NAMES)
    assert folder_problems({**found, "xyz": set(FAMILY_MODULES)}, FAMILY_NAMES, FAMILY_MODULES, in_progress)
    assert folder_problems({k: v for k, v in found.items() if k != FAMILY_NAMES[0]}, FAMILY_NAMES, FAMILY_MODULES,
                           in_progress)


def test_an_undeclared_or_wrongly_declared_family_in_progress_is_caught():
    found = folders()
    planted = {**found, "planted": {"harness"}}  # a folder of other modules, not declared in progress
    assert folder_problems(planted, FAMILY_NAMES, FAMILY_MODULES, tuple(IN_PROGRESS_NAMES)) == [
        f"family folders {sorted(FAMILY_NAMES + ['planted'])}, the spec's families {FAMILY_NAMES}"]
    for name in IN_PROGRESS_NAMES:  # the declaration is what lets the folder be
        assert folder_problems(found, FAMILY_NAMES, FAMILY_MODULES, tuple(set(IN_PROGRESS_NAMES) - {name}))
    registered = sorted(KERNEL_FAMILIES)
    assert in_progress_problems({"nope": "why"}, SPEC_NAMES, registered, found) == [
        "nope: declared in progress but no spec family", "nope: declared in progress but has no folder"]
    first = FAMILY_NAMES[0]
    assert in_progress_problems({first: " "}, SPEC_NAMES, registered, found) == [
        f"{first}: declared in progress without saying why", f"{first}: declared in progress but registered"]


def test_a_family_with_an_extra_module_is_caught():
    found = folders()
    planted = {**found, FAMILY_NAMES[0]: found[FAMILY_NAMES[0]] | {"mha_only_glue"}}
    assert folder_problems(planted, FAMILY_NAMES, FAMILY_MODULES, tuple(IN_PROGRESS_NAMES)) == [
        f"{FAMILY_NAMES[0]}: modules differ by ['mha_only_glue']"]


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
