"""The nameserver process: route tables behind a remoting server, plus the expiry scan.

Nameservers share nothing: each keeps its own tables from the brokers that register with
it, so running several side by side needs no coordination (brokers register with all).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from broker_core.aio import stop_task
from broker_core.clock import wall_clock_ms
from broker_core.config import NamesrvConfig
from broker_core.namesrv.processors import NamesrvProcessor
from broker_core.namesrv.routeinfo import RouteInfoManager
from broker_core.remoting.server import RemotingServer

log = logging.getLogger(__name__)


class NamesrvServer:
    """One nameserver: ``await start()``, serve, ``await close()``."""

    def __init__(self, config: NamesrvConfig, *, clock_ms: Any = wall_clock_ms) -> None:
        self.config = config
        self.routes = RouteInfoManager(clock_ms=clock_ms, broker_expire_ms=config.broker_channel_expired_time)
        self.processor = NamesrvProcessor(self.routes)
        self.server = RemotingServer(
            config.listen_host,
            config.listen_port,
            max_frame_size=config.max_frame_size_bytes,
            idle_timeout=config.server_channel_max_idle_time_seconds,
            write_buffer_high_water_mark=config.write_buffer_high_water_mark,
            write_buffer_low_water_mark=config.write_buffer_low_water_mark,
            partial_frames_max_bytes=config.server_partial_frames_max_bytes,
            partial_frame_timeout=config.server_partial_frame_timeout_millis / 1000,
            tls=config.tls_server(),
            busy_poll_micros=config.server_busy_poll_micros,
        )
        for code in self.processor.handlers:
            self.server.register(code, self._handle)
        self.server.register_default(self._handle)
        self._scan_task: asyncio.Task[None] | None = None
        self._watched: set[int] = set()

    def _handle(self, request: Any, conn: Any) -> Any:
        if id(conn) not in self._watched and request.code == 103:  # REGISTER_BROKER
            # A broker's connection closing drops the broker at once, not 120 s later.
            self._watched.add(id(conn))
            conn.add_close_callback(lambda c=conn: self._on_close(c))
        return self.processor.handle(request, conn)

    def _on_close(self, conn: Any) -> None:
        self._watched.discard(id(conn))
        addr = self.routes.on_channel_destroyed(conn)
        if addr is not None:
            log.info("broker %s disconnected: removed from the routes", addr)

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        return f"{self.config.listen_host}:{self.port}"

    async def start(self) -> None:
        await self.server.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-scan")
        log.info("nameserver listening on %s", self.address)

    async def _scan_loop(self) -> None:
        interval = self.config.scan_not_active_broker_interval / 1000
        while True:
            await asyncio.sleep(interval)
            for addr, conn in self.routes.scan_not_active_brokers():
                log.warning(
                    "broker %s silent for over %d ms: removed", addr, self.config.broker_channel_expired_time
                )
                if conn is not None and hasattr(conn, "close"):
                    conn.close()

    async def close(self) -> None:
        await stop_task(self._scan_task)
        self._scan_task = None
        await self.server.close()
