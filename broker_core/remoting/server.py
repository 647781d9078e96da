"""The remoting server: accepts connections and answers requests from a processor table.

Concurrency per connection: requests on one connection are handled concurrently and their
responses go out in completion order, matched by opaque (the clients pipeline many
requests and match by opaque, reference §1.1).  A handler is either

* a plain function: called inline from ``data_received`` and answered at once.  No task,
  no scheduling: the cheapest path, for handlers that do not wait (route lookups,
  heartbeats, offset queries).  It must not block the loop.
* a coroutine function (or a function returning an awaitable): run as one task per
  request, tracked so ``close()`` can cancel it.  For handlers that wait (sync-flush
  sends, long-polling pulls), which must not hold up the requests behind them.

Errors map to responses in one place (``_error_response``): a ``ResponseError`` gives its
own code and remark, any other exception SYSTEM_ERROR with its text, and the server goes
on.  A connection with ``max_inflight`` tasks running stops reading until half finish.

Thread-safety: event-loop only.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable

from broker_core.aio import stop_task
from broker_core.errors import ResponseError
from broker_core.remoting.codes import RPC_ONEWAY, RPC_TYPE, ResponseCode
from broker_core.remoting.command import DEFAULT_MAX_FRAME_SIZE, RemotingCommand
from broker_core.remoting.connection import Connection

log = logging.getLogger(__name__)

HandlerResult = RemotingCommand | None | Awaitable[RemotingCommand | None]
Handler = Callable[[RemotingCommand, Connection], HandlerResult]
"""``(request, connection) -> response | None``, plain or async; None sends no response."""


class RequestDispatcher:
    """The processor table shared by server and client: request code -> handler.

    ``dispatch`` is the ``Connection.dispatch`` callback.  Unknown codes are answered with
    REQUEST_CODE_NOT_SUPPORTED, as Java does; oneway requests never get an answer.
    """

    def __init__(self) -> None:
        self._table: dict[int, tuple[Handler, bool]] = {}
        self._default: tuple[Handler, bool] | None = None
        self.tasks: set[asyncio.Task[None]] = set()

    def register(self, code: int, handler: Handler) -> None:
        """Route requests with ``code`` to ``handler`` (replacing any earlier one)."""
        self._table[int(code)] = (handler, inspect.iscoroutinefunction(handler))

    def register_default(self, handler: Handler) -> None:
        """Route requests with no registered code to ``handler``."""
        self._default = (handler, inspect.iscoroutinefunction(handler))

    def dispatch(self, request: RemotingCommand, conn: Connection) -> None:
        """Handle one incoming request: inline for plain handlers, as a task for async ones."""
        entry = self._table.get(request.code, self._default)
        if entry is None:
            _reply(
                request,
                request.response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request type {request.code} not supported"
                ),
                conn,
            )
            return
        handler, is_async = entry
        try:
            result = handler(request, conn)
        except Exception as exc:
            _reply(request, _error_response(request, exc), conn)
            return
        if is_async:
            self._spawn(result, request, conn)  # type: ignore[arg-type]
        elif result is None or type(result) is RemotingCommand:
            _reply(request, result, conn)
        elif inspect.isawaitable(result):
            self._spawn(result, request, conn)
        else:  # a RemotingCommand subclass
            _reply(request, result, conn)

    def _spawn(
        self, awaitable: Awaitable[RemotingCommand | None], request: RemotingCommand, conn: Connection
    ) -> None:
        conn.task_started()
        task = asyncio.get_running_loop().create_task(_run(awaitable, request, conn))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def cancel_all(self) -> None:
        """Cancel every running handler task and wait for them to end."""
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _run(
    awaitable: Awaitable[RemotingCommand | None], request: RemotingCommand, conn: Connection
) -> None:
    try:
        try:
            response = await awaitable
        except Exception as exc:
            response = _error_response(request, exc)
        _reply(request, response, conn)
    finally:
        conn.task_finished()


def _error_response(request: RemotingCommand, exc: Exception) -> RemotingCommand:
    """Map a handler's exception to its response: the one place errors become codes."""
    if isinstance(exc, ResponseError):
        log.debug("request code %s answered %s: %s", request.code, exc.code, exc.remark)
        return request.response(exc.code, exc.remark or type(exc).__name__)
    log.exception("handler for request code %s failed", request.code, exc_info=exc)
    return request.response(ResponseCode.SYSTEM_ERROR, str(exc) or type(exc).__name__)


