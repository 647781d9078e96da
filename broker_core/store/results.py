"""Result values of store operations: expected outcomes are statuses, not exceptions."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import Future


class PutMessageStatus(enum.Enum):
    """Outcome of an append (RocketMQ ``PutMessageStatus``)."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    # SYNC_MASTER: stored here, but no slave confirmed it in time / no slave to wait for.
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    DISK_FULL = "DISK_FULL"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def ok(self) -> bool:
        """True when the message is stored (the timeouts store it, undurably or unreplicated)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


class GetMessageStatus(enum.Enum):
    """Outcome of a read by queue offset (RocketMQ ``GetMessageStatus``)."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"

    @property
    def offset_moved(self) -> bool:
        """True when the consumer's offset is outside the queue and must be corrected."""
        return self in (
            GetMessageStatus.OFFSET_TOO_SMALL,
            GetMessageStatus.OFFSET_OVERFLOW_BADLY,
        )

    @property
    def no_new_message(self) -> bool:
        """True when the caller is at (or, for an empty queue, before) the end: wait."""
        return self in (
            GetMessageStatus.OFFSET_OVERFLOW_ONE,
            GetMessageStatus.NO_MESSAGE_IN_QUEUE,
            GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
            GetMessageStatus.OFFSET_FOUND_NULL,
        )


@dataclass(slots=True)
class PutMessageResult:
    """What an append did: where the message went, or why it was refused.

    ``remark`` is a human-readable reason on refusal.  For a batch, ``msg_count`` is the
    number of records, ``queue_offset`` the first one's and ``record_offsets`` each
    record's commit-log offset.  ``flush_future`` is set by ``MessageStore.append`` under
    SYNC_FLUSH: it resolves to True once the records are on disk (``put_message`` waits on
    it for you); ``async_flush`` and ``async_replica`` are what an asyncio caller waits on
    (``MessageStore.wait_flushed_async``): the disk, and under SYNC_MASTER a slave.
    msgIds are made on demand: most callers never read them.
    """

    status: PutMessageStatus
    remark: str = ""
    wrote_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    store_timestamp: int = 0
    msg_count: int = 0
    record_offsets: tuple[int, ...] = ()
    store_host: bytes = b""
    flush_future: Future[bool] | None = None
    async_flush: asyncio.Future[bool] | None = None
    async_replica: asyncio.Future[bool] | None = None

    @property
    def ok(self) -> bool:
        return self.status.ok

    @property
    def msg_ids(self) -> list[str]:
        """Offset msgId of each stored record."""
        host = self.store_host
        return [(host + offset.to_bytes(8, "big")).hex().upper() for offset in self.record_offsets]

    @property
    def msg_id(self) -> str:
        """Offset msgId of the (first) record, or "" when nothing was stored."""
        ids = self.msg_ids
        return ids[0] if ids else ""


@dataclass(slots=True)
class GetMessageResult:
    """Records read from one consume queue, as stored (the bytes a pull response carries).

    ``next_begin_offset`` is where the caller should read next; ``min_offset`` and
    ``max_offset`` bound the queue at read time.
    """

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    # Whether the caller should try again from a replica (unused without HA).
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.messages)

    @property
    def buffer_total_size(self) -> int:
        return sum(map(len, self.messages))

    @property
    def body(self) -> bytes:
        """The records back to back: a FOUND pull response's body."""
        return b"".join(self.messages)
