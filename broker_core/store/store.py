"""The message store: one broker's commit log, consume queues, index and config files.

``MessageStore`` is the facade the broker uses (RocketMQ ``DefaultMessageStore``)::

    <root>/commitlog/<20-digit offset>      commit-log segments
    <root>/consumequeue/<topic>/<qid>/...   consume queues
    <root>/index/<yyyyMMddHHmmssSSS>        index files
    <root>/config/*.json                    consumer offsets, delay offsets (+ topics, groups)
    <root>/checkpoint                       how far derived files are durable
    <root>/abort                            present while the store is open

Opening after a crash (``abort`` still there) trims every derived file back to the
checkpoint, finds the end of the valid commit log, truncates a torn tail and re-dispatches
the records after the checkpoint.  Threads: the dispatcher, the commit-log flusher and
the logics flusher (consume queues, index, checkpoint, disk check); appends and reads
may come from any thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from broker_core.clock import wall_clock_ms
from broker_core.config import StoreConfig
from broker_core.errors import MessageIllegalError, StoreClosedError
from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    DispatchRequest,
    MessageBatchInner,
    MessageExt,
    MessageInner,
    RecordFormatError,
    decode_message_id,
    decode_record,
    encode_host,
)
from broker_core.store.checkpoint import Checkpoint, StoreCheckpoint
from broker_core.store.cleanup import ExpiryReport, decide_expiry, disk_used_ratio, tally_deletions
from broker_core.store.commitlog import CommitLog, DiskFullError
from broker_core.store.consumequeue import BLANK_ENTRY_SIZE, ConsumeQueueStore
from broker_core.store.damage import DamagedRange, DamageLog
from broker_core.store.deadlines import Deadlines
from broker_core.store.dispatcher import ArrivalListener, Dispatcher
from broker_core.store.flush import FlushCommitLogService, PeriodicService
from broker_core.store.geometry import GEOMETRY_FILE, StoreGeometry, resolve_geometry, write_geometry
from broker_core.store.indexfile import IndexService
from broker_core.store.offsets import ConsumerOffsetManager
from broker_core.store.replica import ReplicaMismatch, ReplicaWriter
from broker_core.store.results import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus
from broker_core.store.schedule import ScheduleMessageService, apply_delay
from broker_core.store.timer import TIMER_PROPERTY_NAMES, TimerMessageService, apply_timer
from broker_core.topics import SCHEDULE_TOPIC, TIMER_TOPIC, topic_problem

log = logging.getLogger(__name__)

MAX_QUEUE_ID = 1023
SPACE_PROBE = ".space-probe"  # RocketMQ caps a topic at 1024 queues
# Pulls with a tag filter scan at most this many entries before answering (RocketMQ).
MAX_FILTER_MESSAGE_COUNT = 16_000
# Records a pull reads and hands to a record filter (SQL92) at most: each is read from the
# commit log and its properties decoded on the loop, so one pull stays a few ms; a pull
# that found none there answers with the offset it reached and the consumer goes on.
MAX_RECORD_FILTER_COUNT = 1_024
_NO_WAIT = {PROPERTY_WAIT_STORE_MSG_OK: "false"}  # how put_delivered's appends are waited for
# With a tag filter, consume-queue entries are read this many at a time.
READ_CHUNK_ENTRIES = 256
# A key query walks at most this many index entries sharing the key's hash.
MAX_KEY_QUERY_SCAN = 65_536


class Replication(Protocol):
    """What the store needs of a master's replication (``broker_core.ha.master.HAMaster``)."""

    def notify(self) -> None:
        """Something was appended."""

    def slave_ok(self) -> bool:
        """A slave is connected and close enough to wait for."""

    def wait_replicated(self, end: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bool]:
        """A future that becomes True once a slave holds the log up to ``end``."""


