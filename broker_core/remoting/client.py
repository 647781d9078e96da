"""The remoting client: one reused connection per remote ``ip:port``, requests over it.

Like the RocketMQ clients, it keeps a single long-lived connection per address and
pipelines every request on it; concurrent first uses of an address share one connect.
A lost connection is forgotten and the next request reconnects.  Requests the remote
side sends back on the connection (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO,
...) go to handlers registered as on a server.

Thread-safety: event-loop only.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from functools import partial

from broker_core.remoting.command import DEFAULT_MAX_FRAME_SIZE, RemotingCommand
from broker_core.remoting.connection import Connection
from broker_core.remoting.errors import ConnectionClosedError, RemotingConnectError
from broker_core.remoting.server import Handler, RequestDispatcher

log = logging.getLogger(__name__)


class RemotingClient:
    """Sends requests to remote addresses (``"ip:port"``) over pooled connections."""

    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.tls = tls
        """The SSL context connections are made with (None: plain)."""
        self._max_frame_size = max_frame_size
        self._dispatcher = RequestDispatcher()
        self._connections: dict[str, Connection] = {}
        self._connecting: dict[str, asyncio.Task[Connection]] = {}
        self._closed = False

    def register(self, code: int, handler: Handler) -> None:
        """Answer requests with ``code`` that a server sends on our connections."""
        self._dispatcher.register(code, handler)

    @property
    def connections(self) -> dict[str, Connection]:
        """Return the open connections by address (a copy)."""
        return dict(self._connections)

    async def connection(self, addr: str) -> Connection:
        """Return the open connection to ``addr``, connecting if there is none.

        Raises:
            RemotingConnectError: the address is malformed, refuses, or does not answer in time.
        """
        conn = self._connections.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise RemotingConnectError(f"{addr}: the client is closed")
        task = self._connecting.get(addr)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = task
            task.add_done_callback(partial(self._connect_done, addr))
        return await asyncio.shield(task)

    async def _connect(self, addr: str) -> Connection:
        host, sep, port = addr.rpartition(":")
        if not sep or not port.isdigit():
            raise RemotingConnectError(f"{addr!r} is not an ip:port address")
        loop = asyncio.get_running_loop()

        def new_connection() -> Connection:
            return Connection(self._dispatcher.dispatch, max_frame_size=self._max_frame_size)

        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    new_connection, host.strip("[]"), int(port), ssl=self.tls
                )
        except TimeoutError as exc:
            raise RemotingConnectError(f"{addr}: connect timed out after {self.connect_timeout:g}s") from exc
        except OSError as exc:
            raise RemotingConnectError(f"{addr}: {exc}") from exc
        if self._closed:
            conn.close("client closed")
            raise RemotingConnectError(f"{addr}: the client is closed")
        self._connections[addr] = conn
        conn.add_close_callback(lambda c: self._forget(addr, c))
        log.debug("connected to %s", addr)
        return conn

    def _connect_done(self, addr: str, task: asyncio.Task[Connection]) -> None:
        if self._connecting.get(addr) is task:
            del self._connecting[addr]
        if not task.cancelled():
            task.exception()  # retrieved here too: awaiters may all have gone

    def _forget(self, addr: str, conn: Connection) -> None:
        if self._connections.get(addr) is conn:
            del self._connections[addr]

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send ``cmd`` to ``addr`` and return the response.

        Raises:
            RemotingConnectError: no connection could be opened.
            RemotingTimeoutError: no response within ``timeout`` seconds.
            ConnectionClosedError: the connection closed before the response.
        """
        conn = self._connections.get(addr)
        if conn is None or conn.closed:
            conn = await self.connection(addr)
        return await conn.request(cmd, timeout)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send ``cmd`` to ``addr`` with the oneway flag; nothing comes back.

        Raises:
            RemotingConnectError: no connection could be opened.
            ConnectionClosedError: the connection was closing.
        """
        conn = self._connections.get(addr)
        if conn is None or conn.closed:
            conn = await self.connection(addr)
        if not conn.send_oneway(cmd):
            raise ConnectionClosedError(f"{addr}: connection closing, oneway request not sent")

    async def close(self) -> None:
        """Close every connection (pending requests fail) and stop handler tasks."""
        self._closed = True
        for task in list(self._connecting.values()):
            task.cancel()
        connections = list(self._connections.values())
        self._connections.clear()
        for conn in connections:
            conn.close("client closed")
        await self._dispatcher.cancel_all()
        for conn in connections:
            try:
                async with asyncio.timeout(1.0):
                    await conn.wait_closed()
            except TimeoutError:
                conn.abort("client closed")
