"""Check the layers: broker_core imports no framework (rule 1 of the style anchors), and the
clients import neither the broker nor the store, so a process that only uses a client (the
console, a Celery worker, a Spark job) never loads the storage engine."""

from __future__ import annotations

import ast
import subprocess
import sys
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


# Packages of broker_core that client code must not import; the value types both sides use
# live below them, in broker_core.model and the flat modules of broker_core.
CLIENT_FORBIDDEN = ("broker_core.broker", "broker_core.store", "broker_core.namesrv")


def layer_imports(path: Path, forbidden: tuple[str, ...]) -> list[str]:
    """Return one 'file:line imports module' entry per import of a ``forbidden`` package.

    ``from broker_core import store`` counts as importing ``broker_core.store``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = imported_modules(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
    offending: dict[int, str] = {}
    for line, module in found:
        banned = any(module == package or module.startswith(package + ".") for package in forbidden)
        if banned and (line not in offending or len(module) < len(offending[line])):
            offending[line] = module  # one entry per line: the module, not each name
    return [f"{path}:{line} imports {module}" for line, module in sorted(offending.items())]


def test_it_finds_imports_of_the_broker_and_the_store(tmp_path: Path) -> None:
    module = tmp_path / "client.py"
    module.write_text(
        "from broker_core.model.message import MessageExt\n"
        "from broker_core.broker.topics import TopicConfig\n"
        "def later() -> None:\n"
        "    import broker_core.store.store\n"
        "from broker_core import store\n"
    )
    assert [entry.split(":", 2)[-1] for entry in layer_imports(module, CLIENT_FORBIDDEN)] == [
        "2 imports broker_core.broker.topics",
        "4 imports broker_core.store.store",
        "5 imports broker_core.store",
    ]


def test_it_keeps_the_clients_off_the_broker_and_the_store(repo_root: Path) -> None:
    sources = sorted((repo_root / "broker_core" / "client").rglob("*.py"))
    assert sources, "broker_core/client has no Python files to check"
    offences = [entry for path in sources for entry in layer_imports(path, CLIENT_FORBIDDEN)]
    assert offences == [], "broker_core/client must not import the broker or the store:\n" + "\n".join(
        offences
    )


def test_it_keeps_the_proxy_a_client_of_the_brokers(repo_root: Path) -> None:
    """The gRPC proxy talks to brokers over the protocol, like any client (cluster mode)."""
    sources = sorted(
        p for p in (repo_root / "broker_core" / "proxy").rglob("*.py") if "_generated" not in p.parts
    )
    assert sources, "broker_core/proxy has no Python files to check"
    offences = [entry for path in sources for entry in layer_imports(path, CLIENT_FORBIDDEN)]
    assert offences == [], "broker_core/proxy must not import the broker or the store:\n" + "\n".join(
        offences
    )


def test_importing_every_client_module_loads_no_broker_or_store_module(repo_root: Path) -> None:
    # The static check above sees direct imports; this one sees what the lower modules the
    # clients use pull in, in a fresh interpreter.
    script = (
        "import importlib, pkgutil, sys\n"
        "import broker_core.client as client\n"
        "for info in pkgutil.walk_packages(client.__path__, 'broker_core.client.'):\n"
        "    importlib.import_module(info.name)\n"
        f"print('\\n'.join(sorted(n for n in sys.modules if n.startswith({CLIENT_FORBIDDEN!r}))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=repo_root, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == [], "importing the clients loaded:\n" + result.stdout


# The console stands on nameserver/ (the cluster model, lookup, topology reads), never the
# other way round; its pages, API and sockets live in console.clusters.
NAMESERVER_MAY_IMPORT = frozenset({"__future__", "django", "broker_core", "nameserver"})
SURFACES = ("views", "api", "consumers", "urls", "serializers")


def test_it_keeps_the_nameserver_app_a_foundation(repo_root: Path) -> None:
    sources = sorted((repo_root / "nameserver").rglob("*.py"))
    assert sources, "nameserver has no Python files to check"
    offences = [entry for path in sources for entry in layer_imports(path, ("console",))]
    outside = [
        f"{path}:{line} imports {module}"
        for path in sources
        for line, module in imported_modules(ast.parse(path.read_text(encoding="utf-8")))
        if module.split(".")[0] not in NAMESERVER_MAY_IMPORT | sys.stdlib_module_names
    ]
    assert offences + outside == [], "nameserver must import only Django and broker_core:\n" + "\n".join(
        offences + outside
    )
    assert not any((repo_root / "nameserver" / f"{name}.py").exists() for name in SURFACES)


def test_it_keeps_console_core_off_the_apps_pages_and_api(repo_root: Path) -> None:
    apps = [
        p.name for p in (repo_root / "console").iterdir() if (p / "apps.py").exists() and p.name != "core"
    ]
    assert "clusters" in apps
    pages = tuple(f"console.{app}.{surface}" for app in apps for surface in SURFACES)
    pages += tuple(f"nameserver.{surface}" for surface in SURFACES)
    sources = sorted((repo_root / "console" / "core").rglob("*.py"))
    offences = [entry for path in sources for entry in layer_imports(path, pages)]
    assert offences == [], "console.core must not import an app's pages, API or sockets:\n" + "\n".join(
        offences
    )