def _reply(request: RemotingCommand, response: RemotingCommand | None, conn: Connection) -> None:
    """Send ``response`` to ``request`` unless there is none or the request was oneway."""
    if response is None or request.flag & RPC_ONEWAY:
        return
    # Whatever the handler built, the answer pairs with the request and speaks its encoding
    # (a C++ client reads JSON only and sends JSON only).
    response.opaque = request.opaque
    response.flag |= RPC_TYPE
    response.serialize_type = request.serialize_type
    try:
        conn.send(response)
    except Exception as exc:  # an unencodable response (bad body type, huge header)
        log.exception("cannot encode the response to request code %s", request.code)
        conn.send(request.response(ResponseCode.SYSTEM_ERROR, f"cannot encode response: {exc}"))


class RemotingServer:
    """Listens on ``host:port`` (0 = any free port) and answers requests by code.

    Malformed or oversized frames close only the connection that sent them.  A connection
    that has sent nothing for ``idle_timeout`` seconds and has no request in progress is
    closed (RocketMQ's ``serverChannelMaxIdleTimeSeconds``, 120 s), so peers that vanish
    without a FIN do not hold sockets and buffers for ever.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_inflight_per_connection: int = 4096,
        idle_timeout: float | None = 120.0,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.idle_timeout = idle_timeout
        self._reaper: asyncio.Task[None] | None = None
        self._max_frame_size = max_frame_size
        self._max_inflight = max_inflight_per_connection
        self._dispatcher = RequestDispatcher()
        self._server: asyncio.Server | None = None
        self.connections: set[Connection] = set()

    def register(self, code: int, handler: Handler) -> None:
        """Answer requests with ``code`` by ``handler(request, connection)``."""
        self._dispatcher.register(code, handler)

    def register_default(self, handler: Handler) -> None:
        """Answer requests with no registered code by ``handler`` (instead of NOT_SUPPORTED)."""
        self._dispatcher.register_default(handler)

    @property
    def port(self) -> int:
        """Return the port actually bound (valid after ``start``)."""
        if self._server is None or not self._server.sockets:
            raise RuntimeError("the server is not started")
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def address(self) -> str:
        """Return ``host:port`` as clients dial it (valid after ``start``)."""
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        """Bind and start accepting connections."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, self.host, self._requested_port, reuse_address=True
        )
        log.info("remoting server listening on %s", self.address)
        if self.idle_timeout is not None:
            self._reaper = loop.create_task(self._close_idle_connections(self.idle_timeout))

    async def _close_idle_connections(self, idle_timeout: float) -> None:
        interval = min(10.0, idle_timeout / 2)
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.busy or now - conn.last_read < idle_timeout:
                    continue
                log.info("closing %s: idle for %.0f s", conn.remote_address, now - conn.last_read)
                conn.close(f"idle for more than {idle_timeout:g}s")

    def _new_connection(self) -> Connection:
        conn = _ServerConnection(self, max_frame_size=self._max_frame_size, max_inflight=self._max_inflight)
        return conn

    async def close(self, grace: float = 1.0) -> None:
        """Stop accepting, cancel running handlers and close every connection.

        Connections get ``grace`` seconds to flush what was written, then are aborted.
        """
        if self._server is not None:
            self._server.close()
        await stop_task(self._reaper)
        self._reaper = None
        await self._dispatcher.cancel_all()
        connections = list(self.connections)
        for conn in connections:
            conn.close("server closing")
        if connections:
            waits = [asyncio.ensure_future(conn.wait_closed()) for conn in connections]
            _, late = await asyncio.wait(waits, timeout=grace)
            for conn in connections:
                if not conn.closed or conn in self.connections:
                    conn.abort("server closing")
            for waiter in late:
                waiter.cancel()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


class _ServerConnection(Connection):
    """A server-side connection: joins ``server.connections`` while open."""

    def __init__(self, server: RemotingServer, **kwargs: int) -> None:
        super().__init__(server._dispatcher.dispatch, **kwargs)
        self._owner = server
        self.last_read = time.monotonic()

    @property
    def busy(self) -> bool:
        """Whether a request from this peer is still being handled (a held pull, say)."""
        return self._inflight > 0

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        super().data_received(data)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.last_read = time.monotonic()
        super().connection_made(transport)
        self._owner.connections.add(self)
        log.debug("connection from %s", self.remote_address)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.connections.discard(self)
        log.debug("connection from %s closed (%s)", self.remote_address, exc or self._close_reason)
        super().connection_lost(exc)
