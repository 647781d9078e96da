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

Self-protection (a hostile or broken peer must not grow the server or slow the others):

* fair turns: a connection has at most a few requests answered per loop iteration;
  pipelined requests beyond them wait, unread, for later turns, so other clients' requests
  never queue behind a flooding peer's whole pipeline;
* write back-pressure: a connection whose unsent answers pass the high-water mark is not
  read from until they drain below the low one (RocketMQ's ``writeBufferHighWaterMark`` /
  ``writeBufferLowWaterMark``; Netty turns autoRead off the same way), so a peer that sends
  and never reads holds at most the mark plus one turn's answers and one read's requests;
* a cap on the bytes held in partial frames over all connections together: past it the
  connections whose partial frames are oldest are dropped until the total is under it;
* a deadline for each frame from its first byte, so a peer that drips a byte at a time
  (which resets the idle timer each time) is still closed; and the idle timeout
  (``serverChannelMaxIdleTimeSeconds``) for peers that send nothing at all.

Thread-safety: event-loop only.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from broker_core.aio import stop_task
from broker_core.errors import ResponseError
from broker_core.remoting.busypoll import DEFAULT_BUSY_POLL_MICROS, LoopBusyPoll, check_busy_poll_micros
from broker_core.remoting.codes import RPC_ONEWAY, RPC_TYPE, ResponseCode
from broker_core.remoting.command import DEFAULT_MAX_FRAME_SIZE, RemotingCommand
from broker_core.remoting.connection import PAUSED_BY_BACKLOG, PAUSED_BY_WRITES, Connection
from broker_core.remoting.errors import FrameError
from broker_core.remoting.tls import DISABLED, ENFORCING, HANDSHAKE_RECORD, TlsServerSettings, TlsSession

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
        # Handler tasks, and futures a handler returned, still to answer (cancelled at stop).
        self.tasks: set[asyncio.Future[Any]] = set()

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
        elif isinstance(result, asyncio.Future):
            self._reply_when_done(result, request, conn)
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

    def _reply_when_done(
        self, future: asyncio.Future[RemotingCommand | None], request: RemotingCommand, conn: Connection
    ) -> None:
        """Answer from a future a handler returned, when it is done: no task to run."""
        conn.task_started()
        self.tasks.add(future)
        future.add_done_callback(lambda done: self._reply_done(done, request, conn))

    def _reply_done(
        self, future: asyncio.Future[RemotingCommand | None], request: RemotingCommand, conn: Connection
    ) -> None:
        self.tasks.discard(future)
        try:
            if future.cancelled():  # shutting down: nobody to answer
                return
            exc = future.exception()
            if exc is None:
                _reply(request, future.result(), conn)
            elif isinstance(exc, Exception):
                _reply(request, _error_response(request, exc), conn)
        finally:
            conn.task_finished()

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


DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK = 256 * 1024
"""Unsent bytes on one connection past which it is not read from (``writeBufferHighWaterMark``)."""
DEFAULT_WRITE_BUFFER_LOW_WATER_MARK = 64 * 1024
"""Unsent bytes below which a connection paused by the high-water mark is read again."""
DEFAULT_PARTIAL_FRAMES_MAX_BYTES = 64 * 1024 * 1024
"""Bytes of partial frames held over every connection together (four frames of the largest size)."""
DEFAULT_PARTIAL_FRAME_TIMEOUT = 30.0
"""Seconds a frame may take to arrive whole, from its first byte."""


