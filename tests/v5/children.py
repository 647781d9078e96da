"""Running the official RocketMQ 5 Python client's scripts (in ``.venv-v5``) from the tests,
and the nameserver + broker + proxy they talk to."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker_core.broker.controller import BrokerController
from broker_core.namesrv.server import NamesrvServer
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.server import ProxyServer
from broker_core.testing import run_broker, run_namesrv

REPO = Path(__file__).resolve().parents[2]
V5_PYTHON = REPO / ".venv-v5" / "bin" / "python"
V5_MISSING = ".venv-v5 (the RocketMQ 5 client) is made by `python3 manage.py` setup"


async def run_v5(
    script: str, *args: str, home: Path, env: dict[str, str] | None = None, timeout_s: float = 90
) -> list[dict[str, Any]]:
    """Run ``tests/v5/<script>`` with the v5 client and return the JSON lines it printed."""
    home.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        str(V5_PYTHON),
        str(Path(__file__).parent / script),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(home), "PYTHONPATH": "", **(env or {})},
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"{script} did not finish within {timeout_s} s") from None
    assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]


@dataclass
class Platform:
    ns: NamesrvServer
    broker: BrokerController
    proxy: ProxyServer


@contextlib.asynccontextmanager
async def platform(store: Path, **broker_settings: Any) -> AsyncIterator[Platform]:
    """A nameserver, a broker (``broker_settings`` passed on) and a proxy in front of them."""
    async with run_namesrv() as ns, run_broker(store, ns.address, **broker_settings) as broker:
        proxy = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
        await proxy.start()
        try:
            yield Platform(ns, broker, proxy)
        finally:
            await proxy.close()
