"""One remoting connection: a socket, its frame decoder and the table of requests awaiting answers.

Both ends of the protocol use it: the server gets one per accepted socket, the client one
per remote address.  Traffic is symmetric: either side may send requests on it (the broker
sends NOTIFY_CONSUMER_IDS_CHANGED to clients on the connection they opened), so incoming
frames are split by flag bit 0: responses complete the future waiting under their opaque,
requests go to the ``dispatch`` callback.

Thread-safety: event-loop only.  Everything here runs on the loop that owns the transport.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import cast

from broker_core.remoting.codes import RPC_ONEWAY, RPC_TYPE
from broker_core.remoting.command import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, RemotingCommand, encode
from broker_core.remoting.errors import ConnectionClosedError, FrameError, RemotingTimeoutError
from broker_core.remoting.tls import TlsSession

log = logging.getLogger(__name__)

Dispatch = Callable[[RemotingCommand, "Connection"], None]
"""Receives every incoming request; must not block (spawn a task for slow work)."""

_OPAQUE_MASK = 0x7FFFFFFF  # opaque is an int32 on the wire (binary headers)

# Why reading from the socket is paused (bits of ``Connection._paused_by``); reading resumes
# only once every reason is gone.
PAUSED_BY_INFLIGHT = 1  # too many dispatched requests still running
PAUSED_BY_WRITES = 2  # the peer is not reading our answers (server side only)
PAUSED_BY_BAD_FRAME = 4  # the stream is broken: nothing more is read
PAUSED_BY_BACKLOG = 8  # frames already read are answered first (server side only)


class Connection(asyncio.Protocol):
    """One socket: sends commands, matches responses to requests by opaque, hands requests on.

    Args:
        dispatch: called with each incoming request (not responses); None answers nothing.
        max_frame_size: frames above this (prefix included) close the connection.
        max_inflight: when this many dispatched requests are still running, reading from
            the socket pauses until half of them finish (back-pressure on a flooding peer).

    Reading can be paused for several reasons at once (``PAUSED_BY_*``); it resumes when
    the last one clears.
    """

    def __init__(
        self,
        dispatch: Dispatch | None = None,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_inflight: int = 4096,
    ) -> None:
        self.dispatch = dispatch
        self.remote_address = ""
        self._decoder = FrameDecoder(max_frame_size)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._opaque = 0
        self._transport: asyncio.Transport | None = None
        self._closing = False
        self._close_reason = "not connected"
        self._on_close: list[Callable[[Connection], None]] = []
        self._lost: asyncio.Future[None] | None = None
        self._inflight = 0
        self._max_inflight = max_inflight
        self._paused_by = 0
        self._corked: list[bytes] | None = None
        # Set after a bad frame: why the connection closes once its running requests end.
        self._doomed: str | None = None
        # A server connection that speaks TLS (``remoting.tls``): frames go through it.
        self._tls: TlsSession | None = None

    def __repr__(self) -> str:
        state = "closed" if self._closing else "open"
        return f"<Connection {self.remote_address or '?'} {state}, {len(self._pending)} pending>"

    # -- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, only look-alikes.
        self._transport = cast(asyncio.Transport, transport)
        self._lost = asyncio.get_running_loop().create_future()
        peer = transport.get_extra_info("peername")
        if peer:
            self.remote_address = f"{peer[0]}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except (OSError, AttributeError):
                pass

    def data_received(self, data: bytes) -> None:
        if self._doomed is not None:
            return
        try:
            commands = self._decoder.feed(data)
        except FrameError as exc:
            self._bad_frame(exc)
            return
        self._handle(commands)

    def _bad_frame(self, exc: FrameError) -> None:
        log.warning("closing %s: %s", self.remote_address, exc)
        # The good frames before the bad one are still answered; nothing after it can be
        # trusted, so reading stops and the connection closes once they are.
        self._doomed = f"bad frame: {exc}"
        self._pause_reading(PAUSED_BY_BAD_FRAME)
        self._handle(exc.commands)
        if self._inflight == 0:
            self.close(self._doomed)

    def _handle(self, commands: list[RemotingCommand]) -> None:
        pending = self._pending
        for cmd in commands:
            if cmd.flag & RPC_TYPE:
                future = pending.pop(cmd.opaque, None)
                if future is not None and not future.done():
                    future.set_result(cmd)
                # else: its request timed out or never existed; dropped, as the Java and
                # C++ clients do.
            elif self.dispatch is not None:
                try:
                    self.dispatch(cmd, self)
                except Exception:
                    log.exception("dispatch of request code %s from %s failed", cmd.code, self.remote_address)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if exc is not None and self._close_reason == "not connected":
            self._close_reason = f"connection lost: {exc}"
        elif self._close_reason == "not connected":
            self._close_reason = "closed by peer"
        self._transport = None
        pending, self._pending = self._pending, {}
        for opaque, future in pending.items():
            if not future.done():
                future.set_exception(
                    ConnectionClosedError(
                        f"{self.remote_address}: {self._close_reason} before response to opaque {opaque}"
                    )
                )
        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("on_close callback of %s failed", self.remote_address)
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    # -- sending ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Return whether the connection is closing or closed (sends are dropped)."""
        return self._closing or self._transport is None

    @property
    def unsent_bytes(self) -> int:
        """Return how many bytes written to this connection have not reached the socket yet."""
        corked = sum(map(len, self._corked)) if self._corked else 0
        transport = self._transport
        return corked + (transport.get_write_buffer_size() if transport is not None else 0)

    @property
    def reading_paused(self) -> bool:
        """Return whether reading from the socket is paused (back-pressure or a bad frame)."""
        return self._paused_by != 0

    def send(self, cmd: RemotingCommand) -> bool:
        """Write ``cmd`` as is; return False (and write nothing) if the connection is closing."""
        transport = self._transport
        if transport is None or self._closing:
            return False
        self._write(encode(cmd))
        return True

    def _write(self, frame: bytes) -> None:
        # Frames written during one loop iteration go out in one write at its end: one
        # syscall for a whole batch of pipelined responses instead of one per frame.  (The
        # server writes a read's answers at the end of that read: remoting.server.)
        corked = self._corked
        if corked is None:
            self._corked = [frame]
            asyncio.get_running_loop().call_soon(self._flush)
        else:
            corked.append(frame)

    def _flush(self) -> None:
        corked, self._corked = self._corked, None
        if corked and self._transport is not None:
            data = corked[0] if len(corked) == 1 else b"".join(corked)
            tls = self._tls
            self._transport.write(data if tls is None else tls.wrap(data))

    def _next_opaque(self) -> int:
        self._opaque = opaque = (self._opaque + 1) & _OPAQUE_MASK
        return opaque

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``cmd`` under a fresh opaque and return its response.

        Raises:
            RemotingTimeoutError: no response within ``timeout`` seconds.
            ConnectionClosedError: the connection closed first (or was already closed).
        """
        if self._transport is None or self._closing:
            raise ConnectionClosedError(f"{self.remote_address}: {self._close_reason}")
        opaque = self._next_opaque()
        cmd.opaque = opaque
        cmd.flag &= ~(RPC_TYPE | RPC_ONEWAY)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = future
        timer = loop.call_later(timeout, _expire, future, self.remote_address, cmd.code, timeout)
        try:
            self._write(encode(cmd))
            return await future
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    def send_oneway(self, cmd: RemotingCommand) -> bool:
        """Send ``cmd`` with the oneway flag under a fresh opaque; return False if closing."""
        cmd.opaque = self._next_opaque()
        cmd.flag = (cmd.flag | RPC_ONEWAY) & ~RPC_TYPE
        return self.send(cmd)

    # -- lifecycle ----------------------------------------------------------------------

    def add_close_callback(self, callback: Callable[[Connection], None]) -> None:
        """Run ``callback(self)`` once the connection is lost (at once if it already is)."""
        if self._lost is not None and self._lost.done():
            callback(self)
        else:
            self._on_close.append(callback)

    def close(self, reason: str = "closed locally") -> None:
        """Flush what was written, then close; pending requests fail with ConnectionClosedError."""
        if self._transport is not None and not self._closing:
            self._flush()
            self._closing = True
            self._close_reason = reason
            self._transport.close()

    def _abort(self, reason: str) -> None:
        if self._transport is not None:
            self._closing = True
            self._close_reason = reason
            self._transport.abort()

    def abort(self, reason: str = "aborted locally") -> None:
        """Close at once, discarding unsent data."""
        self._abort(reason)

    async def wait_closed(self) -> None:
        """Return once the connection is lost (``on_close`` callbacks have run)."""
        if self._lost is not None:
            await asyncio.shield(self._lost)

    # -- back-pressure ----------------------------------------------------------------------

    def _pause_reading(self, reason: int) -> None:
        """Stop reading from the socket for ``reason`` (a ``PAUSED_BY_*`` bit)."""
        if not self._paused_by and self._transport is not None and not self._closing:
            self._transport.pause_reading()
        self._paused_by |= reason

    def _resume_reading(self, reason: int) -> bool:
        """Clear ``reason``; read again if no other reason holds.  Return whether reading resumed."""
        if not self._paused_by & reason:
            return False
        self._paused_by &= ~reason
        if self._paused_by or self._transport is None or self._closing:
            return False
        self._transport.resume_reading()
        return True

    def task_started(self) -> None:
        """Count one dispatched request still running; pause reading past ``max_inflight``."""
        self._inflight += 1
        if self._inflight >= self._max_inflight and not self._paused_by & PAUSED_BY_INFLIGHT:
            self._pause_reading(PAUSED_BY_INFLIGHT)

    def task_finished(self) -> None:
        """Count one dispatched request done; resume reading once half the limit drained."""
        self._inflight -= 1
        if self._doomed is not None:
            if self._inflight == 0:
                self.close(self._doomed)
            return
        if self._paused_by & PAUSED_BY_INFLIGHT and self._inflight <= self._max_inflight // 2:
            self._resume_reading(PAUSED_BY_INFLIGHT)


def _expire(future: asyncio.Future[RemotingCommand], address: str, code: int, timeout: float) -> None:
    if not future.done():
        future.set_exception(
            RemotingTimeoutError(f"{address}: no response to request code {code} within {timeout:g}s")
        )
