"""The master's side of replication: the HA listener, a link per slave, and SYNC_MASTER waits.

Each slave link has two threads.  The reader takes the slave's reports: the first says where
to start (a slave with nothing starts at this master's oldest file), each later one
acknowledges what the slave holds and releases the sends waiting for it.  The writer sends
the log from there in frames of up to ``haTransferBatchSize`` bytes, read from the mapped
segments, and a heartbeat frame when it has had nothing to send for
``haSendHeartbeatInterval``; it wakes as soon as anything is appended (``notify``).

A slave that reports more than this master holds has bytes this master lost (say, a master
that crashed with part of its log only in its page cache): the link is refused and the
problem recorded, never spliced.  So is a slave whose log ends before this master's oldest
file: the bytes in between are gone.

SYNC_MASTER (``wait_replicated``): a send's future is resolved once any slave has
acknowledged its end offset; one report releases every send it covers (group commit).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections import deque
from collections.abc import Callable

from broker_core.clock import wall_clock_ms
from broker_core.ha.protocol import REPORT, TRANSFER_HEADER, LinkClosed, recv_exact
from broker_core.model.hastatus import MasterHAStatus, SlaveLinkStatus
from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

_ACCEPT_POLL_SECONDS = 0.5
_PROBLEMS_KEPT = 10


class HAMaster:
    """Serves the commit log to slaves on the HA port."""

    def __init__(
        self,
        store: MessageStore,
        host: str,
        port: int,
        *,
        transfer_batch_size: int,
        heartbeat_interval_ms: int,
        housekeeping_interval_ms: int,
        max_gap_not_in_sync: int,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        self.host = host
        self._port = port
        self.transfer_batch_size = transfer_batch_size
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.housekeeping_ms = housekeeping_interval_ms
        self.max_gap = max_gap_not_in_sync
        self.clock_ms = clock_ms
        self.links: list[_SlaveLink] = []
        self.problems: deque[str] = deque(maxlen=_PROBLEMS_KEPT)
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        # Sends waiting for a slave: (end offset, future, its loop), oldest first.
        self._waiters: list[tuple[int, asyncio.Future[bool], asyncio.AbstractEventLoop]] = []
        self.acked_offset = 0

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        listener = socket.create_server((self.host, self._port), reuse_port=False)
        listener.settimeout(_ACCEPT_POLL_SECONDS)
        self._listener = listener
        self._port = listener.getsockname()[1]
        self._accepting = threading.Thread(target=self._accept_loop, name="ha-accept", daemon=True)
        self._accepting.start()
        log.info("HA: taking slaves on %s", self.addr)

    @property
    def port(self) -> int:
        return self._port

    @property
    def addr(self) -> str:
        return f"{self.host}:{self._port}"

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            try:  # wakes the accepting thread now, not at its next housekeeping tick
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._accepting is not None:
            self._accepting.join()
        if self._listener is not None:
            self._listener.close()
        for link in list(self.links):
            link.close()
            link.join()
        self._release_all()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                self._housekeeping()
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                raise
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = _SlaveLink(self, sock, f"{peer[0]}:{peer[1]}")
            with self._lock:
                self.links.append(link)
            link.start()
            log.info("HA: slave %s connected", link.addr)

    def _housekeeping(self) -> None:
        """Close links whose slave has been silent for haHousekeepingInterval."""
        now = self.clock_ms()
        for link in list(self.links):
            if now - link.last_report_ms > self.housekeeping_ms:
                log.warning(
                    "HA: slave %s silent for %d ms, closing its link", link.addr, now - link.last_report_ms
                )
                link.close()

    def _forget(self, link: _SlaveLink) -> None:
        with self._lock:
            if link in self.links:
                self.links.remove(link)

    def refuse(self, link: _SlaveLink, problem: str) -> None:
        """Record why ``link`` is refused, and close it."""
        log.error("HA: slave %s refused: %s", link.addr, problem)
        self.problems.append(f"{link.addr}: {problem}")
        link.close()

    # -- appends and acknowledgements ---------------------------------------------------

    def notify(self) -> None:
        """Something was appended: wake every link's writer."""
        for link in self.links:
            link.wake.set()

    def slave_ok(self) -> bool:
        """Whether a slave is connected and within haMaxGapNotInSync of the log's end
        (RocketMQ's ``isSlaveOK``): only then does a SYNC_MASTER send wait for it."""
        end = self.store.commit_log.max_offset
        return any(link.started and end - link.acked_offset < self.max_gap for link in self.links)

    def wait_replicated(self, end: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bool]:
        """A future on ``loop`` that becomes True once a slave holds the log up to ``end``
        (False when this master stops first)."""
        future: asyncio.Future[bool] = loop.create_future()
        with self._lock:
            if self.acked_offset >= end:
                future.set_result(True)
            else:
                self._waiters.append((end, future, loop))
        return future

    def acknowledged(self, offset: int) -> None:
        """A slave holds the log up to ``offset``: release the sends it covers."""
        with self._lock:
            if offset <= self.acked_offset:
                return
            self.acked_offset = offset
            if not self._waiters:
                return
            done = [w for w in self._waiters if w[0] <= offset]
            if not done:
                return
            self._waiters = [w for w in self._waiters if w[0] > offset]
        _resolve(done, True)

    def _release_all(self) -> None:
        """Stopping: every waiting send learns that no slave confirmed it."""
        with self._lock:
            waiting, self._waiters = self._waiters, []
        _resolve(waiting, False)

    # -- status ------------------------------------------------------------------------

    def _age_at(self, offset: int, now: int) -> int:
        """How long ago the first record at or after ``offset`` (a record start, or a
        segment's blank tail) was stored: how far behind a slave holding up to it is."""
        commit_log = self.store.commit_log
        stored = commit_log.store_timestamp_at(offset)
        if stored < 0:  # a blank tail: the next segment's first record
            size = commit_log.file_size
            stored = commit_log.store_timestamp_at(offset - offset % size + size)
        return max(0, now - stored) if stored > 0 else 0

    def status(self) -> MasterHAStatus:
        store = self.store
        end = store.commit_log.max_offset
        now = self.clock_ms()
        slaves = []
        for link in list(self.links):
            if not link.started:
                continue
            behind = max(0, end - link.acked_offset)
            behind_ms = 0
            if behind:
                behind_ms = self._age_at(link.acked_offset, now)
            slaves.append(
                SlaveLinkStatus(
                    addr=link.addr,
                    acked_offset=link.acked_offset,
                    behind_bytes=behind,
                    behind_ms=behind_ms,
                    in_sync=behind < self.max_gap,
                    connected_ms=link.connected_ms,
                    last_report_ms=link.last_report_ms,
                )
            )
        return MasterHAStatus(self.addr, end, slaves, list(self.problems))


