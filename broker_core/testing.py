"""Real servers for tests: nameserver (and, later, broker) on 127.0.0.1 with a free port.

Every test layer (unit, conformance, console, Spark) starts its servers through these,
so no test mocks our own components.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from broker_core.config import NamesrvConfig
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
