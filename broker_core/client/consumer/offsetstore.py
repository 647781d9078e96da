"""Consumer offset stores: where a consumer keeps, per queue, the next offset to consume.

RocketMQ's two ``OffsetStore`` kinds:

- ``RemoteBrokerOffsetStore`` (clustering): the group's offsets live on the broker that
  holds the queue (its master), read with QUERY_CONSUMER_OFFSET (14) and committed with
  UPDATE_CONSUMER_OFFSET (15).  Consumers of a group share them, so a queue handed to
  another consumer by a rebalance continues where the last one stopped.
- ``LocalFileOffsetStore`` (broadcasting): every consumer reads every queue, so each keeps
  its own offsets in a file, ``<store_dir>/<client id>/<group>/offsets.json`` with
  ``store_dir`` defaulting to ``~/.rocketmq_offsets`` as in RocketMQ.

Both hold an in-memory table the consumer updates as it goes (``update``) and commit it
with ``persist_all`` (every 5 s and at shutdown); only queues whose offset changed since
the last commit are written.  An offset is the *next* offset to consume; -1 means "none
yet" (the broker's QUERY_NOT_FOUND, or a queue missing from the file), so the consumer
decides where a new group starts.

The local file is fastjson's form of RocketMQ's ``OffsetSerializeWrapper``, so a Java
client's file reads back here and ours there::

    {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:42, ...}}

It is written atomically: the new content goes to ``offsets.json.tmp`` (fsync'd), the
previous file is kept as ``offsets.json.bak``, then the temp file is renamed over the
original and the directory fsync'd.  At start a missing or unreadable ``offsets.json``
falls back to the ``.bak``; when neither can be read the store raises ``OffsetFileError``
naming the file, rather than starting silently from scratch.

Thread-safety: the tables are guarded by a lock, so ``update`` and ``read`` (memory) may
be called from any thread; the remote calls run on the client instance's loop.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from broker_core.client.requests import refused
from broker_core.errors import ClientError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting import fastjson
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import QueryConsumerOffsetRequestHeader, UpdateConsumerOffsetRequestHeader

if TYPE_CHECKING:
    from broker_core.client.instance import ClientInstance

log = logging.getLogger(__name__)

Offset = int
NO_OFFSET: Offset = -1
LOCAL_OFFSET_STORE_DIR_ENV = "ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR"
OFFSETS_FILE_NAME = "offsets.json"


def default_local_offset_store_dir() -> Path:
    """RocketMQ's ``rocketmq.client.localOffsetStoreDir``: ``~/.rocketmq_offsets`` unless set."""
    configured = os.environ.get(LOCAL_OFFSET_STORE_DIR_ENV)
    return Path(configured) if configured else Path.home() / ".rocketmq_offsets"


