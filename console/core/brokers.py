"""Call ``broker_core``'s async AdminClient from synchronous code (Celery tasks, views).

Each process keeps one event loop in a daemon thread and one AdminClient per nameserver
list, so a job that runs ten times a second reuses its connections instead of opening
new ones.  A forked child (Celery's prefork pool) starts its own loop on first use: a
loop and its sockets never cross a fork.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from broker_core.client.admin import AdminClient
from console.quiver import platform_settings, tls_context

T = TypeVar("T")

_lock = threading.Lock()
_state: dict[str, object] = {}


def _loop() -> asyncio.AbstractEventLoop:
    """This process's admin loop, started on first use (again after a fork)."""
    with _lock:
        if _state.get("pid") != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="quiver-admin-loop", daemon=True).start()
            _state.clear()
            _state.update(pid=os.getpid(), loop=loop, clients={})
        return _state["loop"]  # type: ignore[return-value]


def _client(namesrv_addr: str) -> AdminClient:
    clients: dict[str, AdminClient] = _state["clients"]  # type: ignore[assignment]
    with _lock:
        client = clients.get(namesrv_addr)
        if client is None:
            timeout = float(platform_settings()["BROKER_TIMEOUT_SECONDS"])
            client = clients[namesrv_addr] = AdminClient(
                namesrv_addr, timeout=timeout, connect_timeout=timeout, tls=tls_context()
            )
        return client


def admin_call(
    namesrv_addr: str, call: Callable[[AdminClient], Awaitable[T]], timeout: float | None = None
) -> T:
    """Run ``call(admin)`` on this process's admin loop and return its result.

    ``admin`` talks to the nameservers ``namesrv_addr`` (calls that name a broker address
    go straight to it).  Exceptions of the call (``AdminError``...) are raised here.
    """
    loop = _loop()
    client = _client(namesrv_addr)

    async def run() -> T:
        return await call(client)

    limit = timeout if timeout is not None else 4 * float(platform_settings()["BROKER_TIMEOUT_SECONDS"])
    return asyncio.run_coroutine_threadsafe(run(), loop).result(limit)


async def on_every_master(admin: AdminClient, action: Callable[[str], Awaitable[object]]) -> list[str]:
    """Run ``action(addr)`` on every master the nameservers list, one after another; return
    their addresses.  The console writes topics, groups and ACL accounts this way, as
    RocketMQ's tools do for a whole cluster."""
    from broker_core.errors import AdminError

    addrs = sorted((await admin.cluster_info()).master_addrs().values())
    if not addrs:
        raise AdminError("no master broker is registered")
    for addr in addrs:
        await action(addr)
    return addrs
