"""The slave's side of replication: one link to its master, reconnected for as long as it runs.

The link's thread connects to the master's HA address (``haMasterAddress``, or the one the
nameserver returned to this slave's registration), reports the offset this slave's log ends
at, then appends every frame the master sends (``MessageStore.append_replica``) and reports
the new end after each.  With nothing arriving it still reports every
``haSendHeartbeatInterval``; a master silent for ``haHousekeepingInterval`` is given up
and dialled again.

Frames that do not continue this log (``ReplicaMismatch``) stop the link: the problem is
kept in the status and logged, and the link is tried again after a pause (the master may
have been restored meanwhile), never by splicing.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from broker_core.clock import wall_clock_ms
from broker_core.ha.protocol import (
    MAX_TRANSFER,
    REPORT,
    TRANSFER_HEADER,
    LinkClosed,
    parse_addr,
    recv_exact,
)
from broker_core.model.hastatus import SlaveHAStatus
from broker_core.store.replica import ReplicaMismatch
from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_SECONDS = 3.0
# Pause before dialling again: after a lost link, and after a refusal.
RECONNECT_SECONDS = 1.0
MISMATCH_RETRY_SECONDS = 10.0


class HASlave:
    """Copies a master's commit log into this slave's store."""

    def __init__(
        self,
        store: MessageStore,
        master_addr: Callable[[], str],
        *,
        heartbeat_interval_ms: int,
        housekeeping_interval_ms: int,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.store = store
        # Asked before each connection: the master's HA address, "" while not known.
        self.master_addr = master_addr
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.housekeeping_ms = housekeeping_interval_ms
        self.clock_ms = clock_ms
        self.connected_to = ""
        self.local_addr = ""
        self.received_bytes = 0
        self.last_frame_ms = 0
        self.problem = ""
        self._sock: socket.socket | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ha-slave", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join()

    def status(self) -> SlaveHAStatus:
        return SlaveHAStatus(
            master_ha_addr=self.connected_to or self.master_addr(),
            connected=bool(self.connected_to),
            max_offset=self.store.commit_log.max_offset,
            received_bytes=self.received_bytes,
            local_addr=self.local_addr if self.connected_to else "",
            last_frame_ms=self.last_frame_ms,
            problem=self.problem,
        )

    # -- the link ------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            addr = self.master_addr()
            if not addr:
                self._stopping.wait(RECONNECT_SECONDS)
                continue
            pause = RECONNECT_SECONDS
            try:
                self._copy_from(addr)
            except ReplicaMismatch as exc:
                self.problem = f"the master's log does not continue this one: {exc}"
                log.error("HA: %s; copying stops until it is resolved (retried every %.0f s)",
                          self.problem, MISMATCH_RETRY_SECONDS)  # fmt: skip
                pause = MISMATCH_RETRY_SECONDS
            except (OSError, LinkClosed, ValueError) as exc:
                if not self._stopping.is_set():
                    log.info("HA: link to master %s lost: %s", addr, exc)
            finally:
                self._close()
            self._stopping.wait(pause)

    def _copy_from(self, addr: str) -> None:
        sock = socket.create_connection(parse_addr(addr), timeout=CONNECT_TIMEOUT_SECONDS)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(self.heartbeat_s)
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.local_addr = f"{host}:{port}"
        if self._stopping.is_set():
            return
        store = self.store
        # First where this log ends (the master sends from there), then after each frame the
        # end of the whole records held (what is acknowledged, so a send is confirmed only
        # once its record is whole here).
        sock.sendall(REPORT.pack(store.commit_log.max_offset))
        self.connected_to = addr
        log.info("HA: copying from master %s from offset %d", addr, store.commit_log.max_offset)
        header = bytearray(TRANSFER_HEADER.size)
        header_view = memoryview(header)
        body = bytearray(1 << 20)
        last_heard = self.clock_ms()
        while not self._stopping.is_set():
            try:
                recv_exact(sock, header_view)
            except TimeoutError:
                if self.clock_ms() - last_heard > self.housekeeping_ms:
                    raise LinkClosed(f"nothing from the master for {self.housekeeping_ms} ms") from None
                self._report(sock)
                continue
            last_heard = self.last_frame_ms = self.clock_ms()
            offset, size = TRANSFER_HEADER.unpack(header)
            if not 0 <= size <= MAX_TRANSFER:
                raise ValueError(f"the master sent a frame of {size} bytes")
            if size == 0:
                continue  # a heartbeat
            if size > len(body):
                body = bytearray(size)
            view = memoryview(body)[:size]
            recv_exact(sock, view)
            store.append_replica(offset, view)
            self.received_bytes += size
            self.problem = ""
            self._report(sock)

    def _report(self, sock: socket.socket) -> None:
        sock.sendall(REPORT.pack(self.store.replica_held))

    def _close(self) -> None:
        self.connected_to = ""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
