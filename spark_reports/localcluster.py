"""A Spark standalone cluster on this machine's loopback, to try the reports' cluster path
(the tests and ``bench/reports.py`` use it): a master and one worker, started from the
installed pyspark (``spark-class``), each in an environment that shares nothing with this
project but the network: ``PATH=/usr/bin:/bin`` (the machine's own Python, which has
neither pyarrow nor this package), no ``PYTHONPATH``, a home and work directory of its own,
as a worker machine of a real cluster would be.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from spark_reports.java import ensure_java

SPARK_HOME = Path(pyspark.__file__).resolve().parent


@dataclass
class Standalone:
    master: str  # spark://127.0.0.1:<port>
    work: Path


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _bare_env(home: Path) -> dict[str, str]:
    """What a worker machine would have: Java, Spark, the system's PATH; nothing of ours."""
    ensure_java()  # sets JAVA_HOME (or a wrapper on PATH) for this process
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(home / "logs"),
    }
    if os.environ.get("JAVA_HOME"):
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    return env


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *argv],
            env=env,
            cwd=env["HOME"],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for_line(log: Path, text: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:]
    raise AssertionError(f"{text!r} not in {log} after {timeout_s:g} s:\n{tail}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def standalone_cluster(work: Path, cores: int = 2) -> Iterator[Standalone]:
    """A master and one worker with ``cores`` cores; both stopped (process groups) at the end."""
    home = work / "home"
    (home / "logs").mkdir(parents=True)
    env = _bare_env(home)
    port = free_port()
    master_log, worker_log = work / "master.log", work / "worker.log"
    master = _start(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(free_port())],
        env, master_log,
    )  # fmt: skip
    worker = None
    try:
        _wait_for_line(master_log, "I have been elected leader", master, 90)
        url = f"spark://127.0.0.1:{port}"
        worker = _start(
            ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", str(cores),
             "--memory", "2g", "--webui-port", str(free_port()), "--work-dir", str(work / "work")],
            env, worker_log,
        )  # fmt: skip
        _wait_for_line(master_log, "Registering worker", master, 90)
        yield Standalone(url, work)
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