class RemotingServer:
    """Listens on ``host:port`` (0 = any free port) and answers requests by code.

    Malformed or oversized frames close only the connection that sent them.  A connection
    that has sent nothing for ``idle_timeout`` seconds and has no request in progress is
    closed (RocketMQ's ``serverChannelMaxIdleTimeSeconds``, 120 s), so peers that vanish
    without a FIN do not hold sockets and buffers for ever.

    Protection from peers that would grow the server (module docstring): reading from a
    connection pauses while it has more than ``write_buffer_high_water_mark`` unsent bytes
    and resumes below ``write_buffer_low_water_mark``; when partial frames on all
    connections together hold more than ``partial_frames_max_bytes``, the connections whose
    partial frames began first are dropped until they hold less; a frame not whole
    ``partial_frame_timeout`` seconds after its first byte closes its connection (not
    counted while the server itself has paused reading).  ``partial_frame_bytes`` and
    ``unsent_bytes`` say what is held now; every drop is logged at WARNING with the peer
    and why.

    Fair turns: a read answers at most ``TURN_FRAMES`` requests at once; a connection with
    more already read stops reading and queues for turns, ``ROUND_SECONDS`` of them per
    loop iteration (or ``ROUND_FRAMES`` requests) over all queued connections
    (``_run_turns``), so one client's request
    never waits behind another's whole pipeline.

    After each read the loop polls for ``busy_poll_micros`` before it sleeps, adaptively
    (``remoting.busypoll``): a client sending one request at a time has its next one read
    without the wake-up of an idle CPU.
    """

    TURN_FRAMES = 16
    """Requests a connection has answered per turn (and per read, before its first turn)."""
    ROUND_SECONDS = 0.00025
    ROUND_FRAMES = 256
    """Time and requests spent on turns per loop iteration, over every connection waiting
    for one, whichever runs out first (at least one turn is given)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_inflight_per_connection: int = 4096,
        idle_timeout: float | None = 120.0,
        write_buffer_high_water_mark: int = DEFAULT_WRITE_BUFFER_HIGH_WATER_MARK,
        write_buffer_low_water_mark: int = DEFAULT_WRITE_BUFFER_LOW_WATER_MARK,
        partial_frames_max_bytes: int = DEFAULT_PARTIAL_FRAMES_MAX_BYTES,
        partial_frame_timeout: float | None = DEFAULT_PARTIAL_FRAME_TIMEOUT,
        tls: TlsServerSettings | None = None,
        busy_poll_micros: int = DEFAULT_BUSY_POLL_MICROS,
    ) -> None:
        if not 0 <= write_buffer_low_water_mark <= write_buffer_high_water_mark:
            raise ValueError("the write buffer's low-water mark must be between 0 and its high-water mark")
        check_busy_poll_micros("busy_poll_micros", busy_poll_micros)
        self.host = host
        self._requested_port = port
        self.idle_timeout = idle_timeout
        self.partial_frame_timeout = partial_frame_timeout
        self.write_buffer_limits = (write_buffer_high_water_mark, write_buffer_low_water_mark)
        self.partial_frames_max_bytes = partial_frames_max_bytes
        self.tls_mode = tls.mode if tls is not None else DISABLED
        self.tls_context = tls.context() if tls is not None else None
        self.partial_frame_bytes = 0
        """Bytes held now in frames not yet whole, over every connection."""
        self._turns: collections.deque[_ServerConnection] = collections.deque()
        self._turns_scheduled = False
        self._reaper: asyncio.Task[None] | None = None
        self._max_frame_size = max_frame_size
        self._max_inflight = max_inflight_per_connection
        self._dispatcher = RequestDispatcher()
        self._server: asyncio.Server | None = None
        self.connections: set[_ServerConnection] = set()
        self.busy_poll = LoopBusyPoll(busy_poll_micros)
        """Keeps the loop polling a moment after each read (``remoting.busypoll``)."""

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

    @property
    def waiting_turns(self) -> int:
        """Return how many connections have requests already read that wait for a turn."""
        return len(self._turns)

    def _queue_turn(self, conn: _ServerConnection) -> None:
        self._turns.append(conn)
        if not self._turns_scheduled:
            self._turns_scheduled = True
            asyncio.get_running_loop().call_soon(self._run_turns)

    def _run_turns(self) -> None:
        """Give waiting connections their turns, first come first served, for this
        iteration's ``ROUND_SECONDS`` or ``ROUND_FRAMES``; the rest wait for the next one.

        So however many peers flood the server, a request from any other client waits
        behind about one round of others' work (a quarter of a ms, plus ``TURN_FRAMES``
        requests per peer whose reading just resumed), not behind one flooder's whole read
        (tens of thousands of requests with uvloop, hundreds of ms).
        """
        self._turns_scheduled = False
        turns, quantum, budget = self._turns, self.TURN_FRAMES, self.ROUND_FRAMES
        deadline = time.perf_counter() + self.ROUND_SECONDS
        while turns:
            budget -= max(1, turns.popleft()._turn(quantum))
            if budget <= 0 or time.perf_counter() >= deadline:
                break
        if turns and not self._turns_scheduled:
            self._turns_scheduled = True
            asyncio.get_running_loop().call_soon(self._run_turns)

    @property
    def unsent_bytes(self) -> int:
        """Return the bytes of answers written but not yet taken by the sockets, over every connection."""
        return sum(conn.unsent_bytes for conn in self.connections)

    async def start(self) -> None:
        """Bind and start accepting connections."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._new_connection, self.host, self._requested_port, reuse_address=True
        )
        log.info("remoting server listening on %s", self.address)
        timeouts = [t for t in (self.idle_timeout, self.partial_frame_timeout) if t is not None]
        if timeouts:
            self._reaper = loop.create_task(self._reap(min(10.0, min(timeouts) / 2)))

    async def _reap(self, interval: float) -> None:
        """Every ``interval`` s, close connections idle too long or with a frame late."""
        idle_timeout, frame_timeout = self.idle_timeout, self.partial_frame_timeout
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for conn in list(self.connections):
                started = conn.partial_since
                if (
                    frame_timeout is not None
                    and started
                    and not conn.reading_paused
                    and now - started > frame_timeout
                ):
                    conn.drop(
                        f"a frame still incomplete {now - started:.1f} s after its first byte "
                        f"({conn.partial_bytes} bytes so far; the limit is {frame_timeout:g} s)"
                    )
                elif idle_timeout is not None and not conn.busy and now - conn.last_read >= idle_timeout:
                    log.info("closing %s: idle for %.0f s", conn.remote_address, now - conn.last_read)
                    if conn.unsent_bytes:  # a peer that reads nothing would never let close() finish
                        conn.abort(f"idle for more than {idle_timeout:g}s")
                    else:
                        conn.close(f"idle for more than {idle_timeout:g}s")

    def _partial_changed(self, conn: _ServerConnection, held: int) -> None:
        """Account ``conn`` now holding ``held`` bytes of partial frame; shed past the cap."""
        self.partial_frame_bytes += held - conn.partial_bytes
        conn.partial_bytes = held
        if self.partial_frame_bytes > self.partial_frames_max_bytes:
            self._shed()

    def _release(self, conn: _ServerConnection) -> None:
        """Stop counting ``conn``'s partial frame (it is dropped or gone)."""
        self.partial_frame_bytes -= conn.partial_bytes
        conn.partial_bytes = 0

    def _shed(self) -> None:
        """Drop connections, oldest partial frame first, until partial frames fit the cap.

        Oldest first: a peer hoarding partial frames has held them longest, while a client
        sending a large message right now has just begun its frame.
        """
        total_before, cap = self.partial_frame_bytes, self.partial_frames_max_bytes
        holders = sorted((c for c in self.connections if c.partial_bytes), key=lambda c: c.partial_since)
        for conn in holders:
            if self.partial_frame_bytes <= cap:
                break
            conn.drop(
                f"partial frames on all connections hold {total_before} bytes, over the "
                f"{cap}-byte limit; this one's ({conn.partial_bytes} bytes) began first"
            )

    def _new_connection(self) -> Connection:
        return _ServerConnection(self, max_frame_size=self._max_frame_size, max_inflight=self._max_inflight)

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
    """A server-side connection: joins ``server.connections`` while open, and keeps what
    the server's protections need: when it last read, how many bytes its partial frame
    holds and since when, and whether its peer keeps up with the answers.

    Fair turns: one read may bring thousands of pipelined requests (libuv reads up to 32
    times 256 kB per wake-up), and answering them all at once made every other client wait
    hundreds of ms behind a flooding one, and wrote tens of MB of answers to a peer that
    reads none before its write buffer was ever checked.  So a read has at most
    ``TURN_FRAMES`` of its requests answered at once; if more whole frames wait, the
    connection stops reading (``PAUSED_BY_BACKLOG``), keeps them in its decoder as bytes,
    and queues for turns (``RemotingServer._run_turns``).  A turn's answers go out in one
    write early in the next iteration, where the high-water mark is checked.
    """

    def __init__(self, server: RemotingServer, **kwargs: int) -> None:
        super().__init__(server._dispatcher.dispatch, **kwargs)
        self._owner = server
        self.last_read = time.monotonic()
        self.partial_bytes = 0
        """Bytes of the partial frame received so far (counted in the server's
        ``partial_frame_bytes``; whole frames waiting for a turn are not)."""
        self.partial_since = 0.0
        """``time.monotonic()`` when the frame now partial began arriving (0: none is)."""
        self._backlog = False  # whole frames may wait in the decoder for a turn
        self._sniff = True  # the first read tells whether the peer speaks TLS

    @property
    def busy(self) -> bool:
        """Whether a request from this peer is still being handled (a held pull, say)."""
        return self._inflight > 0

    def data_received(self, data: bytes) -> None:
        if self._doomed is not None:
            return
        if self._tls is not None or self._sniff:
            plain = self._through_tls(data)
            if plain is None:
                return
            data = plain
        self.last_read = now = time.monotonic()
        self._owner.busy_poll.read(now)
        quantum = self._owner.TURN_FRAMES
        try:
            commands = self._decoder.feed(data, quantum)
        except FrameError as exc:
            self._bad_frame(exc)
            return
        self._answer(commands)
        if len(commands) < quantum:
            # What the decoder holds now is one partial frame; one completed in this read
            # means that partial one is new.
            held = self._decoder.buffered
            if held:
                if commands or not self.partial_since:
                    self.partial_since = now
                if held != self.partial_bytes:
                    self._owner._partial_changed(self, held)
            elif self.partial_bytes:
                self.partial_since = 0.0
                self._owner._partial_changed(self, 0)
            return
        # More whole frames may wait: they get turns, and nothing is read meanwhile.  (The
        # partial frame behind them is counted once they are answered.)
        self._backlog = True
        if not self._paused_by and not self._closing and self._doomed is None:
            self._pause_reading(PAUSED_BY_BACKLOG)
            self._owner._queue_turn(self)
        # else: paused for another reason; its _resume_reading queues the turn.

    def _answer(self, commands: list[RemotingCommand]) -> None:
        """Handle ``commands`` (one read's or one turn's) and write the answers ready now, in
        one write, at once.  Left corked to the end of the loop's turn they would wait for
        what the handlers set going meanwhile: a held pull that a send woke builds its
        answer first, so the producer's acknowledgement waited for the consumer's message
        (BENCHMARKS.md, issue 19: about 20 µs of its p50 at 2,000 msgs/s).  Corked from the
        start, so ``_write`` schedules no flush of its own for them."""
        if self._corked is None:
            self._corked = []
        try:
            self._handle(commands)
        finally:
            self._flush()

    def _through_tls(self, data: bytes) -> bytes | None:
        """The plain bytes ``data`` carries (None: nothing to frame yet, or the connection
        is closing).  The first read decides, by tlsMode, whether this peer speaks TLS."""
        if self._sniff:
            self._sniff = False
            mode, context = self._owner.tls_mode, self._owner.tls_context
            if data[:1] == bytes([HANDSHAKE_RECORD]):
                if context is None:
                    self.drop("it began a TLS handshake, and this server's tlsMode is disabled")
                    return None
                self._tls = TlsSession(context)
            elif mode == ENFORCING:
                self.drop("it speaks the plain protocol, and this server's tlsMode is enforcing")
                return None
            else:
                return data
        tls = self._tls
        assert tls is not None
        try:
            plain = tls.receive(data)
        except ssl.SSLError as exc:
            self.drop(f"TLS failed: {exc}")
            return None
        pending = tls.outgoing()
        if pending and self._transport is not None:
            self._transport.write(pending)
        if tls.peer_closed:
            self.close("the peer ended TLS")
        if not plain:
            self.last_read = time.monotonic()
            return None
        return plain

    def _turn(self, quantum: int) -> int:
        """Answer up to ``quantum`` of the frames that waited; queue again if more wait,
        else read again.  Return how many were answered."""
        if self._paused_by != PAUSED_BY_BACKLOG or self._closing or self._doomed is not None:
            # Paused meanwhile for another reason too (its answers back up, say): that
            # reason's _resume_reading queues the next turn.
            self._paused_by &= ~PAUSED_BY_BACKLOG
            return 0
        try:
            commands = self._decoder.feed(b"", quantum)
        except FrameError as exc:
            self._bad_frame(exc)
            return 0
        self._answer(commands)
        if len(commands) == quantum and self._paused_by == PAUSED_BY_BACKLOG and not self._closing:
            self._owner._queue_turn(self)
            return quantum
        if len(commands) < quantum:
            self._backlog = False
            held = self._decoder.buffered  # the partial frame after the backlog
            self.partial_since = time.monotonic() if held else 0.0
            if held != self.partial_bytes:
                self._owner._partial_changed(self, held)
        self._resume_reading(PAUSED_BY_BACKLOG)
        return len(commands)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.last_read = time.monotonic()
        super().connection_made(transport)
        high, low = self._owner.write_buffer_limits
        if self._transport is not None:
            self._transport.set_write_buffer_limits(high, low)
        self._owner.connections.add(self)
        log.debug("connection from %s", self.remote_address)

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.connections.discard(self)
        self._owner._release(self)
        log.debug("connection from %s closed (%s)", self.remote_address, exc or self._close_reason)
        super().connection_lost(exc)

    # -- protections ---------------------------------------------------------------------

    def pause_writing(self) -> None:
        """The transport's unsent bytes passed the high-water mark: stop reading this peer.

        Only the server does this.  A client pausing its reads while its requests back up
        could deadlock with a server doing the same.
        """
        log.debug("not reading from %s: %d bytes of answers unsent", self.remote_address, self.unsent_bytes)
        self._pause_reading(PAUSED_BY_WRITES)

    def resume_writing(self) -> None:
        """The unsent bytes drained below the low-water mark: read this peer again."""
        self._resume_reading(PAUSED_BY_WRITES)

    def _resume_reading(self, reason: int) -> bool:
        # Whole frames read before the pause go first: they get a turn, and the socket is
        # read again once they are answered.
        if not self._paused_by & reason:
            return False
        if (
            self._backlog
            and reason != PAUSED_BY_BACKLOG
            and self._paused_by == reason
            and not self._closing
            and self._doomed is None
        ):
            self._paused_by = PAUSED_BY_BACKLOG  # the transport stays paused
            self._owner._queue_turn(self)
            return False
        resumed = super()._resume_reading(reason)
        if resumed and self.partial_since:
            self.partial_since = time.monotonic()  # the pause was ours, not the peer's
        return resumed

    def drop(self, why: str) -> None:
        """Close at once, discarding what is buffered both ways, and say why at WARNING."""
        if self._closing:
            return
        log.warning("dropping connection from %s: %s", self.remote_address, why)
        self._doomed = why
        self._decoder.reset()
        self._backlog = False
        self.partial_since = 0.0
        self._owner._release(self)
        self.abort(why)