class MessageStore:
    """Facade over the store's files and threads.  ``open()`` before use, ``close()`` after."""

    def __init__(
        self,
        config: StoreConfig,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        topic_queue_nums: Callable[[str], int | None] | None = None,
        adopt_geometry: bool = False,
        replica: bool = False,
    ) -> None:
        # The store's recorded geometry wins over the config: a config that disagrees is
        # refused (StoreGeometryError), or with ``adopt_geometry`` (tools) replaced by it.
        config, self.geometry = resolve_geometry(config, adopt=adopt_geometry)
        self.config = config
        self.root = config.root
        self.clock_ms = clock_ms
        # The broker's view of how many write queues a topic has (None: not known here).
        self.topic_queue_nums = topic_queue_nums
        self.store_host = encode_host(config.store_host)
        self.commit_log = CommitLog(
            self.root / "commitlog",
            config.mapped_file_size_commit_log,
            store_host=self.store_host,
            max_message_size=config.max_message_size,
            clock_ms=clock_ms,
            preallocate=config.warm_mapped_file_enable,
            write_through=config.flush_disk_type == "SYNC_FLUSH",
        )
        self.consume_queues = ConsumeQueueStore(
            self.root / "consumequeue", config.mapped_file_size_consume_queue
        )
        self.index: IndexService | None = (
            IndexService(
                self.root / "index",
                config.max_hash_slot_num,
                config.max_index_num,
                clock_ms=clock_ms,
                on_no_space=self._note_disk_full,
            )
            if config.message_index_enable
            else None
        )
        self.dispatcher = Dispatcher(
            self.commit_log,
            self.consume_queues,
            self.index,
            config.delay_levels_ms,
            on_disk_full=self._note_disk_full,
        )
        self.consumer_offsets = ConsumerOffsetManager(self.root, clock=clock_ms)
        self.schedule = ScheduleMessageService(self.root, config.delay_levels_ms, self)
        # Timer messages (any delivery time); their progress is saved in delayOffset.json.
        self.timers = TimerMessageService(self, self.schedule.delivery_lock)
        self.schedule.timers = self.timers
        self._sync_flush = config.flush_disk_type == "SYNC_FLUSH"
        # syncFlushTimeout for asyncio waiters (disk, slave): one timer per loop, not per put.
        self._deadlines: Deadlines | None = None
        self.flush_service = FlushCommitLogService(
            self.commit_log.flush,
            sync=self._sync_flush,
            interval_ms=config.flush_interval_commit_log,
            housekeeping=self.commit_log.queue.prepare_next_if_due,
            sync_ranges=self.commit_log.queue.sync_ranges,
        )
        self.logics_flush = PeriodicService(
            "flush-logics", self._flush_logics, config.flush_interval_consume_queue
        )
        self.checkpoint: StoreCheckpoint | None = None
        self.open_problems: list[str] = []
        # Damaged commit-log ranges on record; what the last open changed in the files.
        self.damage = DamageLog(self.root)
        self.recovery_changes: list[str] = []
        self.recovered_abnormally = False
        self.disk_full_reason: str | None = None
        self._opened = False
        self._closed = False
        self._logics_lock = threading.Lock()
        self._valid_topics: set[str] = set()
        self._expiry_lock = threading.Lock()
        # A slave's store takes its master's bytes (``append_replica``) and nothing else:
        # sends are refused and delayed messages are the master's to deliver.
        self.is_replica = replica
        self._replica: ReplicaWriter | None = None
        # A master's replication (``broker_core.ha``): told of every append, and under
        # SYNC_MASTER (``sync_replication``) what an asyncio append waits on.
        self.replication: Replication | None = None
        self.sync_replication = False

    # -- lifecycle -------------------------------------------------------------------

    def open(self) -> MessageStore:
        """Load the files, recover from the last stop, and start the store's threads."""
        for sub in ("commitlog", "consumequeue", "index", "config"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        if self.geometry is None or not (self.root / GEOMETRY_FILE).exists():
            inferred, self.geometry = (
                self.geometry is not None,
                self.geometry or StoreGeometry.of(self.config),
            )
            try:
                write_geometry(self.root, self.geometry)
            except OSError as exc:
                if not inferred:
                    raise  # a new store that cannot record its geometry cannot start
                log.warning(
                    "cannot record the store's geometry yet (%s): it is inferred again next time", exc
                )
        abort = self.root / "abort"
        self.recovered_abnormally = abort.exists()
        (self.root / "commitlog" / SPACE_PROBE).unlink(missing_ok=True)  # left by a crash mid-probe
        self.checkpoint = StoreCheckpoint(self.root / "checkpoint")
        problems = self.commit_log.load() + self.consume_queues.load() + self.damage.load()
        if self.index is not None:
            self.index.load()
        self.consumer_offsets.load()
        self.schedule.load()
        self._recover(self.checkpoint.read())
        self.timers.rebuild()
        self.open_problems = problems
        for problem in problems:
            log.warning("store open: %s", problem)
        # A disk that filled while the store was down keeps it read-only from the first send.
        try:
            self.check_disk_space()
        except OSError as exc:
            log.warning("disk check failed: %s", exc)
        abort.write_bytes(b"")
        if self.is_replica:
            self._replica = ReplicaWriter(self.commit_log, self.config.delay_levels_ms)
        self.commit_log.queue.prepare_ahead()
        self.flush_service.flushed_offset = self.commit_log.max_offset
        self.dispatcher.start()
        self.flush_service.start()
        self.logics_flush.start()
        self._opened = True
        return self

    def _recover(self, cp: Checkpoint | None) -> None:
        commit_min = self.commit_log.min_offset
        commit_max = self.commit_log.max_offset
        if cp is None or not commit_min <= cp.logics_offset <= commit_max or cp.index_offset > commit_max:
            if self.commit_log.queue.files:
                log.warning(
                    "no usable checkpoint: rebuilding consume queues and index from the whole commit log"
                )
            cutoff = commit_min
        else:
            # Under ASYNC_FLUSH the dispatcher may have been ahead of the disk: only what the
            # checkpoint saw flushed is known to have survived a power loss.
            cutoff = min(cp.logics_offset, cp.index_offset, cp.physic_offset)
        # Everything derived past the cutoff may be partial: trim it and dispatch again.
        self.consume_queues.recover()
        if not self._consume_queues_present():
            cutoff = commit_min
        if self.index is not None and self.index.rebuild_from is not None:
            # An index file was set aside as unreadable: index its records again.
            cutoff = max(commit_min, min(cutoff, self.index.rebuild_from))
        self.consume_queues.truncate_dirty(cutoff)
        if self.index is not None:
            self.index.truncate(cutoff)
        dispatch = self.dispatcher.dispatch_request
        disagreement = self.dispatcher.entry_disagreement
        observe = self.schedule.observe
        observe_timer = self.timers.observe
        mismatched: list[DamagedRange] = []

        def on_record(req: DispatchRequest) -> None:
            why = disagreement(req)
            if why is not None:
                end = req.commit_log_offset + req.msg_size
                mismatched.append(DamagedRange(req.commit_log_offset, end, f"record: {why}", self.clock_ms()))
                return
            dispatch(req)
            observe(req.topic, req.properties, req.commit_log_offset)
            observe_timer(req.properties)

        started = time.monotonic()
        end = self.commit_log.recover(cutoff, on_record)
        self.record_damage([*self.commit_log.damaged_found, *mismatched])
        if self.commit_log.torn_tail_at is not None:
            self.recovery_changes.append(f"cut a torn tail after commit-log offset {end}")
        self.consume_queues.truncate_dirty(end)
        if self.index is not None:
            self.index.truncate(end)
        self.dispatcher.dispatched_offset = end
        self.commit_log.topic_queue_table = self.consume_queues.max_offset_table()
        for cq in self.consume_queues:
            cq.correct_min_offset(self.commit_log.min_offset)
        log.info(
            "store recovered: commit log [%d, %d), re-dispatched from %d in %.2fs (%s stop)",
            self.commit_log.min_offset,
            end,
            cutoff,
            time.monotonic() - started,
            "unclean" if self.recovered_abnormally else "clean",
        )

    def record_damage(self, found: list[DamagedRange]) -> None:
        """Record ranges recovery skipped; each new one is logged at ERROR, once."""
        for damaged in self.damage.add(found):
            log.error(
                "commit log: damaged range %s skipped; the records after it are kept, "
                "the message(s) inside it are lost",
                damaged.describe(),
            )
            self.recovery_changes.append(f"skipped and recorded damaged range {damaged.describe()}")

    def _consume_queues_present(self) -> bool:
        """False when the commit log has records but no consume queue exists (deleted)."""
        return self.commit_log.max_offset <= self.commit_log.min_offset or any(
            True for _ in self.consume_queues
        )

    def close(self) -> None:
        """Finish dispatching, flush everything, write the checkpoint and mark a clean stop."""
        if self._closed or not self._opened:
            self._closed = True
            return
        self._closed = True
        self.dispatcher.stop()
        self.flush_service.stop()
        self.logics_flush.stop(run_last=True)
        self.commit_log.close()
        self.consume_queues.close()
        if self.index is not None:
            self.index.close()
        self.consumer_offsets.try_persist()  # a full disk keeps the last file: logged, not raised
        if self.checkpoint is not None:
            self.checkpoint.close()
        (self.root / "abort").unlink(missing_ok=True)

    def __enter__(self) -> MessageStore:
        return self.open() if not self._opened else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes ----------------------------------------------------------------------

    def _queue_refusal(self, topic: str, queue_id: int) -> PutMessageResult | None:
        """Why nothing can be stored in ``topic``/``queue_id`` now; None when it can."""
        if self._closed:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, "the store is shut down")
        if self.is_replica:
            return PutMessageResult(
                PutMessageStatus.SERVICE_NOT_AVAILABLE,
                "this broker is a slave: it stores what its master replicates, send to the master",
            )
        if self.disk_full_reason is not None and not self._retry_after_disk_full():
            return PutMessageResult(
                PutMessageStatus.DISK_FULL,
                f"the store is read-only: {self.disk_full_reason}; writes resume when space returns",
            )
        if topic not in self._valid_topics:
            problem = topic_problem(topic)
            if problem is not None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, problem)
            if len(self._valid_topics) < 100_000:
                self._valid_topics.add(topic)
        if not 0 <= queue_id <= MAX_QUEUE_ID:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL, f"queue id {queue_id} is out of range 0..{MAX_QUEUE_ID}"
            )
        if self.topic_queue_nums is not None:
            count = self.topic_queue_nums(topic)
            if count is not None and queue_id >= count:
                return PutMessageResult(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    f"queue {queue_id} does not exist: topic {topic} has {count} queue(s)",
                )
        return None

    def _refusal(self, msg: MessageInner) -> PutMessageResult | None:
        """Why ``msg`` cannot be stored, as a result; None when it can."""
        refusal = self._queue_refusal(msg.topic, msg.queue_id)
        if refusal is not None:
            return refusal
        if msg.topic == SCHEDULE_TOPIC:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                f"{SCHEDULE_TOPIC} is written by the store's delay levels only: "
                "set the DELAY property instead",
            )
        if msg.topic == TIMER_TOPIC:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                f"{TIMER_TOPIC} is written by the store's timer only: set TIMER_DELIVER_MS instead",
            )
        if not msg.body:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, "the message body is empty")
        if len(msg.body) > self.config.max_message_size:
            return PutMessageResult(
                PutMessageStatus.MESSAGE_ILLEGAL,
                f"the message body is {len(msg.body)} bytes; "
                f"maxMessageSize is {self.config.max_message_size}",
            )
        return None

    def append(self, msg: MessageInner, *, waiter: str = "thread") -> PutMessageResult:
        """Append without waiting for the disk.

        Under SYNC_FLUSH the result carries what to wait on: ``flush_future`` (a
        ``concurrent.futures.Future``) or, with ``waiter="async"`` inside a running event
        loop, ``async_flush`` (an asyncio future on that loop).
        """
        refusal = self._refusal(msg)
        props = msg.properties
        if refusal is None and (
            PROPERTY_DELAY_TIME_LEVEL in props or not TIMER_PROPERTY_NAMES.isdisjoint(props)
        ):
            refusal = self._hold_scheduled(msg)
        if refusal is not None:
            return refusal
        return self._do_append(self.commit_log.append, msg, msg.properties, waiter)

    def _hold_scheduled(self, msg: MessageInner) -> PutMessageResult | None:
        """Redirect a timer or delayed message to where it waits; a refusal when its time
        is bad or too far ahead."""
        if not TIMER_PROPERTY_NAMES.isdisjoint(msg.properties):
            problem = apply_timer(msg, self.clock_ms(), self.config.timer_max_delay_sec * 1000)
            if problem is not None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, problem)
        if PROPERTY_DELAY_TIME_LEVEL in msg.properties:
            apply_delay(msg, self.schedule.max_level)
        return None

    def append_batch(
        self, msgs: Sequence[MessageInner] | MessageBatchInner, *, waiter: str = "thread"
    ) -> PutMessageResult:
        """Append several messages atomically (all or none), without waiting for the disk.

        ``msgs`` is a list of messages, or a producer's encoded batch (``MessageBatchInner``),
        which the commit log stores item by item straight from its bytes.
        """
        if isinstance(msgs, MessageBatchInner):
            refusal = self._queue_refusal(msgs.topic, msgs.queue_id)
            if refusal is not None:
                return refusal
            return self._do_append(self.commit_log.append_encoded_batch, msgs, msgs.properties, waiter)
        if not msgs:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, "the batch is empty")
        checked: set[tuple[str, int]] = set()
        max_size = self.config.max_message_size
        for msg in msgs:
            key = (msg.topic, msg.queue_id)
            body_len = len(msg.body)
            if key in checked and 0 < body_len <= max_size:
                continue  # same queue as a message already checked: only the body differs
            refusal = self._refusal(msg)
            if refusal is not None:
                return refusal
            checked.add(key)
        for msg in msgs:
            refusal = self._hold_scheduled(msg)
            if refusal is not None:
                return refusal
        return self._do_append(self.commit_log.append_batch, msgs, msgs[0].properties, waiter)

    def _do_append(
        self, append: Callable[[Any], PutMessageResult], arg: Any, props: dict[str, str], waiter: str
    ) -> PutMessageResult:
        try:
            result = append(arg)
        except MessageIllegalError as exc:
            status = (
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
                if "properties are" in exc.remark
                else PutMessageStatus.MESSAGE_ILLEGAL
            )
            return PutMessageResult(status, exc.remark)
        except DiskFullError as exc:
            self._note_disk_full(exc)
            return PutMessageResult(
                PutMessageStatus.DISK_FULL,
                f"the store is read-only: {self.disk_full_reason}; writes resume when space returns",
            )
        except OSError as exc:
            return PutMessageResult(
                PutMessageStatus.CREATE_MAPPED_FILE_FAILED, f"cannot write the commit log: {exc}"
            )
        except Exception as exc:  # a bug must reach the producer as an error, not a dropped connection
            log.exception("append failed")
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, f"the store failed to append: {exc!r}")
        replication = self.replication
        if replication is not None:
            replication.notify()
        if props.get(PROPERTY_WAIT_STORE_MSG_OK, "true") != "false":
            end = result.wrote_offset + result.wrote_bytes
            if self._sync_flush:
                if waiter == "async":
                    result.async_flush = self.flush_service.request_async(end, asyncio.get_running_loop())
                else:
                    result.flush_future = self.flush_service.request(end)
            if replication is not None and self.sync_replication and waiter == "async":
                self._wait_for_slave(replication, result, end)
        target = arg[0] if isinstance(arg, list) else arg  # a message or a batch: one queue
        self.dispatcher.maybe_drain(target.topic, target.queue_id)
        return result

    @staticmethod
    def _wait_for_slave(replication: Replication, result: PutMessageResult, end: int) -> None:
        """SYNC_MASTER (RocketMQ ``handleHA``): wait for a slave that is connected and in
        sync; with none, answer SLAVE_NOT_AVAILABLE at once (the message is stored here)."""
        if replication.slave_ok():
            result.async_replica = replication.wait_replicated(end, asyncio.get_running_loop())
        else:
            result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            result.remark = "stored on the master; no slave in sync to replicate it to"

    def put_delivered(self, msg: MessageInner) -> PutMessageResult:
        """Append a delayed message now due, as its delivery (``store.schedule``): not held
        again for its ``DELAY`` (which it keeps, as RocketMQ's stored copy does) and not
        waited for on disk (recovery delivers again what did not survive)."""
        refusal = self._refusal(msg)
        if refusal is not None:
            return refusal
        return self._do_append(self.commit_log.append, msg, _NO_WAIT, "thread")

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        """Append and, under SYNC_FLUSH, wait for the disk (FLUSH_DISK_TIMEOUT on timeout)."""
        return self._wait_flushed(self.append(msg))

    def put_messages(self, msgs: Sequence[MessageInner] | MessageBatchInner) -> PutMessageResult:
        """Append a batch and, under SYNC_FLUSH, wait for the disk."""
        return self._wait_flushed(self.append_batch(msgs))

    def _wait_flushed(self, result: PutMessageResult) -> PutMessageResult:
        future = result.flush_future
        if future is None:
            return result
        try:
            durable = future.result(timeout=self.config.sync_flush_timeout / 1000)
        except FutureTimeout:
            durable = False
        if not durable:
            self._flush_timed_out(result)
        return result

    async def put_message_async(self, msg: MessageInner) -> PutMessageResult:
        """``put_message`` for asyncio callers (the broker): waits for the disk without a thread."""
        return await self.wait_flushed_async(self._append_for_async(self.append, msg))

    async def put_messages_async(self, msgs: Sequence[MessageInner] | MessageBatchInner) -> PutMessageResult:
        """``put_messages`` for asyncio callers."""
        return await self.wait_flushed_async(self._append_for_async(self.append_batch, msgs))

    def _append_for_async(self, append: Callable[..., PutMessageResult], arg: Any) -> PutMessageResult:
        # The flusher resolves asyncio waiters on their loop, in bulk: no thread future.
        result = append(arg, waiter="async")
        return result

    async def wait_flushed_async(self, result: PutMessageResult) -> PutMessageResult:
        """Wait until what ``append(..., waiter="async")`` wrote is on disk (SYNC_FLUSH) and
        on a slave (SYNC_MASTER): ``when_durable`` for a coroutine.

        Returns the result, marked FLUSH_DISK_TIMEOUT or FLUSH_SLAVE_TIMEOUT when that did
        not come within ``syncFlushTimeout``; a result with nothing to wait for is returned
        as it is.
        """
        if result.async_flush is None and result.async_replica is None:
            return result
        durable: asyncio.Future[PutMessageResult] = asyncio.get_running_loop().create_future()

        def answer(answered: PutMessageResult) -> None:
            if not durable.done():  # the awaiting task was cancelled
                durable.set_result(answered)

        self.when_durable(result, answer)
        return await durable

    def when_durable(self, result: PutMessageResult, then: Callable[[PutMessageResult], object]) -> None:
        """Call ``then(result)`` on the running loop once what ``append(..., waiter="async")``
        wrote is on disk and on a slave, or marked FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT
        when either did not come within ``syncFlushTimeout`` (the record stays in the
        log); at once when there is nothing to wait for.

        The broker answers a SYNC_FLUSH send this way: a task and its coroutines would
        cost it more than the append itself.
        """
        flush = result.async_flush
        if flush is None:
            self._after_flush(result, None, then)
            return
        result.async_flush = None
        self._deadlines_here().add(flush)
        flush.add_done_callback(lambda done: self._after_flush(result, done, then))

    def _after_flush(
        self,
        result: PutMessageResult,
        flushed: asyncio.Future[bool] | None,
        then: Callable[[PutMessageResult], object],
    ) -> None:
        if flushed is not None and (flushed.cancelled() or not flushed.result()):
            self._flush_timed_out(result)
        replica = result.async_replica
        if replica is None:
            then(result)
            return
        result.async_replica = None
        self._deadlines_here().add(replica)
        replica.add_done_callback(lambda done: self._after_replica(result, done, then))

    def _after_replica(
        self,
        result: PutMessageResult,
        replicated: asyncio.Future[bool],
        then: Callable[[PutMessageResult], object],
    ) -> None:
        if replicated.cancelled() or not replicated.result():
            self._replica_timed_out(result)
        then(result)

    def _flush_timed_out(self, result: PutMessageResult) -> None:
        result.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        result.remark = f"not flushed within syncFlushTimeout ({self.config.sync_flush_timeout} ms)"

    def _replica_timed_out(self, result: PutMessageResult) -> None:
        result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        result.remark = (
            f"stored on the master; no slave confirmed it within syncFlushTimeout "
            f"({self.config.sync_flush_timeout} ms)"
        )

    def _deadlines_here(self) -> Deadlines:
        """The running loop's ``syncFlushTimeout`` deadlines (made anew when the loop changes)."""
        loop = asyncio.get_running_loop()
        deadlines = self._deadlines
        if deadlines is None or deadlines.loop is not loop:
            deadlines = self._deadlines = Deadlines(loop, self.config.sync_flush_timeout / 1000)
        return deadlines

    # -- replication -------------------------------------------------------------------

    def append_replica(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """A slave's store: append the master's commit-log bytes at ``offset`` and dispatch
        the records they complete; return how many (see ``store.replica``).

        Raises ``ReplicaMismatch`` when the bytes do not continue this log, ``OSError`` when
        no new segment can be made.
        """
        if self._replica is None:
            raise ReplicaMismatch("this store is not a slave's (or is not open)")
        count = self._replica.append(offset, data)
        if count:
            self.dispatcher.drain(blocking=False)
        return count

    @property
    def replica_held(self) -> int:
        """A slave's store: the end of the whole records it holds (a chunk may have ended
        inside one); what it acknowledges to its master."""
        if self._replica is None:
            return self.commit_log.max_offset
        return self._replica.parsed_end

    def replica_chunk(self, offset: int, max_bytes: int) -> bytes | None:
        """A master's store: up to ``max_bytes`` of the commit log from ``offset``, never past
        the end of its segment or what is written (b"" when nothing is there yet); None when
        ``offset`` is outside the log (before its oldest file, or past its end)."""
        log_ = self.commit_log
        if offset == log_.max_offset:
            return b""
        mf = log_.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        end = min(pos + max_bytes, mf.wrote_position)
        if end < pos:
            return None
        try:
            return mf.mm[pos:end]
        except ValueError:  # the segment was closed by expiry in between
            return None

    # -- disk space --------------------------------------------------------------------

    def _note_disk_full(self, exc: OSError) -> None:
        if self.disk_full_reason is None:
            log.error("disk full, store is read-only: %s", exc)
        self.disk_full_reason = f"no space left for new files ({exc.strerror or exc})"
        self._disk_full_checked = time.monotonic()

    def _retry_after_disk_full(self) -> bool:
        """Try, at most once a second, whether space has returned; True when writable again."""
        if time.monotonic() - getattr(self, "_disk_full_checked", 0.0) < 1.0:
            return False
        self._disk_full_checked = time.monotonic()
        self.check_disk_space()
        return self.disk_full_reason is None

    def check_disk_space(self) -> float:
        """Re-evaluate the read-only state from the disk; return the used ratio."""
        ratio = disk_used_ratio(self.root)
        if ratio > self.config.disk_space_warning_level_ratio:
            if self.disk_full_reason is None:
                log.error("disk %.0f%% used: the store stops accepting writes", ratio * 100)
            self.disk_full_reason = (
                f"disk {ratio:.0%} used, above diskSpaceWarningLevelRatio "
                f"({self.config.disk_space_warning_level_ratio:.0%})"
            )
            return ratio
        if self.disk_full_reason is not None and self.commit_log.disk_full_since is not None:
            # The last failure was a file that could not be created: try one now.
            try:
                probe = self.root / "commitlog" / SPACE_PROBE
                fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    os.posix_fallocate(fd, 0, self.config.mapped_file_size_commit_log)
                finally:
                    os.close(fd)
                    probe.unlink(missing_ok=True)
            except OSError:
                return ratio
            self.commit_log.disk_full_since = None
        if self.index is not None and not self.index.retry_waiting():
            return ratio  # index keys still wait for a file: read-only until one can be made
        if self.disk_full_reason is not None:
            log.warning("disk space is back (%.0f%% used): the store accepts writes again", ratio * 100)
        self.disk_full_reason = None
        return ratio

    # -- the logics flush cycle --------------------------------------------------------

    def _flush_logics(self) -> None:
        """Flush consume queues and index, then checkpoint how far they are durable."""
        with self._logics_lock:
            with self.schedule.delivery_lock:
                dispatched = self.dispatcher.dispatched_offset
                last_ts = self.dispatcher.last_store_timestamp
                # The index is durable only below keys that wait for space (disk full).
                waiting = self.index.waiting_from if self.index is not None else None
                index_offset = dispatched if waiting is None else min(dispatched, waiting)
                # The delay offsets may only claim deliveries whose records are on disk.
                self.commit_log.flush()
                # Refused (full disk; persist logs it once): the checkpoint waits, for the
                # file kept on disk may not cover the deliveries after it.
                delays_saved = self.schedule.try_persist()
            self.consume_queues.flush()
            if self.index is not None:
                self.index.flush()
            physic = self.commit_log.flush() if not self._sync_flush else self.commit_log.flushed_offset
            if self.checkpoint is not None and delays_saved:
                self.checkpoint.write(
                    Checkpoint(
                        physic_msg_timestamp=last_ts,
                        logics_msg_timestamp=last_ts,
                        index_msg_timestamp=last_ts,
                        physic_offset=physic,
                        logics_offset=dispatched,
                        index_offset=index_offset,
                    )
                )
            try:
                self.check_disk_space()
            except OSError as exc:
                log.warning("disk check failed: %s", exc)

    def persist_offsets(self) -> bool:
        """Write consumer offsets to disk now (the offset-persistence job calls this).

        Returns False when the disk refused (the old file is kept and the next run tries
        again; ``ConfigFile.persist`` logs the episode once).
        """
        return self.consumer_offsets.try_persist()

    # -- reads -----------------------------------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tags_codes: Iterable[int] | None = None,
        record_filter: Callable[[bytes], bool] | None = None,
    ) -> GetMessageResult:
        """Read up to ``max_count`` records of a queue from ``offset`` (a pull).

        ``tags_codes``: when given, only records whose tag hash is in it are returned;
        ``record_filter``: when given, only records (whole, as bytes) it accepts (a SQL92
        subscription looks at their properties).  Entries that do not match are skipped
        and counted in ``next_begin_offset``.
        """
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = cq.min_offset, cq.max_offset
        if max_offset == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            next_offset = min_offset if min_offset == 0 else max_offset
            return GetMessageResult(
                GetMessageStatus.OFFSET_OVERFLOW_BADLY, next_offset, min_offset, max_offset
            )
        wanted = frozenset(tags_codes) if tags_codes is not None else None
        max_count = max(1, min(max_count, self.config.max_transfer_count_on_message_in_memory))
        max_bytes = self.config.max_transfer_bytes_on_message_in_memory
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        messages, offsets = result.messages, result.queue_offsets
        read = self.commit_log.read
        # Entries of records inside a recorded damaged range are skipped like blanks.
        damaged = self.damage.contains if self.damage.ranges else None
        scanned = 0
        scan_limit = MAX_FILTER_MESSAGE_COUNT if record_filter is None else MAX_RECORD_FILTER_COUNT
        total_bytes = 0
        cursor = offset
        missing = False
        while cursor < max_offset and len(messages) < max_count and scanned < scan_limit:
            # Without a filter every entry is a hit: read just what can be returned.
            want = (
                max_count - len(messages) if wanted is None and record_filter is None else READ_CHUNK_ENTRIES
            )
            entries = cq.entries(cursor, min(max_offset - cursor, want, scan_limit - scanned))
            if not entries:
                break
            for phys, size, tag in entries:
                if size == BLANK_ENTRY_SIZE or size <= 0 or (wanted is not None and tag not in wanted):
                    cursor += 1
                    scanned += 1
                    continue
                if damaged is not None and damaged(phys):
                    cursor += 1
                    scanned += 1
                    continue
                if messages and total_bytes + size > max_bytes:
                    break
                record = read(phys, size)
                if record is None:
                    missing = True
                    cursor += 1
                    scanned += 1
                    continue
                if record_filter is not None and not record_filter(record):
                    cursor += 1
                    scanned += 1
                    continue
                messages.append(record)
                offsets.append(cursor)
                total_bytes += size
                cursor += 1
                scanned += 1
                if len(messages) >= max_count:
                    break
            else:
                continue
            break
        result.next_begin_offset = cursor
        if messages:
            result.status = GetMessageStatus.FOUND
        elif missing:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        return result

    def look_message_by_offset(self, phys: int) -> MessageExt | None:
        """The decoded record at commit-log offset ``phys``, or None."""
        if self.damage.contains(phys):
            return None
        raw = self.commit_log.read_record(phys)
        if raw is None:
            return None
        try:
            msg = decode_record(raw)
        except RecordFormatError:
            return None
        # A record's own PHYSICALOFFSET and CRC must agree: bytes that merely parse (a
        # record-shaped message body, say) are not a message.
        if msg.commit_log_offset != phys or not msg.body_crc_ok:
            return None
        return msg

    def view_message_by_id(self, msg_id: str) -> MessageExt | None:
        """The message with this offset msgId (raises MessageIllegalError for a bad id)."""
        _host, phys = decode_message_id(msg_id)
        return self.look_message_by_offset(phys)

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS or UNIQ_KEY include ``key``, newest first."""
        if self.index is None:
            return []
        end_ms = end_ms if end_ms is not None else self.clock_ms() + 1
        found: list[MessageExt] = []
        seen: set[int] = set()
        limit = max(max_num * 2, 16)
        while True:
            offsets = self.index.query(topic, key, limit, begin_ms, end_ms)
            for phys in offsets:
                if phys in seen:
                    continue
                seen.add(phys)
                msg = self.look_message_by_offset(phys)
                # The index stores hashes: confirm the record really carries the key.
                if msg is None or msg.topic != topic:
                    continue
                props = msg.properties
                if key != props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) and key not in (
                    props.get(PROPERTY_KEYS) or ""
                ).split(" "):
                    continue
                found.append(msg)
                if len(found) >= max_num:
                    return found
            if len(offsets) < limit or limit >= MAX_KEY_QUERY_SCAN:
                return found
            # Other keys with the same hash crowded the answer: look further back.
            limit *= 4

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.find(topic, queue_id)
        return cq.min_offset if cq is not None else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.find(topic, queue_id)
        return cq.max_offset if cq is not None else 0

    def appended_offset_end(self, topic: str, queue_id: int) -> int:
        """The queue offset the queue's next appended message takes: every message appended
        to it so far is below, dispatched to its consume queue or not yet (a send is
        answered before dispatch, so ``get_max_offset_in_queue`` may still be lower)."""
        return self.commit_log.topic_queue_table.get((topic, queue_id), 0)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset stored at or after ``timestamp_ms`` (max offset if none)."""
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp_ms, self.commit_log.store_timestamp_at)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at a queue offset (-1 when there is none)."""
        cq = self.consume_queues.find(topic, queue_id)
        entry = cq.get(offset) if cq is not None else None
        return self.commit_log.store_timestamp_at(entry[0]) if entry is not None else -1

    def get_earliest_message_time(self, topic: str | None = None, queue_id: int = 0) -> int:
        """Store time of the oldest message (of one queue, or of the whole store); -1 if none."""
        if topic is None:
            return self.commit_log.store_timestamp_at(self.commit_log.min_offset)
        cq = self.consume_queues.find(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.min_offset)

    def topics(self) -> list[str]:
        return sorted(self.consume_queues.queues)

    # -- delay and expiry --------------------------------------------------------------

    def deliver_due(self, now_ms: int | None = None) -> tuple[int, int | None]:
        """Deliver due delayed and timer messages; see ``ScheduleMessageService.deliver_due``
        (``TimerMessageService.deliver_due`` is alike): how many, and the next due time.

        A slave delivers none: its master does, and the delivered copies reach it by
        replication."""
        if self.is_replica:
            return 0, None
        now = self.clock_ms() if now_ms is None else now_ms
        delayed, next_delayed = self.schedule.deliver_due(now)
        timers, next_timer = self.timers.deliver_due(now)
        dues = [due for due in (next_delayed, next_timer) if due is not None]
        return delayed + timers, min(dues) if dues else None

    def delete_expired_files(self, now_ms: int | None = None, *, manual: bool = False) -> ExpiryReport:
        """Run expiry now: delete what RocketMQ's rules allow (see ``cleanup``)."""
        with self._expiry_lock:  # one run at a time: each decides from what it sees
            return self._delete_expired_files(self.clock_ms() if now_ms is None else now_ms, manual)

    def _delete_expired_files(self, now_ms: int, manual: bool) -> ExpiryReport:
        ratio = disk_used_ratio(self.root)
        decision = decide_expiry(self.config, now_ms, ratio, manual=manual)
        report = ExpiryReport(ran=decision.run, reason=decision.reason, disk_used_ratio=ratio)
        if decision.run:
            expired_before = now_ms - self.config.file_reserved_time * 3_600_000
            segments_before = [mf.path.name for mf in self.commit_log.queue.files]
            queue_mins_before = {(cq.topic, cq.queue_id): cq.min_offset for cq in self.consume_queues}
            report.deleted_from_offset = self.commit_log.min_offset
            report.commit_log_files_deleted = self.commit_log.delete_expired_files(
                expired_before, force=decision.force, max_count=self.config.delete_files_batch_max
            )
            self._delete_logics_below(self.commit_log.min_offset, report)
            self.damage.forget_below(self.commit_log.min_offset)  # their segments are gone
            report.deleted_to_offset = max(report.deleted_from_offset, self.commit_log.min_offset)
            remaining = {mf.path.name for mf in self.commit_log.queue.files}
            report.segments_deleted = [name for name in segments_before if name not in remaining]
            moved = {
                (cq.topic, cq.queue_id): (queue_mins_before[(cq.topic, cq.queue_id)], cq.min_offset)
                for cq in self.consume_queues
                if (cq.topic, cq.queue_id) in queue_mins_before
            }
            report.messages_deleted, report.unconsumed = tally_deletions(
                moved, self.consumer_offsets.offset_table
            )
        report.commit_log_min_offset = self.commit_log.min_offset
        self.check_disk_space()
        if report.deleted_anything:
            log.warning("%s", report.describe())
        return report

    def _delete_logics_below(self, commit_min: int, report: ExpiryReport) -> None:
        for cq in self.consume_queues:
            report.consume_queue_files_deleted += cq.delete_expired_files(commit_min)
        if self.index is not None:
            report.index_files_deleted += self.index.delete_files_below(commit_min)

    # -- maintenance ---------------------------------------------------------------------

    def delete_topic(self, topic: str) -> None:
        """Forget a topic's consume queues; its records expire with the commit log.

        Pending dispatch is finished first, under the dispatcher's lock, so no entry of the
        topic is being written meanwhile.  Queue offsets keep counting: a topic created
        again under the same name continues after the old offsets, so no offset ever
        names two messages.  (Records after the last checkpoint are dispatched again by
        an unclean restart's recovery, which brings their entries back: deleting a topic
        for good is the broker's job, with its topic table.)
        """
        self.dispatcher.run_drained(lambda: self.consume_queues.delete_topic(topic))

    def wait_dispatched(self, timeout: float = 5.0) -> bool:
        """Block until every appended record is in the consume queues and index."""
        return self.dispatcher.wait_dispatched(self.commit_log.records_end, timeout)

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self.dispatcher.listeners.append(listener)

    def set_prompt_dispatch(self, waiting: Callable[[str, int], bool]) -> None:
        """``waiting(topic, queue_id)`` tells whether a consumer waits for that queue's next
        message; appends there are then dispatched (and listeners told) at once."""
        self.dispatcher.prompt = waiting

    def set_drain_soon(self, drain_soon: Callable[[Callable[[], None]], None]) -> None:
        """``drain_soon(drain)`` arranges for ``drain()`` to run soon, from any thread (an
        event loop's call_soon): the dispatch of an append's record is then left to it
        instead of to the dispatcher thread's poll (see ``store.dispatcher``)."""
        dispatcher = self.dispatcher
        dispatcher.drain_soon = lambda: drain_soon(dispatcher.drain_asked)

    def check(self) -> list[str]:
        """Self-check every file kind; return the problems found (empty when healthy)."""
        if self._closed:
            raise StoreClosedError("the store is closed")
        self.wait_dispatched()
        problems = list(self.open_problems)
        commit_max = self.commit_log.max_offset
        for cq in self.consume_queues:
            problems.extend(cq.check(commit_max))
            problems.extend(self._check_queue_records(cq.topic, cq.queue_id))
        if self.index is not None:
            problems.extend(self.index.check())
        return problems

    def _check_queue_records(self, topic: str, queue_id: int) -> list[str]:
        """Spot-check that a queue's first and last entries point at their own records."""
        cq = self.consume_queues.find(topic, queue_id)
        problems: list[str] = []
        if cq is None or cq.max_offset == 0:
            return problems
        for offset in {cq.min_offset, cq.max_offset - 1}:
            entry = cq.get(offset)
            if entry is None:
                continue
            msg = self.look_message_by_offset(entry[0])
            if msg is None:
                problems.append(f"consume queue {topic}-{queue_id}: entry {offset} points at no record")
            elif (msg.topic, msg.queue_id, msg.queue_offset) != (topic, queue_id, offset):
                problems.append(
                    f"consume queue {topic}-{queue_id}: entry {offset} points at "
                    f"{msg.topic}-{msg.queue_id}@{msg.queue_offset}"
                )
        return problems

    def rebuild_consume_queues(self) -> None:
        """Delete every consume queue and index file and rebuild them from the commit log.

        Only on a closed store: call on a fresh ``MessageStore`` before ``open``.
        """
        if self._opened:
            raise RuntimeError("rebuild_consume_queues must run before open()")
        self.consume_queues.destroy()
        if self.index is not None:
            import shutil

            shutil.rmtree(self.root / "index", ignore_errors=True)
        (self.root / "checkpoint").unlink(missing_ok=True)

    @property
    def stats(self) -> dict[str, int | float | str | None]:
        """Runtime figures (the broker's GET_BROKER_RUNTIME_INFO draws on these)."""
        return {
            "commitLogMinOffset": self.commit_log.min_offset,
            "commitLogMaxOffset": self.commit_log.max_offset,
            "commitLogFlushedOffset": self.flush_service.flushed_offset,
            "dispatchBehindBytes": self.commit_log.records_end - self.dispatcher.dispatched_offset,
            "fsyncCount": self.flush_service.fsync_count,
            "scheduleDelivered": self.schedule.delivered_total,
            "timerDelivered": self.timers.delivered_total,
            "timerWaiting": self.timers.backlog()["waiting"],
            "diskFull": self.disk_full_reason,
            # Damaged commit-log ranges on record (damaged.json): how many, and their bytes.
            "damagedRanges": len(self.damage.ranges),
            "damagedBytes": sum(r.size for r in self.damage.ranges),
            "indexKeysWaiting": self.index.waiting_count if self.index is not None else 0,
        }
