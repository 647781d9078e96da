"""Blocking remoting connections, for a caller thread that waits on its answer anyway.

A synchronous send through the client's event loop crosses threads twice (the caller
hands the request to the loop, the loop hands the answer back), and each crossing costs
a thread wake-up of 30-50 µs here: more than the broker takes to store the message.
A thread that blocks until the answer may as well do the I/O itself, as redis-py does:
it writes the frame on a socket of its own and reads the answer on the same socket.

After writing, a thread that is the only one of its process waiting on such a socket polls
it a moment before sleeping (``remoting.busypoll``): the answer to a request on loopback
comes back within that window, and sleeping would cost an idle CPU's halt and wake-up.
Two or more waiting threads sleep at once instead: they would take the GIL from each
other.

``BlockingConnection`` is one such socket, one request at a time.  ``BlockingChannels``
keeps one per thread and address, so threads never share a socket and no lock is taken
per request.  These sockets carry only requests this process sends and their answers:
a broker sends its own requests (NOTIFY_CONSUMER_IDS_CHANGED...) on the connection that
heartbeats, which stays on the event loop.

Failures are the event-loop client's: RemotingConnectError, RemotingTimeoutError,
ConnectionClosedError.  After a timeout or a bad frame the socket is closed, since a late
answer on it could be taken for the next request's.
"""

from __future__ import annotations

import contextlib
import logging
import math
import select
import socket
import threading
import time
import weakref

from broker_core.remoting.busypoll import (
    DEFAULT_BUSY_POLL_MICROS,
    BusyPoll,
    check_busy_poll_micros,
    yield_cpu,
)
from broker_core.remoting.codes import RPC_ONEWAY, RPC_TYPE
from broker_core.remoting.command import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, RemotingCommand, encode
from broker_core.remoting.errors import (
    ConnectionClosedError,
    FrameError,
    RemotingConnectError,
    RemotingTimeoutError,
)

log = logging.getLogger(__name__)

_OPAQUE_MASK = 0x7FFFFFFF
_READ_SIZE = 256 * 1024

_waiting: set[int] = set()
"""The threads of this process waiting for an answer on a blocking connection now (set
operations are atomic under the GIL, so no lock)."""


