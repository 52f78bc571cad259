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
