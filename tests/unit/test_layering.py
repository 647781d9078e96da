"""Check rule 1 of the style anchors: broker_core imports no framework, only the edges do."""

from __future__ import annotations

import ast
from pathlib import Path

FRAMEWORKS = frozenset({"django", "celery", "channels", "pyspark", "rest_framework", "daphne"})


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """Return (line, module) for every absolute import in a module's syntax tree."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def framework_imports(path: Path) -> list[str]:
    """Return one 'file:line imports module' entry per framework import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        f"{path}:{line} imports {module}"
        for line, module in imported_modules(tree)
        if module.split(".")[0] in FRAMEWORKS
    ]


def test_it_finds_framework_imports(tmp_path: Path) -> None:
    module = tmp_path / "edge.py"
    module.write_text("import os\nfrom django.db import models\nif True:\n    import celery.app\n")
    assert [entry.split(":", 2)[-1] for entry in framework_imports(module)] == [
        "2 imports django.db",
        "4 imports celery.app",
    ]


def test_it_keeps_broker_core_free_of_frameworks(repo_root: Path) -> None:
    sources = sorted((repo_root / "broker_core").rglob("*.py"))
    assert sources, "broker_core has no Python files to check"
    offences = [entry for path in sources for entry in framework_imports(path)]
    assert offences == [], "broker_core must not import frameworks:\n" + "\n".join(offences)
