"""Real servers for tests: nameserver and broker on 127.0.0.1 with free ports.

Every test layer (unit, conformance, console, Spark) starts its servers through these,
so no test mocks our own components.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from broker_core.broker.controller import BrokerController
from broker_core.config import BrokerConfig, NamesrvConfig, StoreConfig
from broker_core.namesrv.server import NamesrvServer


@contextlib.asynccontextmanager
async def run_namesrv(**settings: Any) -> AsyncIterator[NamesrvServer]:
    """A running nameserver on a free loopback port (``server.address`` is its ip:port)."""
    server = NamesrvServer(NamesrvConfig(listen_port=0, **settings))
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def small_store_config(store_dir: str | Path, **overrides: Any) -> StoreConfig:
    """A store with small files (quick to create, rolls early) for tests."""
    settings: dict[str, Any] = dict(
        mapped_file_size_commit_log=4 * 1024 * 1024,
        mapped_file_size_consume_queue=20 * 10_000,
        max_hash_slot_num=4096,
        max_index_num=16_384,
        warm_mapped_file_enable=False,
        # Out of reach: a test must not depend on how full the build machine's disk is.
        disk_max_used_space_ratio=100,
        disk_space_clean_forcibly_ratio=1.0,
        disk_space_warning_level_ratio=1.0,
    )
    settings.update(overrides)
    return StoreConfig(str(store_dir), **settings)


@contextlib.asynccontextmanager
async def run_broker(
    store_dir: str | Path, namesrv_addr: str = "", *, store: dict[str, Any] | None = None, **settings: Any
) -> AsyncIterator[BrokerController]:
    """A running broker on a free loopback port (or ``listen_port``), registered with ``namesrv_addr``."""
    config = BrokerConfig(
        **{"broker_ip1": "127.0.0.1", "listen_port": 0, "namesrv_addr": namesrv_addr, **settings}
    )
    broker = BrokerController(config, small_store_config(store_dir, **(store or {})))
    await broker.start()
    try:
        yield broker
    finally:
        await broker.close()


STOP_TIMEOUT_S = 5.0
"""How long ``cli_server`` waits for a server it stops before it kills it."""


@contextlib.contextmanager
def cli_server(
    command: str, conf: Path, env: dict[str, str] | None = None, *, log: Path | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``python -m broker_core <command> -c conf`` in a child process; yield it and the
    address it printed (``listenPort = 0`` picks a free port).

    Its stderr is a pipe for the caller to read, or the file ``log`` for a server that runs
    long (a pipe nobody reads would fill and stall it).  On the way out a server the caller
    left running is stopped as an operator would stop it (SIGINT: a broker unregisters from
    its nameservers, so no later test is routed to a dead broker), and killed if it has
    not exited within ``STOP_TIMEOUT_S`` (a stopped or wedged process).
    """
    repo = Path(__file__).resolve().parent.parent
    with contextlib.ExitStack() as stack:
        stderr = stack.enter_context(log.open("a")) if log is not None else subprocess.PIPE
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker_core", command, "-c", str(conf)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONPATH": str(repo), **(env or {})},
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("listening on "):
            proc.kill()
            error = proc.stderr.read() if proc.stderr is not None else log.read_text() if log else ""
            raise RuntimeError(f"{command} did not start: {line}{error}")
        yield proc, line.split()[-1]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
