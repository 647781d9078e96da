"""The push consumer: RocketMQ's ``DefaultMQPushConsumer`` with a concurrent listener.

Under the hood it pulls: every queue assigned to this consumer has a long-polling pull
loop on the client instance's event loop, which fills the queue's ``ProcessQueue``;
batches of messages go to the application's listener on a thread pool.  A batch the
listener answers RECONSUME_LATER (or raises on) is sent back to the broker, which
re-delivers it through the group's retry topic (``%RETRY%<group>``, subscribed
automatically) with rising reconsume times, then to the DLQ.  An offset is committed only
below the oldest message still being consumed, so a consumer that dies holding messages
has them delivered again (at least once).

With ``orderly=True`` each queue is consumed by one thread at a time, in queue order,
and only while this consumer holds the queue's lock on the broker (LOCK_BATCH_MQ, renewed
every 20 s): a batch the listener refuses is retried here after a pause, never sent
back, so order holds across failures and rebalances.  Only a message refused
``max_reconsume_times`` times (when set: by default orderly retries for ever, as
RocketMQ's does) is given up: sent to the group's dead-letter queue, and the queue goes on.

Brokers may also ask the consumer to consume one message directly (the console's
"resend to client": the listener runs once, nothing is committed or sent back) and for
its offsets (GET_CONSUMER_STATUS_FROM_CLIENT).

Queues are assigned by the rebalance both subscribing consumers share
(``assignment.Rebalance``): every 20 s, at start, and at once when the broker says the
group changed (NOTIFY_CONSUMER_IDS_CHANGED).  Pulling a queue stops while it
holds more than ``pull_threshold_for_queue`` messages or ``pull_threshold_size_for_queue``
bytes not yet consumed (flow control), and resumes when drained.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.assignment import Rebalance, start_offset
from broker_core.client.consumer.common import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageSelector,
    SubscriptionData,
    consumer_data,
)
from broker_core.client.consumer.direct import consume_directly
from broker_core.client.consumer.offsetstore import (
    NO_OFFSET,
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
    topic_offsets,
)
from broker_core.client.consumer.rebalance import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from broker_core.client.consumer.sendback import (
    effective_max_reconsume_times,
    send_back,
    send_to_dead_letter,
)
from broker_core.client.consumer.workers import HAND_OVER_WAIT_S, ConsumeWorkers
from broker_core.client.instance import ClientInstance
from broker_core.errors import BrokerRefusedError, ClientError, NoRouteError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import (
    COMPRESSED_FLAG,
    PROPERTY_RETRY_TOPIC,
    MessageExt,
    RecordFormatError,
    iter_records,
)
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import CONSUMER_GROUP, PullMessageRequestHeader, PullSysFlag
from broker_core.tags import parse_tags
from broker_core.topics import RETRY_GROUP_TOPIC_PREFIX, group_problem, retry_topic

log = logging.getLogger(__name__)

BROKER_SUSPEND_MAX_MS = 15_000
PULL_TIMEOUT_S = 30.0
PULL_DELAY_ON_EXCEPTION_S = 3.0
FLOW_CONTROL_DELAY_S = 0.05
REBALANCE_LOCK_INTERVAL_MS = 20_000
# An orderly queue whose lock another member still holds (it has not yet seen the
# rebalance that hands the queue over) is asked for again this soon, not a whole
# rebalance interval later.
LOCK_RETRY_DELAY_S = 1.0


class ConsumeStatus(enum.Enum):
    """What a listener answers for a batch (RocketMQ ``ConsumeConcurrentlyStatus``)."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


Listener = Callable[[list[MessageExt]], ConsumeStatus]


