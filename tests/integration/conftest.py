"""Helpers for integration tests that start our own servers from the command line."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def cli_server(command: str, conf: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``python -m broker_core <command> -c conf``; yield it and the address it printed.

    The process is killed on the way out if the test left it running.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker_core", command, "-c", str(conf)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line + proc.stderr.read()
        yield proc, line.split()[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
