"""What a Spark cluster's Python workers need to run the reports, and how they get it.

The ``quiver`` data source runs in Python on the executors (and, to plan, in a Python
worker beside the driver): it imports ``spark_reports``, ``broker_core`` and their runtime
dependencies (pyarrow, orjson, isal).  On ``local[*]`` the workers are this interpreter.
On a cluster (standalone, YARN, Kubernetes) they are whatever Python the workers have,
which knows none of them.  ``QUIVER_SPARK_EXECUTOR_ENV`` says what to do:

* ``ship`` (the default): every run ships those packages in one archive
  (``spark.archives``; built once per content, kept under ``QUIVER_SPARK_ARCHIVE_DIR``,
  default ``~/.cache/quiver-spark``), unpacked in each executor's working directory and put
  on its ``PYTHONPATH``.  A worker needs only a Python of the driver's version
  (``python3.11`` here: Spark refuses a worker whose minor version differs) on Linux
  x86-64, the platform the archive's compiled modules are for; nothing of ours.
* ``none``: the workers already have everything (a shared environment); the executors run
  ``QUIVER_SPARK_EXECUTOR_PYTHON``, which must name its interpreter.

``QUIVER_SPARK_EXECUTOR_PYTHON`` (default ``python<major>.<minor>`` of the driver) is the
interpreter Spark starts for the Python workers, on the executors and beside the driver
(Spark uses one name for both): beside the driver it finds this project's packages through
``PYTHONPATH``, which ``cluster_settings`` sets for the driver's own Python workers.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import sys
import tarfile
import tempfile
from pathlib import Path

EXECUTOR_ENV_VAR = "QUIVER_SPARK_EXECUTOR_ENV"
EXECUTOR_PYTHON_VAR = "QUIVER_SPARK_EXECUTOR_PYTHON"
ARCHIVE_DIR_VAR = "QUIVER_SPARK_ARCHIVE_DIR"
MODES = ("ship", "none")
UNPACKED_AS = "quiver-python"
"""The directory the archive is unpacked into, in each executor's working directory."""

# What the data source imports at run time, besides the standard library and pyspark
# (which every Spark worker has): our two packages and the distributions they need.
OUR_PACKAGES = ("broker_core", "spark_reports")
DISTRIBUTIONS = ("pyarrow", "orjson", "isal")
# Parts of those distributions no worker imports (C headers, Cython sources, their tests).
_LEFT_OUT_DIRS = frozenset({"include", "tests", "__pycache__", "src"})
_LEFT_OUT_SUFFIXES = (".pxd", ".pyx", ".h", ".hpp", ".pyc", ".a")


class ExecutorEnvError(ValueError):
    """The executor environment is configured in a way that cannot work; the message says how."""


def mode() -> str:
    """``ship`` or ``none``; ``ExecutorEnvError`` for anything else."""
    value = os.environ.get(EXECUTOR_ENV_VAR, "ship").strip().lower() or "ship"
    if value not in MODES:
        raise ExecutorEnvError(
            f"{EXECUTOR_ENV_VAR}={value!r} is not one of {', '.join(MODES)}: 'ship' sends this "
            "project's Python packages to the executors with every run, 'none' expects the "
            f"workers to have them (and {EXECUTOR_PYTHON_VAR} to name their Python)"
        )
    return value


def executor_python() -> str:
    """The interpreter Spark starts for Python workers on a cluster."""
    return os.environ.get(EXECUTOR_PYTHON_VAR) or f"python{sys.version_info.major}.{sys.version_info.minor}"


def cluster_settings() -> dict[str, str]:
    """The session settings for a non-local master (``session.get_session`` applies them).

    Also sets this process's ``PYSPARK_PYTHON`` (the one name Spark uses for every Python
    worker) and ``PYTHONPATH`` (which the driver's JVM hands to the Python workers it
    starts itself, to plan a read): both are read when the session starts.
    """
    chosen = mode()
    os.environ["PYSPARK_PYTHON"] = executor_python()
    roots = [str(_repo_root()), *_site_dirs()]
    os.environ["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys([*roots, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    )
    if chosen == "none":
        return {}
    archive = archive_path()
    return {
        "spark.archives": f"{archive.as_uri()}#{UNPACKED_AS}",
        "spark.executorEnv.PYTHONPATH": UNPACKED_AS,
    }


def _repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _site_dirs() -> list[str]:
    """Where this interpreter's distributions live (the virtualenv's site-packages)."""
    return sorted({str(importlib.metadata.distribution(name).locate_file("")) for name in DISTRIBUTIONS})


def _sources() -> list[tuple[Path, str]]:
    """Every file the archive holds, as (path here, name in the archive)."""
    files: list[tuple[Path, str]] = []
    roots: list[Path] = [_repo_root() / name for name in OUR_PACKAGES]
    for name in DISTRIBUTIONS:
        dist = importlib.metadata.distribution(name)
        site = Path(str(dist.locate_file("")))
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        roots += [site / top for top in sorted(tops) if not top.endswith((".dist-info", ".pth"))]
    for root in roots:
        base = root.parent
        if root.is_file():
            files.append((root, root.name))
            continue
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(base)
            if path.is_dir() or _LEFT_OUT_DIRS.intersection(relative.parts[:-1]):
                continue
            if path.suffix in _LEFT_OUT_SUFFIXES:
                continue
            files.append((path, relative.as_posix()))
    return files


def archive_path() -> Path:
    """The archive of this project's packages and their dependencies, built if missing.

    Named by a hash of what it holds (each file's name, size and modification time, and
    the interpreter's version), so a changed file makes a new one; archives of older code
    are removed after a day.
    """
    files = _sources()
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for path, name in files:
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    folder = Path(os.environ.get(ARCHIVE_DIR_VAR) or Path.home() / ".cache" / "quiver-spark")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"quiver-python-{digest.hexdigest()[:16]}.tar.gz"
    if target.exists():
        return target
    with (
        tempfile.NamedTemporaryFile(dir=folder, suffix=".part", delete=False) as tmp,
        tarfile.open(fileobj=tmp, mode="w:gz", compresslevel=1) as tar,
    ):
        for path, name in files:
            tar.add(path, arcname=name, recursive=False)
    Path(tmp.name).replace(target)  # whole or absent: a reader never sees half of it
    # Archives of older code go after a day (a run that started with one may still read it).
    stale = target.stat().st_mtime - 86_400
    for old in folder.glob("quiver-python-*.tar.gz"):
        if old != target and old.stat().st_mtime < stale:
            old.unlink(missing_ok=True)
    return target