@dataclass
class ProcessQueue:
    """One assigned queue's messages pulled but not yet consumed, by queue offset."""

    mq: MessageQueue
    next_offset: int
    messages: dict[int, MessageExt] = field(default_factory=dict)
    size: int = 0
    dropped: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Orderly: the broker's lock is held, and one thread is consuming the queue.
    locked: bool = False
    consuming: bool = False
    # The broker id the last pull answer suggested (suggestWhichBrokerId): 0, the master,
    # or a slave when the group reads from slaves.
    suggested_broker: int = 0

    def first(self, count: int) -> list[MessageExt]:
        """The ``count`` oldest messages held (orderly consumption takes them in order)."""
        with self.lock:
            return [msg for _, msg in zip(range(count), self.messages.values(), strict=False)]

    def put(self, msgs: Sequence[MessageExt]) -> None:
        with self.lock:
            held = self.messages
            new = {m.queue_offset: m for m in msgs if m.queue_offset not in held}
            held.update(new)
            self.size += sum([len(m.body) for m in new.values()])

    def remove(self, msgs: Sequence[MessageExt]) -> int:
        """Forget consumed ``msgs``; the offset that may now be committed (RocketMQ's rule:
        the oldest message still held, or past the newest pulled when none is)."""
        with self.lock:
            pop = self.messages.pop
            self.size -= sum([len(m.body) for m in msgs if pop(m.queue_offset, None) is not None])
            # Pulled in offset order and dicts keep insertion order: the first key is the oldest.
            return next(iter(self.messages)) if self.messages else self.next_offset

    def drop(self) -> None:
        """No longer ours (rebalanced away, reset, shut down): nothing more is committed for it."""
        with self.lock:
            self.dropped = True

    @property
    def count(self) -> int:
        return len(self.messages)