class ReadOffsetType(enum.Enum):
    """Where ``read`` looks (RocketMQ's enum of that name)."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetFileError(ClientError):
    """A local offset file (and its backup) cannot be read or written; the message names it."""


class OffsetStore(Protocol):
    """What consumers need of an offset store."""

    async def load(self) -> None:
        """Read what the store already holds (the local file); nothing for the broker."""
        ...

    def update(self, mq: MessageQueue, offset: Offset, increase_only: bool = False) -> None:
        """Set the in-memory offset of ``mq``; with ``increase_only`` never move it back."""
        ...

    async def read(self, mq: MessageQueue, where: ReadOffsetType) -> Offset:
        """The offset of ``mq``, or -1 when there is none."""
        ...

    async def persist_all(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Commit the offsets that changed (of ``mqs``, or all)."""
        ...

    async def persist(self, mq: MessageQueue) -> None:
        """Commit the offset of ``mq`` now."""
        ...

    def remove(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (no longer assigned to this consumer)."""
        ...

    def offsets(self) -> dict[MessageQueue, Offset]:
        """A copy of the in-memory table."""
        ...


class _OffsetTable:
    """The in-memory table and which entries changed since the last commit."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offsets: dict[MessageQueue, Offset] = {}
        self._committed: dict[MessageQueue, Offset] = {}

    def update(self, mq: MessageQueue, offset: Offset, increase_only: bool = False) -> None:
        with self._lock:
            current = self._offsets.get(mq)
            if current is None or not increase_only or offset > current:
                self._offsets[mq] = offset

    def get(self, mq: MessageQueue) -> Offset | None:
        with self._lock:
            return self._offsets.get(mq)

    def changed(self, mqs: Iterable[MessageQueue] | None) -> dict[MessageQueue, Offset]:
        """Entries (of ``mqs``, or all) not committed at their current value."""
        with self._lock:
            wanted = (
                self._offsets if mqs is None else {mq: self._offsets[mq] for mq in mqs if mq in self._offsets}
            )
            return {mq: o for mq, o in wanted.items() if o >= 0 and self._committed.get(mq) != o}

    def mark_committed(self, mq: MessageQueue, offset: Offset) -> None:
        with self._lock:
            self._committed[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        with self._lock:
            self._offsets.pop(mq, None)
            self._committed.pop(mq, None)

    def snapshot(self) -> dict[MessageQueue, Offset]:
        with self._lock:
            return dict(self._offsets)


class RemoteBrokerOffsetStore:
    """Clustering offsets, kept by the master broker of each queue for ``group``."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self._table = _OffsetTable()

    async def load(self) -> None:
        """Nothing to load: the broker is asked queue by queue."""

    def update(self, mq: MessageQueue, offset: Offset, increase_only: bool = False) -> None:
        self._table.update(mq, offset, increase_only)

    async def read(self, mq: MessageQueue, where: ReadOffsetType) -> Offset:
        """From memory, from the broker (cached on success), or memory then broker.

        Raises NoRouteError when the queue's broker has no master, BrokerRefusedError when
        it refuses, RemotingError when it cannot be reached.
        """
        if where is not ReadOffsetType.READ_FROM_STORE:
            cached = self._table.get(mq)
            if cached is not None or where is ReadOffsetType.READ_FROM_MEMORY:
                return NO_OFFSET if cached is None else cached
        offset = await self.fetch_from_broker(mq)
        if offset >= 0:
            self._table.update(mq, offset)
            self._table.mark_committed(mq, offset)
        return offset

    async def fetch_from_broker(self, mq: MessageQueue) -> Offset:
        """QUERY_CONSUMER_OFFSET: the broker's offset for the group, -1 on QUERY_NOT_FOUND."""
        addr = await self._master(mq)
        header = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id)
        response, answer = await self.instance.requests.query_consumer_offset(addr, header)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return NO_OFFSET
        if response.code != ResponseCode.SUCCESS:
            raise refused(addr, f"the offset query of {self.group!r} for {mq}", response)
        return answer.offset

    async def persist_all(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Commit every changed offset; a queue that fails is logged and retried next time."""
        for mq, offset in self._table.changed(mqs).items():
            try:
                await self._commit(mq, offset)
            except (ClientError, RemotingError) as exc:
                log.warning("committing offset %d of %s for %s failed: %s", offset, mq, self.group, exc)

    async def persist(self, mq: MessageQueue) -> None:
        """Commit ``mq``'s offset now; errors are raised."""
        offset = self._table.get(mq)
        if offset is not None and offset >= 0:
            await self._commit(mq, offset)

    async def _commit(self, mq: MessageQueue, offset: Offset) -> None:
        addr = await self._master(mq)
        header = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, offset)
        try:
            response = await self.instance.requests.update_consumer_offset(addr, header)
        except RemotingError:
            # The broker may be gone (a master down): read the route again, and if it names
            # another broker of the set now (its slave), commit there.
            await self.instance.update_route(mq.topic)
            retry = await self._master(mq)
            if retry == addr:
                raise
            addr = retry
            response = await self.instance.requests.update_consumer_offset(addr, header)
        if response.code != ResponseCode.SUCCESS:
            raise refused(addr, f"the offset commit of {self.group!r} for {mq}", response)
        self._table.mark_committed(mq, offset)

    async def _master(self, mq: MessageQueue) -> str:
        """The queue's master, or while it is down the slave (which keeps what is
        committed there until the master is back and takes the consumer's offsets again)."""
        return await self.instance.find_broker(mq.broker_name, mq.topic)

    def remove(self, mq: MessageQueue) -> None:
        self._table.remove(mq)

    def offsets(self) -> dict[MessageQueue, Offset]:
        return self._table.snapshot()


class LocalFileOffsetStore:
    """Broadcasting offsets of ``group`` for ``client_id``, kept in a local JSON file."""

    def __init__(self, client_id: str, group: str, store_dir: str | os.PathLike[str] | None = None) -> None:
        self.group = group
        base = Path(store_dir) if store_dir is not None else default_local_offset_store_dir()
        self.path = base / client_id / group / OFFSETS_FILE_NAME
        self._table = _OffsetTable()
        self._write_lock = threading.Lock()

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    async def load(self) -> None:
        """Read the file (or its backup) into memory.  Raises OffsetFileError when unreadable."""
        for mq, offset in self.read_file().items():
            self._table.update(mq, offset)
            self._table.mark_committed(mq, offset)

    def read_file(self) -> dict[MessageQueue, Offset]:
        """The offsets on disk: the file, else its backup; {} when neither exists.

        Raises OffsetFileError when what exists cannot be parsed.
        """
        problems = []
        for path in (self.path, self.backup_path):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                problems.append(f"{path}: {exc}")
                continue
            try:
                table = parse_offsets(data)
            except ValueError as exc:
                problems.append(f"{path}: {exc}")
                log.warning("local offset file %s is unreadable (%s); trying its backup", path, exc)
                continue
            if path == self.backup_path:
                log.warning("local offsets of %s read from the backup %s", self.group, path)
            return table
        if problems:
            raise OffsetFileError(
                f"cannot read the local offsets of group {self.group!r}: " + "; ".join(problems)
            )
        return {}

    def update(self, mq: MessageQueue, offset: Offset, increase_only: bool = False) -> None:
        self._table.update(mq, offset, increase_only)

    async def read(self, mq: MessageQueue, where: ReadOffsetType) -> Offset:
        if where is not ReadOffsetType.READ_FROM_STORE:
            cached = self._table.get(mq)
            if cached is not None or where is ReadOffsetType.READ_FROM_MEMORY:
                return NO_OFFSET if cached is None else cached
        offset = self.read_file().get(mq, NO_OFFSET)
        if offset >= 0:
            self._table.update(mq, offset)
            self._table.mark_committed(mq, offset)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Write the whole table when an offset (of ``mqs``, or any) changed."""
        if self._table.changed(mqs):
            self.write_file()

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    def write_file(self) -> None:
        """Write every offset atomically (temp + fsync + rename), keeping the previous as .bak.

        Raises OffsetFileError when the directory or file cannot be written.
        """
        with self._write_lock:
            table = {mq: o for mq, o in self._table.snapshot().items() if o >= 0}
            try:
                write_atomically(self.path, format_offsets(table), self.backup_path)
            except OSError as exc:
                raise OffsetFileError(f"cannot write the local offsets to {self.path}: {exc}") from exc
            for mq, offset in table.items():
                self._table.mark_committed(mq, offset)

    def remove(self, mq: MessageQueue) -> None:
        self._table.remove(mq)

    def offsets(self) -> dict[MessageQueue, Offset]:
        return self._table.snapshot()


def topic_offsets(store: OffsetStore | None, topic: str) -> dict[MessageQueue, Offset]:
    """The offsets ``store`` holds for ``topic``'s queues, or for every queue when ``topic``
    is blank (RocketMQ's ``cloneOffsetTable``); nothing before the consumer started."""
    if store is None:
        return {}
    table = store.offsets()
    if not topic.strip():
        return table
    return {mq: offset for mq, offset in table.items() if mq.topic == topic}


def format_offsets(table: dict[MessageQueue, Offset]) -> bytes:
    """RocketMQ's OffsetSerializeWrapper in fastjson's dialect (queue objects as keys)."""
    return fastjson.dumps({"offsetTable": dict(sorted(table.items()))})


def parse_offsets(data: bytes) -> dict[MessageQueue, Offset]:
    """The table of an offsets file.  Raises ValueError when it is not one."""
    try:
        obj = fastjson.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    table = obj.get("offsetTable") if isinstance(obj, dict) else None
    if not isinstance(table, dict):
        raise ValueError("no offsetTable object")
    offsets = {}
    for mq, offset in table.items():
        if not isinstance(mq, MessageQueue):
            raise ValueError(f"key {mq!r} is not a message queue")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ValueError(f"offset {offset!r} of {mq} is not an integer")
        offsets[mq] = offset
    return offsets


def write_atomically(path: Path, data: bytes, backup: Path | None = None) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new content, never half.

    The previous content, when there is one, is first copied to ``backup`` the same way.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if backup is not None:
        with contextlib.suppress(FileNotFoundError):
            _replace_with(backup, path.read_bytes())
    _replace_with(path, data)


def _replace_with(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


__all__ = [
    "LocalFileOffsetStore",
    "NO_OFFSET",
    "OffsetFileError",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "default_local_offset_store_dir",
]