def _resolve(waiters: list[tuple[int, asyncio.Future[bool], asyncio.AbstractEventLoop]], ok: bool) -> None:
    """Resolve each future on its own loop, with one callback per loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[bool]]] = {}
    for _end, future, loop in waiters:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():
        try:
            loop.call_soon_threadsafe(_set_all, futures, ok)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass


def _set_all(futures: list[asyncio.Future[bool]], ok: bool) -> None:
    for future in futures:
        if not future.done():
            future.set_result(ok)


def _send_frame(sock: socket.socket, header: bytes, chunk: bytes) -> None:
    """Header and chunk in one system call when the socket takes it all (it nearly always
    does), the rest after."""
    sent = sock.sendmsg([header, chunk])
    if sent < len(header):
        sock.sendall(header[sent:])
        sent = len(header)
    if sent - len(header) < len(chunk):
        sock.sendall(memoryview(chunk)[sent - len(header) :])


class _SlaveLink:
    """One connected slave: its reports in, the log out."""

    def __init__(self, master: HAMaster, sock: socket.socket, addr: str) -> None:
        self.master = master
        self.sock = sock
        self.addr = addr
        self.wake = threading.Event()
        self.acked_offset = 0
        self.connected_ms = master.clock_ms()
        self.last_report_ms = self.connected_ms
        # Where the writer sends from; None until the slave's first report.
        self.next_offset: int | None = None
        self.started = False
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for name, target in (("reader", self._read_reports), ("writer", self._write_log)):
            thread = threading.Thread(target=target, name=f"ha-{name}-{self.addr}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self.wake.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.master._forget(self)

    def join(self) -> None:
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join()

    # -- reports in ----------------------------------------------------------------------

    def _read_reports(self) -> None:
        buf = bytearray(REPORT.size)
        view = memoryview(buf)
        try:
            while not self._closed.is_set():
                recv_exact(self.sock, view)
                (offset,) = REPORT.unpack(buf)
                self.last_report_ms = self.master.clock_ms()
                if self.next_offset is None and not self._first_report(offset):
                    return
                self.acked_offset = offset
                self.master.acknowledged(offset)
        except (LinkClosed, OSError) as exc:
            if not self._closed.is_set():
                log.info("HA: slave %s disconnected: %s", self.addr, exc)
        finally:
            self.close()

    def _first_report(self, offset: int) -> bool:
        """Decide where to start from the slave's first report; False when it is refused."""
        commit_log = self.master.store.commit_log
        end, oldest = commit_log.max_offset, commit_log.min_offset
        if offset > end:
            self.master.refuse(
                self,
                f"it holds the log up to {offset}, past this master's end {end}: the bytes after "
                f"{end} are not this master's (lost by a crash?); they are not spliced. Move the "
                "slave's store aside and let it copy again, or restore the master's log",
            )
            return False
        if offset == 0 and commit_log.queue.last is None:
            start = 0
        elif offset == 0:
            start = oldest  # a new slave copies everything this master still holds
        elif offset < oldest:
            self.master.refuse(
                self,
                f"its log ends at {offset}, before this master's oldest file at {oldest}: the "
                "bytes in between are deleted here. Move the slave's store aside and let it copy again",
            )
            return False
        else:
            start = offset
        self.next_offset = start
        self.started = True
        self.wake.set()
        log.info("HA: slave %s holds %d, sending from %d", self.addr, offset, start)
        return True

    # -- the log out ---------------------------------------------------------------------

    def _write_log(self) -> None:
        master = self.master
        store = master.store
        batch = master.transfer_batch_size
        heartbeat = master.heartbeat_s
        sock = self.sock
        try:
            while not self._closed.is_set():
                offset = self.next_offset
                if offset is None:
                    self.wake.wait(heartbeat)
                    self.wake.clear()
                    continue
                self.wake.clear()
                chunk = store.replica_chunk(offset, batch)
                if chunk is None:
                    master.refuse(
                        self, f"offset {offset} is no longer in this master's log (deleted by expiry)"
                    )
                    return
                if not chunk:
                    if not self.wake.wait(heartbeat):
                        sock.sendall(TRANSFER_HEADER.pack(offset, 0))
                    continue
                _send_frame(sock, TRANSFER_HEADER.pack(offset, len(chunk)), chunk)
                self.next_offset = offset + len(chunk)
        except OSError as exc:
            if not self._closed.is_set():
                log.info("HA: sending to slave %s failed: %s", self.addr, exc)
        finally:
            self.close()
