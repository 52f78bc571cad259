"""What a source file imports: the top-level package of every absolute import, read with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path


def imported_packages(path: Path) -> set[str]:
    """Return the top-level package names the file imports absolutely (relative imports left out)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add((node.module or "").split(".")[0])
    return names


def top_level_names(path: Path) -> set[str]:
    """Return the public functions, classes and constants a module defines at its top level
    (imports left out)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}