class PushConsumer:
    """Consumes subscribed topics through a listener; thread-safe; ``start()`` before use."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        config: ClientConfig | None = None,
        message_model: MessageModel | str = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        consume_thread_min: int = 20,
        consume_thread_max: int = 20,
        consume_message_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue: int = 100 * 1024 * 1024,
        max_reconsume_times: int = -1,
        rebalance_interval_ms: int = 20_000,
        offset_store_dir: str | None = None,
        orderly: bool = False,
        suspend_current_queue_time_ms: int = 1_000,
    ) -> None:
        if message_model not in tuple(MessageModel):
            raise ClientError(f"message_model must be CLUSTERING or BROADCASTING, not {message_model!r}")
        self.group = group
        self.config = config if config is not None else ClientConfig(namesrv_addr=namesrv_addr)
        self.message_model = MessageModel(message_model)
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate_strategy: AllocateMessageQueueStrategy = (
            allocate_strategy or AllocateMessageQueueAveragely()
        )
        self.consume_thread_max = consume_thread_max
        self.consume_thread_min = min(consume_thread_min, consume_thread_max)
        self.batch_size = consume_message_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue = pull_threshold_size_for_queue
        # RocketMQ's maxReconsumeTimes: -1 is 16 for concurrent consumption, unbounded orderly.
        self.max_reconsume_times = max_reconsume_times
        self.rebalance_interval_ms = rebalance_interval_ms
        self.offset_store_dir = offset_store_dir
        self.orderly = orderly
        self.suspend_s = suspend_current_queue_time_ms / 1000
        self.subscriptions: dict[str, MessageSelector] = {}
        self.listener: Listener | None = None
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._instance: ClientInstance | None = None
        self._store: OffsetStore | None = None
        self._pool: ConsumeWorkers | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._rebalancer: Rebalance | None = None
        self._lock_retry: asyncio.Task[None] | None = None
        self._stopping = False  # set at shutdown: no rebalance may start a pull after it

    # -- configuration -------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> PushConsumer:
        """Consume ``topic``'s messages whose tag matches ``expression`` ("TagA || TagB", "*"),
        or that a selector accepts (``MessageSelector.by_sql("a > 5")``, checked here; the
        broker filters, and ``start`` fails when it does not serve SQL92 or refuses it)."""
        self.subscriptions[topic] = MessageSelector.of(expression)
        return self

    def register_listener(self, listener: Listener) -> PushConsumer:
        """``listener(messages) -> ConsumeStatus``, called on the consumer's thread pool."""
        self.listener = listener
        return self

    @property
    def clustering(self) -> bool:
        return self.message_model is MessageModel.CLUSTERING

    @property
    def effective_max_reconsume_times(self) -> int:
        """The reconsume count at which a message is given up (to the DLQ)."""
        return effective_max_reconsume_times(self.max_reconsume_times, orderly=self.orderly)

    def _all_subscriptions(self) -> dict[str, MessageSelector]:
        subs = dict(self.subscriptions)
        if self.clustering:
            subs.setdefault(retry_topic(self.group), MessageSelector.by_tag())  # redeliveries
        return subs

    def _subscription_data(self) -> list[SubscriptionData]:
        """Every subscription (the retry topic's too), by topic."""
        return [
            SubscriptionData.of(topic, selector)
            for topic, selector in sorted(self._all_subscriptions().items())
        ]

    def heartbeat_data(self) -> dict[str, Any]:
        """This group's heartbeat entry: a push consumer with its subscriptions."""
        return consumer_data(
            self.group,
            ConsumeType.CONSUME_PASSIVELY,
            self.message_model,
            self.consume_from_where,
            self._subscription_data(),
        )

    def running_info(self) -> dict[str, Any]:
        """What this consumer says of itself when a console asks (GET_CONSUMER_RUNNING_INFO):
        its settings, subscriptions, and per queue the committed offset and what it holds."""
        offsets = self._store.offsets() if self._store is not None else {}
        queues = {}
        for mq, pq in sorted(self.process_queues.items()):
            with pq.lock:
                cached, size = len(pq.messages), pq.size
            queues[mq] = {
                "commitOffset": offsets.get(mq, -1),
                "cachedMsgCount": cached,
                "cachedMsgSizeInMiB": round(size / (1024 * 1024), 3),
                "locked": pq.locked,
                "droped": pq.dropped,  # sic: RocketMQ's field name
            }
        return {
            "properties": {
                "PROP_CONSUME_TYPE": ConsumeType.CONSUME_PASSIVELY.value,
                "PROP_CONSUMEORDERLY": str(self.orderly).lower(),
                "PROP_THREADPOOL_CORE_SIZE": str(self.consume_thread_min),
                "PROP_CLIENT_VERSION": "Quiver Python client",
                "messageModel": self.message_model,
                "consumeFromWhere": self.consume_from_where,
                "pullBatchSize": str(self.pull_batch_size),
                "pullThresholdForQueue": str(self.pull_threshold_for_queue),
                "consumeMessageBatchMaxSize": str(self.batch_size),
                "maxReconsumeTimes": str(self.max_reconsume_times),
            },
            "subscriptionSet": [sub.to_json() for sub in self._subscription_data()],
            "mqTable": queues,
        }

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> PushConsumer:
        if self._instance is not None:
            return self
        problem = group_problem(self.group)
        if problem is not None:
            raise ClientError(problem)
        if self.listener is None or not self.subscriptions:
            raise ClientError("subscribe to a topic and register a listener before start()")
        instance = ClientInstance.acquire(self.config)
        self._pool = ConsumeWorkers(self.consume_thread_min, self.consume_thread_max, f"consume-{self.group}")
        try:
            instance.submit(self._start(instance)).result()
        except BaseException:
            instance.release()
            self._pool.shutdown(wait=False)
            raise
        self._instance = instance
        return self

    async def _start(self, instance: ClientInstance) -> None:
        self._instance = instance
        if self.clustering:
            self._store = RemoteBrokerOffsetStore(instance, self.group)
        else:
            self._store = LocalFileOffsetStore(instance.client_id, self.group, self.offset_store_dir)
        await self._store.load()
        for topic in self._all_subscriptions():
            try:
                await instance.update_route(topic)
            except NoRouteError:
                if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    raise
        for sub in self._subscription_data():  # SQL92 ones: does a broker serve them?
            await instance.check_subscription(self.group, sub)
        self._rebalancer = Rebalance(
            instance, self.group, self.allocate_strategy, self, broadcasting=not self.clustering
        )
        await instance.register_consumer(self)
        await self.rebalance()
        self._timers = [
            asyncio.create_task(self._every(self.rebalance_interval_ms, self.rebalance)),
            asyncio.create_task(self._every(self.config.persist_consumer_offset_interval, self._persist)),
        ]
        if self.orderly and self.clustering:
            self._timers.append(
                asyncio.create_task(self._every(REBALANCE_LOCK_INTERVAL_MS, self._relock_all))
            )

    def shutdown(self) -> None:
        """Stop pulling, let running listeners finish, commit offsets, unregister."""
        instance = self._instance
        if instance is None:
            return
        try:
            instance.submit(self._stop_pulling()).result(timeout=10)
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            instance.submit(self._finish(instance)).result(timeout=10)
        finally:
            self._instance = None
            instance.release()

    async def _stop_pulling(self) -> None:
        self._stopping = True
        assert self._rebalancer is not None
        async with self._rebalancer.lock:  # a rebalance under way finishes first
            pass
        if self._lock_retry is not None:
            self._timers.append(self._lock_retry)
        for task in self._timers:
            task.cancel()
        for pq in self.process_queues.values():
            pq.drop()
        tasks = [*self._timers, *self._pull_tasks.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _finish(self, instance: ClientInstance) -> None:
        await self._persist()
        if self.orderly and self.clustering:
            await self._lock_request(RequestCode.UNLOCK_BATCH_MQ, list(self.process_queues))
        await instance.unregister(self, consumer=True)

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    async def _every(self, interval_ms: int, job: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:
                log.exception("consumer %s: %s failed", self.group, getattr(job, "__name__", job))

    async def _persist(self) -> None:
        assert self._store is not None
        await self._store.persist_all(list(self.process_queues))

    # -- requests from the broker --------------------------------------------------------------

    def on_consumer_ids_changed(self) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED: rebalance now, not at the next timer."""
        if self._stopping or self._rebalancer is None:
            return
        self._rebalancer.soon(self.rebalance)

    async def consume_message_directly(self, msg: MessageExt, broker_name: str) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the listener on ``msg`` once, off the loop; its
        ConsumeMessageDirectlyResult.  No send-back, no offset commit, whatever it answers."""
        assert self.listener is not None and self._instance is not None
        if msg.sys_flag & COMPRESSED_FLAG:
            msg.body = msg.uncompressed_body()
            msg.sys_flag &= ~COMPRESSED_FLAG
        self._reset_retry_topic([msg])
        log.info("consumer %s: consuming %s directly (from %s)", self.group, msg.msg_id, broker_name)
        return await self._instance.run_blocking(consume_directly, self.listener, msg, orderly=self.orderly)

    def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offsets held for ``topic``'s queues."""
        return topic_offsets(self._store, topic)

    def on_reset_offset(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """RESET_CONSUMER_CLIENT_OFFSET: drop the queues, take the new offsets, pull again."""
        if self._stopping:
            return
        asyncio.get_running_loop().create_task(self._reset_offsets(offsets))

    async def _reset_offsets(self, offsets: dict[MessageQueue, int]) -> None:
        assert self._rebalancer is not None and self._store is not None
        async with self._rebalancer.lock:
            for mq, offset in offsets.items():
                if self._stopping:
                    return
                pq = self.process_queues.pop(mq, None)
                if pq is None:
                    continue
                pq.drop()  # what it still holds is not committed over the new offset
                task = self._pull_tasks.pop(mq, None)
                if task is not None:
                    task.cancel()
                self._store.update(mq, offset)
                await self._store.persist(mq)
                log.info("consumer %s: offset of %s reset to %d", self.group, mq, offset)
                new = ProcessQueue(mq, offset)
                self.process_queues[mq] = new
                self._pull_tasks[mq] = asyncio.create_task(self._pull_loop(new), name=f"pull-{mq}")

    # -- rebalance -------------------------------------------------------------------------------

    async def rebalance(self) -> None:
        """Take this consumer's share of every subscribed topic's queues now (orderly: the
        queues whose broker lock it gets; the others are asked for again soon)."""
        assert self._rebalancer is not None
        refused = await self._rebalancer.run(self._all_subscriptions())
        if refused and self.orderly and not self._stopping:
            self._schedule_lock_retry()

    def _schedule_lock_retry(self) -> None:
        """Rebalance again in LOCK_RETRY_DELAY_S: the member giving the queues up unlocks them
        when its own rebalance runs, which the same membership change has just triggered."""
        if self._lock_retry is not None and not self._lock_retry.done():
            return

        async def retry() -> None:
            await asyncio.sleep(LOCK_RETRY_DELAY_S)
            self._lock_retry = None  # the rebalance below may need another
            if not self._stopping:
                await self.rebalance()

        self._lock_retry = asyncio.get_running_loop().create_task(retry(), name=f"relock-{self.group}")

    def held_queues(self) -> list[MessageQueue]:
        """The queues this consumer pulls now (for the rebalance)."""
        return list(self.process_queues)

    async def release_queue(self, mq: MessageQueue) -> None:
        """Rebalanced away: stop pulling ``mq``, commit its offset, unlock it (orderly)."""
        pq = self.process_queues.pop(mq)
        pq.drop()
        task = self._pull_tasks.pop(mq, None)
        if task is not None:
            task.cancel()
        assert self._store is not None
        await self._store.persist(mq)
        self._store.remove(mq)
        if self.orderly and self.clustering:
            await self._lock_request(RequestCode.UNLOCK_BATCH_MQ, [mq])

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start consuming ``mq``; False when an orderly queue's lock is held by another member."""
        if self._stopping:
            return True
        if (
            self.orderly
            and self.clustering
            and mq not in await self._lock_request(RequestCode.LOCK_BATCH_MQ, [mq])
        ):
            return False  # another consumer still holds it: asked again soon
        assert self._instance is not None and self._store is not None
        try:
            offset = await start_offset(
                self._instance, self._store, mq, self.consume_from_where, self.consume_timestamp_ms
            )
        except (NoRouteError, BrokerRefusedError, RemotingError) as exc:
            log.info("consumer %s: cannot start %s now: %s", self.group, mq, exc)
            return True  # the next rebalance tries again
        pq = ProcessQueue(mq, offset, locked=True)
        self.process_queues[mq] = pq
        self._pull_tasks[mq] = asyncio.create_task(self._pull_loop(pq), name=f"pull-{mq}")
        return True

    # -- pulling ---------------------------------------------------------------------------------

    async def _pull_loop(self, pq: ProcessQueue) -> None:
        while not pq.dropped:
            if pq.count > self.pull_threshold_for_queue or pq.size > self.pull_threshold_size_for_queue:
                await asyncio.sleep(FLOW_CONTROL_DELAY_S)  # flow control: let the listener catch up
                continue
            try:
                await self._pull_once(pq)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker went away, a bad answer...: wait, then again
                log.info("consumer %s: pull of %s failed: %s", self.group, pq.mq, exc)
                await asyncio.sleep(PULL_DELAY_ON_EXCEPTION_S)

    async def _pull_once(self, pq: ProcessQueue) -> None:
        assert self._instance is not None and self._store is not None
        mq = pq.mq
        addr = await self._instance.find_broker(mq.broker_name, mq.topic, pq.suggested_broker)
        selector = self._all_subscriptions().get(mq.topic) or MessageSelector.by_tag()
        commit = self._store.offsets().get(mq, NO_OFFSET) if self.clustering else NO_OFFSET
        sys_flag = PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
        if commit > 0:
            sys_flag |= PullSysFlag.COMMIT_OFFSET
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=pq.next_offset,
            max_msg_nums=self.pull_batch_size,
            sys_flag=sys_flag,
            commit_offset=max(commit, 0),
            suspend_timeout_millis=BROKER_SUSPEND_MAX_MS,
            subscription=selector.expression,
            expression_type=selector.expression_type,
        )
        reply = await self._instance.requests.pull_message(addr, header, PULL_TIMEOUT_S)
        response = reply.response
        answer = reply.header
        next_offset = answer.next_offset_or(pq.next_offset)
        pq.suggested_broker = answer.suggest_which_broker_id
        if response.code == ResponseCode.SUCCESS:
            self._found(pq, response.body, selector, next_offset, next_offset >= answer.max_offset)
        elif response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            # Nothing matched (a tag or SQL92 filter skipped messages): with nothing held,
            # the skipped ones count as consumed (RocketMQ's correctTagsOffset).
            pq.next_offset = next_offset
            self._consumed(pq, [])
        elif response.code == ResponseCode.PULL_OFFSET_MOVED:
            log.warning("consumer %s: offset of %s moved to %d", self.group, mq, next_offset)
            pq.next_offset = next_offset
            self._store.update(mq, next_offset)
        else:
            raise ClientError(f"pull of {mq} refused: {response.code} {response.remark or ''}")

    def _found(
        self, pq: ProcessQueue, body: bytes, selector: MessageSelector, next_offset: int, at_head: bool
    ) -> None:
        """Hand what a pull found to the listener (``at_head``: nothing newer is stored)."""
        try:
            records = list(iter_records(body))
        except RecordFormatError as exc:
            raise ClientError(f"malformed records from the broker: {exc}") from exc
        wanted = None if selector.is_sql92 else parse_tags(selector.expression)
        # The broker filtered by tag hash; tags with equal hashes end here.
        msgs = records if wanted is None else [m for m in records if (m.tags or "") in wanted]
        for msg in msgs:
            if msg.sys_flag & COMPRESSED_FLAG:
                msg.body = msg.uncompressed_body()
                msg.sys_flag &= ~COMPRESSED_FLAG
        if pq.mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            self._reset_retry_topic(msgs)
        pq.next_offset = next_offset
        if not msgs:
            self._consumed(pq, [])
            return
        pq.put(msgs)
        if self.orderly:
            self._consume_orderly_soon(pq)
            return
        pool = self._pool
        assert pool is not None
        # At the head of its queue a batch is the newest message, the one a listener is
        # waiting for: an idle consume thread takes it before the loop goes on to the next
        # pull, which would otherwise hold the GIL while that thread waits for it (send to
        # listener at 2,000 msgs/s: p50 273 -> 240 µs, bench/timeline.py).  Behind the head
        # (catching up) the loop goes straight on: there the wait would cost a third of
        # the rate.
        first = at_head and pool.expect_taken()
        for start in range(0, len(msgs), self.batch_size):
            pool.submit(self._consume, pq, msgs[start : start + self.batch_size])
        if first:
            pool.wait_taken(HAND_OVER_WAIT_S)

    def _reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        """Redeliveries (from the group's retry topic) show the topic the application
        subscribed to (RocketMQ's resetRetryAndNamespace)."""
        group_retry_topic = retry_topic(self.group)
        for msg in msgs:
            original = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if original and msg.topic == group_retry_topic:
                msg.topic = original

    # -- consuming -------------------------------------------------------------------------------

    def _consume(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        """On a pool thread: run the listener; a consumed batch is settled here, a refused
        one goes to the loop to be sent back."""
        if pq.dropped:
            return
        assert self.listener is not None
        try:
            status = self.listener(batch)
        except Exception:
            log.exception("consumer %s: listener failed; the messages will be redelivered", self.group)
            status = ConsumeStatus.RECONSUME_LATER
        if status is ConsumeStatus.CONSUME_SUCCESS:
            self._consumed(pq, batch)
            return
        instance = self._instance
        if instance is not None:
            instance.call_soon(self._settle, pq, batch, ConsumeStatus.RECONSUME_LATER)

    def _settle(self, pq: ProcessQueue, batch: list[MessageExt], status: ConsumeStatus) -> None:
        if status is ConsumeStatus.RECONSUME_LATER and self.clustering and not pq.dropped:
            asyncio.get_running_loop().create_task(self._send_back_then_settle(pq, batch))
            return
        self._consumed(pq, batch)

    async def _send_back_then_settle(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        assert self._instance is not None
        failed = []
        for msg in batch:
            if not await send_back(self._instance, msg, self.group, self.effective_max_reconsume_times):
                failed.append(msg)
        done = [m for m in batch if m not in failed]
        self._consumed(pq, done)
        if failed and not pq.dropped:  # could not hand it back: try here again a little later
            await asyncio.sleep(5)
            assert self._pool is not None
            self._pool.submit(self._consume, pq, failed)

    # -- orderly ---------------------------------------------------------------------------------

    def _consume_orderly_soon(self, pq: ProcessQueue) -> None:
        """Start the queue's one consuming thread unless it is running."""
        with pq.lock:
            if pq.consuming:
                return
            pq.consuming = True
        assert self._pool is not None
        self._pool.submit(self._consume_orderly, pq)

    def _consume_orderly(self, pq: ProcessQueue) -> None:
        """On a pool thread: the queue's messages in order, one batch at a time; a refused
        batch is offered again after a pause (the offset does not move meanwhile), except
        its messages that have used up their reconsume times (``_give_up_or_retry``)."""
        assert self.listener is not None
        try:
            while not pq.dropped and pq.locked:
                batch = pq.first(self.batch_size)
                if not batch:
                    break
                try:
                    status = self.listener(batch)
                except Exception:
                    log.exception("consumer %s: orderly listener failed; retrying in place", self.group)
                    status = ConsumeStatus.RECONSUME_LATER
                if status is ConsumeStatus.CONSUME_SUCCESS:
                    self._consumed(pq, batch)
                elif self._give_up_or_retry(pq, batch):
                    time.sleep(self.suspend_s)
        finally:
            with pq.lock:
                pq.consuming = False
                more = bool(pq.messages) and not pq.dropped and pq.locked
        if more:
            self._consume_orderly_soon(pq)

    def _give_up_or_retry(self, pq: ProcessQueue, batch: list[MessageExt]) -> bool:
        """Settle a refused orderly batch; True when the queue must pause before retrying.

        A message whose reconsume count reached the maximum goes to the dead-letter queue
        (through the retry topic, the broker switches it) and is committed past; when
        that send fails it stays, to be retried like the others (RocketMQ's
        ``checkReconsumeTimes``).  Unlike Java, a message given up is not offered again
        with the rest of its batch, so it reaches the DLQ once.
        """
        instance = self._instance
        assert instance is not None
        max_times = self.effective_max_reconsume_times
        retry = []
        for msg in batch:
            if msg.reconsume_times >= max_times and send_to_dead_letter(instance, msg, self.group, max_times):
                log.warning(
                    "consumer %s: %s of %s refused %d times: sent to the dead-letter queue",
                    self.group, msg.msg_id, pq.mq, msg.reconsume_times + 1,
                )  # fmt: skip
                self._consumed(pq, [msg])
            else:
                msg.reconsume_times += 1
                retry.append(msg)
        return bool(retry)

    async def _relock_all(self) -> None:
        """Renew the broker locks of every held queue; a queue whose lock was lost stops."""
        held = list(self.process_queues)
        locked = await self._lock_request(RequestCode.LOCK_BATCH_MQ, held)
        for mq in held:
            pq = self.process_queues.get(mq)
            if pq is None:
                continue
            was_locked, pq.locked = pq.locked, mq in locked
            if pq.locked and not was_locked and pq.messages:
                self._consume_orderly_soon(pq)

    async def _lock_request(self, code: int, mqs: list[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ to each broker of ``mqs``; the queues locked."""
        assert self._instance is not None
        locked: set[MessageQueue] = set()
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, queues in by_broker.items():
            addr = self._instance.master_addr(broker_name)
            if addr is None:
                continue
            body = orjson.dumps(
                {
                    CONSUMER_GROUP: self.group,
                    "clientId": self._instance.client_id,
                    "mqSet": [q.to_json() for q in queues],
                }
            )
            try:
                response = await self._instance.invoke(addr, RemotingCommand.request(code, body=body))
            except RemotingError as exc:
                log.info("consumer %s: %s to %s failed: %s", self.group, RequestCode(code).name, addr, exc)
                continue
            if code == RequestCode.LOCK_BATCH_MQ and response.code == ResponseCode.SUCCESS:
                for item in orjson.loads(response.body).get("lockOKMQSet") or []:
                    locked.add(MessageQueue.from_json(item))
        return locked

    def _consumed(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        """Forget ``batch`` and move the queue's offset (from a pool thread or the loop)."""
        offset = pq.remove(batch)
        store = self._store
        if store is None:
            return
        with pq.lock:  # a queue dropped meanwhile keeps the offset its drop committed
            if not pq.dropped:
                store.update(pq.mq, offset, increase_only=True)
