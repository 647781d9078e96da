"""A warm Spark session that runs report after report: ``python -m spark_reports serve``.

Starting Spark is most of a small report's time: the JVM, then the first job's code
generation and the first Python workers (importing pyarrow and this package) take 20-40 s
on a two-core machine, while the report itself over 10 k messages takes 2-5 s once they
are up.  So the platform keeps one session alive between runs: the first run starts this
server, later runs hand it their command line over a Unix socket and get the same JSON
lines the one-shot ``python -m spark_reports`` prints (progress, then ``done`` or
``error``; an error also carries ``detail``, the whole text, for the run's log).

One server per socket, bound to the master it started with; one run at a time (the
reports worker has one slot); each run's cached tables are dropped when it ends.  With no
run for ``--idle-seconds`` (``QUIVER_SPARK_WARM_SECONDS``, 600) it stops its session and
exits, giving the memory back (about 800 MiB with its JVM and Python workers).  A run that fails leaves the
server up; a server that dies (or is killed at a run's timeout) is started again by the
next run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

REQUEST_LIMIT = 1 << 20  # a command line, as JSON


def serve(socket_path: Path, master: str, idle_seconds: float, say: Callable[[str], None]) -> int:
    """Answer runs on ``socket_path`` until idle; 0 at the end.

    It listens at once and starts Spark at its first run (which pays the start, as a
    one-shot run would), so a start that fails (no Java, a master that does not answer)
    reaches that run as its error, in its sentence; the next run tries again.
    """
    from spark_reports import __main__ as cli

    socket_path.parent.mkdir(parents=True, exist_ok=True)
    socket_path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    os.chmod(socket_path, 0o600)  # runs are the platform's business only
    listener.listen(4)
    listener.settimeout(idle_seconds)
    say(json.dumps({"event": "serving", "socket": str(socket_path), "master": master}))
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                return 0  # idle: give the memory back
            with conn:
                try:
                    _answer(conn, master, cli)
                finally:
                    # The run's end, whatever still holds the socket (an exception's
                    # traceback keeps the answering frame and its stream alive).
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
    finally:
        listener.close()
        socket_path.unlink(missing_ok=True)
        _stop_session()


def _stop_session() -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def _answer(conn: socket.socket, master: str, cli: Any) -> None:
    """One run: read its command line, run it, send its events; never raises."""
    conn.settimeout(None)
    stream = conn.makefile("rwb", buffering=0)

    def send(event: str, **fields: Any) -> None:
        try:
            stream.write((json.dumps({"event": event, **fields}, default=str) + "\n").encode())
        except OSError:
            pass  # the runner went away (timed out, killed): the run still ends here

    try:
        line = stream.readline(REQUEST_LIMIT)
        argv = json.loads(line)["argv"]
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv must be a list of strings")
    except (ValueError, KeyError, TypeError) as exc:
        send("error", message=f"a bad request to the warm report session: {exc}", exitCode=cli.EXIT_BAD_INPUT)
        return
    try:
        kind, params, asked_master = cli.parse_args(argv)
        if asked_master and asked_master != master:
            raise ValueError(f"this warm session runs on {master}, not {asked_master}")
        summary = cli.run(kind, params, master, emit=send)  # its session: started once, then reused
    except Exception as exc:  # the one-shot CLI's rules: a sentence, and the whole text
        detail = traceback.format_exc()
        print(detail, file=sys.stderr, flush=True)
        send("error", message=cli.error_message(exc), detail=detail, exitCode=cli.exit_code(exc))
        return
    finally:
        _clear_cache()  # a run's cached tables are its own
    send("done", summary=summary)


def _clear_cache() -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.catalog.clearCache()


def socket_path_for(folder: Path, master: str) -> Path:
    """Where the warm session for ``master`` listens, under ``folder`` (short: AF_UNIX paths
    are limited to about 100 bytes)."""
    import hashlib

    return folder / f"spark-{hashlib.sha256(master.encode()).hexdigest()[:12]}.sock"


def request(socket_path: Path, argv: list[str], timeout_s: float) -> socket.socket:
    """Connect to a warm session and send it a run's command line; the socket then carries
    the run's JSON lines.  ``OSError`` when no session listens there."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout_s)
        conn.connect(str(socket_path))
        conn.sendall((json.dumps({"argv": argv}) + "\n").encode())
    except OSError:
        conn.close()
        raise
    return conn


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_reports serve", description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, type=Path, help="the Unix socket to listen on")
    parser.add_argument("--master", default=None, help="Spark master (default SPARK_MASTER or local[*])")
    parser.add_argument(
        "--idle-seconds", type=float, default=600.0, help="exit after this long without a run"
    )
    args = parser.parse_args(argv)
    from spark_reports.session import DEFAULT_MASTER

    master = args.master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    return serve(args.socket, master, max(1.0, args.idle_seconds), lambda line: print(line, flush=True))