class BlockingConnection:
    """One socket to ``addr`` (``ip:port``), used by one thread at a time.

    The socket stays in blocking mode and waits go through ``poll`` with the time left,
    so a request costs an idle check, the send, and polls then a receive; Python's socket
    timeouts would add a mode switch per call and a poll per send.  Answers are read into
    a buffer kept for the connection: a fresh 256 KiB ``recv`` buffer is an mmap and munmap
    each time.
    """

    def __init__(
        self,
        addr: str,
        *,
        connect_timeout: float,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        busy_poll_micros: int = DEFAULT_BUSY_POLL_MICROS,
    ) -> None:
        check_busy_poll_micros("busy_poll_micros", busy_poll_micros)
        host, sep, port = addr.rpartition(":")
        if not sep or not port.isdigit():
            raise RemotingConnectError(f"{addr!r} is not an ip:port address")
        self.addr = addr
        self._target = (host.strip("[]"), int(port))
        self._connect_timeout = connect_timeout
        self._max_frame_size = max_frame_size
        self._sock: socket.socket | None = None
        self._readable = select.poll()
        self._decoder = FrameDecoder(max_frame_size)
        self._buffer = bytearray(_READ_SIZE)
        self._opaque = 0
        self._busy_poll = BusyPoll(busy_poll_micros)

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection(self._target, timeout=self._connect_timeout)
        except TimeoutError as exc:
            raise RemotingConnectError(
                f"{self.addr}: connect timed out after {self._connect_timeout:g}s"
            ) from exc
        except OSError as exc:
            raise RemotingConnectError(f"{self.addr}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking: waits are polls with a deadline (see the class)
        self._readable = select.poll()
        self._readable.register(sock, select.POLLIN | select.POLLPRI)
        self._sock = sock
        self._decoder = FrameDecoder(self._max_frame_size)
        return sock

    def _usable(self) -> socket.socket:
        """The socket, reconnected when the peer closed it since the last request (an idle
        connection the broker reaped): between requests nothing may be readable, so
        anything that is (end-of-file, an error, a stray late byte) means a new socket."""
        sock = self._sock
        if sock is not None:
            if not self._readable.poll(0):
                return sock
            self.close()
        return self._connect()

    def _send_all(self, sock: socket.socket, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = sock.send(view, socket.MSG_DONTWAIT)
            except BlockingIOError:
                sent = 0
            view = view[sent:]
            if view:  # the socket's buffer is full: wait until it drains, within the deadline
                writable = select.poll()
                writable.register(sock, select.POLLOUT)
                left_ms = max(0, int((deadline - time.monotonic()) * 1000))
                if not writable.poll(left_ms) and time.monotonic() >= deadline:
                    raise TimeoutError

    def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        """Send ``cmd`` under a fresh opaque and wait for its answer.

        Raises:
            RemotingConnectError: no connection could be opened.
            RemotingTimeoutError: no answer within ``timeout`` seconds (the socket is closed).
            ConnectionClosedError: the connection broke or the answer was malformed.
        """
        deadline = time.monotonic() + timeout
        sock = self._usable()
        self._opaque = opaque = (self._opaque + 1) & _OPAQUE_MASK
        cmd.opaque = opaque
        cmd.flag &= ~(RPC_TYPE | RPC_ONEWAY)
        buffer = self._buffer
        view = memoryview(buffer)
        readable = self._readable
        me = threading.get_ident()
        _waiting.add(me)
        try:
            self._send_all(sock, encode(cmd), deadline)
            poll_until = self._busy_poll.until(time.monotonic()) if len(_waiting) == 1 else 0.0
            while True:
                if poll_until:  # poll (not sleep) for the answer a moment: remoting.busypoll
                    if not readable.poll(0):
                        if time.monotonic() < poll_until:
                            yield_cpu()  # to a process that shares this CPU (the server's, say)
                            continue
                        self._busy_poll.miss()
                        poll_until = 0.0
                        continue
                    self._busy_poll.hit()
                    poll_until = 0.0
                else:
                    left = deadline - time.monotonic()
                    if left <= 0 or not readable.poll(max(1, math.ceil(left * 1000))):
                        if time.monotonic() >= deadline:
                            raise TimeoutError
                        continue  # poll woke early (a signal): wait the rest
                received = sock.recv_into(buffer, _READ_SIZE, socket.MSG_DONTWAIT)
                if not received:
                    raise ConnectionClosedError(
                        f"{self.addr}: closed by peer before response to opaque {opaque}"
                    )
                # The decoder copies what it keeps: the buffer may be read into again.
                for frame in self._decoder.feed(view[:received]):
                    if frame.flag & RPC_TYPE and frame.opaque == opaque:
                        return frame
                    # Anything else is not for this request: a broker's own requests go to
                    # the heartbeating connection, so none should come here.
                    log.debug("%s: ignored frame code %s opaque %s", self.addr, frame.code, frame.opaque)
        except BlockingIOError:  # readable, then nothing to read: treat as a broken socket
            self.close()
            raise ConnectionClosedError(f"{self.addr}: connection lost: nothing to read after poll") from None
        except TimeoutError:
            self.close()
            raise RemotingTimeoutError(
                f"{self.addr}: no response to request code {cmd.code} within {timeout:g}s"
            ) from None
        except FrameError as exc:
            self.close()
            raise ConnectionClosedError(f"{self.addr}: bad frame in response: {exc}") from exc
        except ConnectionClosedError:
            self.close()
            raise
        except OSError as exc:
            self.close()
            raise ConnectionClosedError(f"{self.addr}: connection lost: {exc}") from exc
        finally:
            _waiting.discard(me)

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` with the oneway flag; nothing comes back.

        Raises RemotingConnectError or ConnectionClosedError (also when the socket's buffer
        stays full for the connect timeout).
        """
        sock = self._usable()
        self._opaque = (self._opaque + 1) & _OPAQUE_MASK
        cmd.opaque = self._opaque
        cmd.flag = (cmd.flag | RPC_ONEWAY) & ~RPC_TYPE
        try:
            self._send_all(sock, encode(cmd), time.monotonic() + self._connect_timeout)
        except TimeoutError:
            self.close()
            raise ConnectionClosedError(
                f"{self.addr}: oneway request not sent: the peer does not read"
            ) from None
        except OSError as exc:
            self.close()
            raise ConnectionClosedError(f"{self.addr}: connection lost: {exc}") from exc

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError, KeyError, ValueError):
                self._readable.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()


class BlockingChannels:
    """Blocking connections by calling thread and address.

    A thread's connections live as long as the thread (or until ``close``), and the
    pool closes every one of them on ``close``.
    """

    def __init__(
        self,
        *,
        connect_timeout: float = 3.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        busy_poll_micros: int = DEFAULT_BUSY_POLL_MICROS,
    ) -> None:
        check_busy_poll_micros("busy_poll_micros", busy_poll_micros)
        self.connect_timeout = connect_timeout
        self.max_frame_size = max_frame_size
        self.busy_poll_micros = busy_poll_micros
        self._local = threading.local()
        self._all: weakref.WeakSet[BlockingConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    def connection(self, addr: str) -> BlockingConnection:
        """This thread's connection to ``addr`` (made on first use, connected on first request).

        Raises RemotingConnectError once the pool is closed.
        """
        if self._closed:
            raise RemotingConnectError(f"{addr}: the client is closed")
        table: dict[str, BlockingConnection] | None = getattr(self._local, "table", None)
        if table is None:
            table = self._local.table = {}
        conn = table.get(addr)
        if conn is None:
            conn = BlockingConnection(
                addr,
                connect_timeout=self.connect_timeout,
                max_frame_size=self.max_frame_size,
                busy_poll_micros=self.busy_poll_micros,
            )
            table[addr] = conn
            with self._lock:
                self._all.add(conn)
        return conn

    def close(self) -> None:
        """Close every thread's connections; later requests are refused."""
        with self._lock:
            self._closed = True
            conns = list(self._all)
        for conn in conns:
            conn.close()
