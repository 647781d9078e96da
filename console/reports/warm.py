"""The platform's warm Spark session (spark_reports/warm.py): found, started, stopped.

A report run asks the session listening on ``<DATA_DIR>/spark-warm/spark-<hash>.sock``
(one per Spark master) to run it; when none answers it starts one (``python -m
spark_reports serve``, niced and in its own session like a one-shot run, logging to
``spark-warm/server.log``) and waits for its socket.  The session exits by itself after
``QUIVER_SPARK_WARM_SECONDS`` without a run, and with the process that started it (the
reports worker); a run past its timeout kills it, and the next run starts another.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from console.core.supervisor import child_preexec
from console.quiver import platform_settings
from spark_reports.warm import request, socket_path_for

# Longest wait for a new session to listen: the JVM, the session and its warm-up job.
START_TIMEOUT_S = 300.0
LOG_KEEP_BYTES = 10 << 20  # the session's log is started afresh past this (the old one kept)
REPO = Path(__file__).resolve().parents[2]


def folder() -> Path:
    return Path(platform_settings()["DATA_DIR"]) / "spark-warm"


def connect(master: str, argv: list[str], env: dict[str, str]) -> socket.socket:
    """A connection to the warm session for ``master`` with the run ``argv`` sent on it,
    starting the session first when none answers.  ``OSError`` when it cannot be started."""
    path = socket_path_for(folder(), master)
    try:
        return request(path, argv, timeout_s=10)
    except OSError:
        pass
    folder().mkdir(parents=True, exist_ok=True)
    with (folder() / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one start at a time, whoever else runs reports here
        try:
            return request(path, argv, timeout_s=10)  # started by another meanwhile
        except OSError:
            pass
        proc = _start(path, master, env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise OSError(f"the warm Spark session exited at start (status {proc.returncode}): {tail()}")
            try:
                return request(path, argv, timeout_s=10)
            except OSError:
                time.sleep(0.2)
        kill_pid(proc.pid)
        raise OSError(f"the warm Spark session did not start within {START_TIMEOUT_S:g} s: {tail()}")


def _start(path: Path, master: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable, "-m", "spark_reports", "serve", "--socket", str(path), "--master", master,
        "--idle-seconds", str(platform_settings()["SPARK_WARM_SECONDS"]),
    ]  # fmt: skip
    log_path = folder() / "server.log"
    if log_path.exists() and log_path.stat().st_size > LOG_KEEP_BYTES:
        log_path.replace(log_path.with_suffix(".log.1"))  # one older log kept, the rest dropped
    with log_path.open("ab") as log:
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            # It dies with the process that started it (the reports worker), and yields the
            # CPU to the broker and the maintenance jobs, as one-shot runs do.
            preexec_fn=child_preexec(os.getpid(), nice=platform_settings()["LONG_WORK_NICE"]),
        )


def peer_pid(conn: socket.socket) -> int | None:
    """The warm session's process id, from the connection (Linux SO_PEERCRED)."""
    try:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid, _uid, _gid = struct.unpack("3i", raw)
    return pid or None


def kill_pid(pid: int) -> None:
    """Stop a warm session and its JVM (its whole process group)."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)  # started by this process: reap it, or it lingers
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def tail(lines: int = 20) -> str:
    """The end of the warm session's log (what it said before it stopped)."""
    try:
        text = (folder() / "server.log").read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


def stop_all() -> None:
    """Stop every warm session of this data directory (``up`` at its end, tests)."""
    for path in folder().glob("spark-*.sock"):
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(2)
            conn.connect(str(path))
        except OSError:
            continue
        pid = peer_pid(conn)
        conn.close()
        if pid is not None:
            kill_pid(pid)
