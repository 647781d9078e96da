"""PULL_MESSAGE (11) with long polling.

A pull that finds nothing new (and allows suspension) is held until a message arrives on
its queue or its suspend timeout passes, then read once more.  Arrivals come from the
store's dispatcher (``MessageStore.add_arrival_listener``), possibly on another thread,
and are handed to the event loop with ``call_soon_threadsafe``.

With ``longPollingEnable = false`` (short polling) such a pull is held for
``shortPollingTimeMills`` instead, and arrivals do not wake it: as in RocketMQ, where the
store notifies held pulls only under long polling.

Before anything is read the consumer group must be allowed to consume here: a group the
broker does not know (with ``autoCreateSubscriptionGroup = false``), a group with
``consumeEnable = false``, and a broadcasting consumer of a group with
``consumeBroadcastEnable = false`` are refused, each with a remark naming the setting.

Every response carries suggestWhichBrokerId, nextBeginOffset, minOffset and maxOffset as
strings: the C++ client reads them for every response code.

Reading from slaves (RocketMQ 4.9's rules): with ``slaveReadEnable`` a pull that is far
behind (more of the log after it than ``accessMessageInMemoryMaxRatio`` percent of the
machine's memory, so it would read from disk, not the page cache) is told to go to the
group's ``whichBrokerWhenConsumeSlowly``, and any other pull to the group's ``brokerId``;
without it every answer suggests the master.  A slave serves pulls either way (that is how
consumers read on when the master is gone), never stores the offset a pull commits (the
master's offsets are copied to it), and answers an offset it does not hold with
PULL_RETRY_IMMEDIATELY rather than correct it: it may simply not have that far yet.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from broker_core.broker.clients import BROADCASTING
from broker_core.broker.filters import PullFilter, pull_filter, retry_records_matching, sql_filter
from broker_core.broker.groups import group_not_exist_remark
from broker_core.errors import ResponseError
from broker_core.model.groupconfig import MASTER_ID, SubscriptionGroupConfig
from broker_core.model.message import PHYSICAL_OFFSET_POS
from broker_core.model.topicconfig import TopicConfig, is_readable
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import PullMessageRequestHeader, PullMessageResponseHeader, PullSysFlag
from broker_core.sql92 import is_sql92
from broker_core.store.results import GetMessageResult, GetMessageStatus
from broker_core.topics import TOOLS_CONSUMER_GROUP, retry_topic

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

# The C++ client's async pull gives up after 30 s: never hold a pull that long.
MAX_SUSPEND_MS = 25_000


class PullHoldService:
    """Held pulls, by queue, woken when the dispatcher reports new messages there."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._waiting: dict[tuple[str, int], list[asyncio.Future[None]]] = {}

    def is_waiting(self, topic: str, queue_id: int) -> bool:
        """Whether a pull is held on the queue (the store then dispatches appends there at once)."""
        return (topic, queue_id) in self._waiting

    def on_arrival(self, arrived: dict[tuple[str, int], int]) -> None:
        """Store listener (any thread): wake the pulls held on these queues."""
        keys = [key for key in arrived if key in self._waiting]
        if not keys:
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:  # dispatched by the appending request itself: no cross-thread wake-up
            self._wake(keys)
        else:
            self._loop.call_soon_threadsafe(self._wake, keys)

    def wake(self, keys: list[tuple[str, int]]) -> None:
        """Wake what is held on these queues (on the loop): new messages, or (pop) a FIFO
        message group freed by an ack."""
        self._wake(keys)

    def _wake(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            for future in self._waiting.pop(key, []):
                if not future.done():
                    future.set_result(None)

    async def wait(self, topic: str, queue_id: int, timeout_s: float) -> None:
        await self.wait_any([(topic, queue_id)], timeout_s)

    async def wait_any(self, keys: list[tuple[str, int]], timeout_s: float) -> None:
        """Until something arrives on any of these queues, or ``timeout_s`` passes."""
        future: asyncio.Future[None] = self._loop.create_future()
        for key in keys:
            self._waiting.setdefault(key, []).append(future)
        # The timeout resolves the same future an arrival does: the held pull resumes one
        # loop turn after the append that woke it (``asyncio.wait_for`` would add two turns
        # of its own, each an epoll round on the way to the consumer).
        timer = self._loop.call_later(timeout_s, _release, future)
        try:
            await future
        finally:
            timer.cancel()
            for key in keys:
                waiting = self._waiting.get(key)
                if waiting is not None and future in waiting:
                    waiting.remove(future)
                    if not waiting:
                        del self._waiting[key]


def _release(future: asyncio.Future[None]) -> None:
    """A held pull's time is up: it answers with what is there (nothing, usually)."""
    if not future.done():
        future.set_result(None)


# The machine's memory (RocketMQ's TOTAL_PHYSICAL_MEMORY_SIZE).
_MEMORY_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


class PullProcessor:
    def __init__(self, broker: BrokerController, hold: PullHoldService) -> None:
        self.broker = broker
        self.hold = hold

    async def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            header = PullMessageRequestHeader.from_fields(request.ext_fields)
        except ValueError as exc:
            return self._reply(request, ResponseCode.SYSTEM_ERROR, f"malformed pull header: {exc}", None, 0)
        refusal = self._group_refusal(header, conn)
        if refusal is not None:
            code, remark = refusal
            return self._reply(request, code, remark, None, header.queue_offset)
        config = self.broker.topics.get(header.topic) or self._replicated_topic(header.topic)
        if config is None:
            return self._reply(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
                None,
                0,
            )
        if not is_readable(config.perm) or not is_readable(self.broker.config.broker_permission):
            return self._reply(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] pulling message is forbidden",
                None,
                0,
            )
        if header.sys_flag & PullSysFlag.SUBSCRIPTION:
            expression, expression_type = header.subscription, header.expression_type
        else:
            subscription = self.broker.clients.subscription(header.consumer_group, header.topic)
            if subscription is None:
                return self._reply(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription not exist, group: {header.consumer_group}",
                    None,
                    header.queue_offset,
                )
            expression, expression_type = subscription.expression, subscription.expression_type
        try:
            choose = self._filter(header, expression, expression_type)
        except ResponseError as exc:
            return self._reply(request, exc.code, exc.remark, None, header.queue_offset)
        codes, records = choose.tag_codes, choose.records
        store = self.broker.store
        assert store is not None
        slave = self.broker.config.is_slave
        if header.sys_flag & PullSysFlag.COMMIT_OFFSET and header.commit_offset >= 0 and not slave:
            store.consumer_offsets.commit_offset(
                getattr(conn, "remote_address", ""),
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.commit_offset,
            )
        result = store.get_message(
            header.topic, header.queue_id, header.queue_offset, header.max_msg_nums, codes, records
        )
        if (
            result.status.no_new_message
            and header.sys_flag & PullSysFlag.SUSPEND
            and header.queue_offset == result.next_begin_offset
        ):
            member = self.broker.clients.has_consumer_on(header.consumer_group, conn)
            await self._hold(header)
            if getattr(conn, "closed", False) or (
                member and not self.broker.clients.has_consumer_on(header.consumer_group, conn)
            ):
                # The consumer went away (closed, or unregistered at its shutdown) while its
                # pull was held: nothing is read for it, nor counted as handed to its group.
                return self._result_reply(request, header, result)
            result = store.get_message(
                header.topic, header.queue_id, header.queue_offset, header.max_msg_nums, codes, records
            )
        if result.status is GetMessageStatus.FOUND and header.consumer_group != TOOLS_CONSUMER_GROUP:
            # A tool's read (the console's message browser, a report's source) hands nothing
            # to a consumer: it is not counted as consumption.
            self.broker.stats.record_get(header.consumer_group, header.topic, len(result.messages))
        return self._result_reply(request, header, result)

    def _filter(
        self, header: PullMessageRequestHeader, expression: str | None, expression_type: str | None
    ) -> PullFilter:
        """The pull's filter: its subscription's, and on a retry topic with
        ``filterSupportRetry`` the group's SQL92 ones (raises ResponseError when refused)."""
        config = self.broker.config
        enabled = config.enable_property_filter
        if config.filter_support_retry and enabled and header.topic == retry_topic(header.consumer_group):
            by_topic = {}
            for sub in self.broker.clients.subscriptions_of(header.consumer_group):
                if is_sql92(sub.expression_type):
                    try:
                        by_topic[sub.topic] = sql_filter(sub.expression, sub.expression_type, enabled=True)
                    except ResponseError:  # refused on that topic's own pulls, not here
                        continue
            if by_topic:
                return PullFilter(records=retry_records_matching(by_topic))
        return pull_filter(expression, expression_type, enabled=enabled)

    def _replicated_topic(self, topic: str) -> TopicConfig | None:
        """On a slave, a topic its store holds queues of but whose config has not been copied
        yet (created on the master since the last sync, and the master died): readable, so
        that what was replicated can be read."""
        store = self.broker.store
        if not self.broker.config.is_slave or store is None or topic not in store.consume_queues.queues:
            return None
        count = max(store.consume_queues.queues[topic], default=0) + 1
        return TopicConfig(topic, count, count)

    def _group_refusal(self, header: PullMessageRequestHeader, conn: Any) -> tuple[int, str] | None:
        """Why the group may not pull here (response code, remark), or None when it may.

        An unknown group is created with defaults when autoCreateSubscriptionGroup allows
        it, as RocketMQ does on a pull.  RocketMQ checks consumeBroadcastEnable only for
        pulls that do not carry their subscription; the C++ push consumer carries it on
        every pull, so here the model its heartbeat registered is checked on every pull:
        otherwise the setting would never stop a C++ broadcasting consumer.
        """
        group = header.consumer_group
        config = self.broker.groups.find(group, auto_create=self.broker.config.auto_create_subscription_group)
        if config is None:
            return ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, group_not_exist_remark(group)
        if not config.consume_enable:
            return (
                ResponseCode.NO_PERMISSION,
                f"subscription group no permission, {group}: its consumeEnable is false",
            )
        if self._broadcast_refused(config, conn):
            return (
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{group}] can not consume by broadcast way: "
                "its consumeBroadcastEnable is false",
            )
        return None

    def _broadcast_refused(self, config: SubscriptionGroupConfig, conn: Any) -> bool:
        """Whether the puller consumes by broadcast and its group does not allow it."""
        if config.consume_broadcast_enable:
            return False
        return self.broker.clients.message_model(config.group_name, conn) == BROADCASTING

    async def _hold(self, header: PullMessageRequestHeader) -> None:
        """Hold a pull that found nothing: until a message arrives or the client's suspend
        timeout passes (long polling), or for shortPollingTimeMills (short polling).

        Both are capped at MAX_SUSPEND_MS, so the C++ client never times a held pull out.
        """
        config = self.broker.config
        if config.long_polling_enable:
            timeout_ms = min(header.suspend_timeout_millis, MAX_SUSPEND_MS)
            await self.hold.wait(header.topic, header.queue_id, timeout_ms / 1000)
        else:
            await asyncio.sleep(min(config.short_polling_time_mills, MAX_SUSPEND_MS) / 1000)

    def _result_reply(
        self, request: RemotingCommand, header: PullMessageRequestHeader, result: GetMessageResult
    ) -> RemotingCommand:
        status = result.status
        group = self.broker.groups.get(header.consumer_group)
        suggest = self._suggested_broker(group, result)
        if status is GetMessageStatus.FOUND:
            return self._reply(
                request, ResponseCode.SUCCESS, None, result, result.next_begin_offset, result.body, suggest
            )
        if status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING):
            return self._reply(
                request,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                None,
                result,
                result.next_begin_offset,
                b"",
                suggest,
            )
        moved = status.offset_moved or (
            status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE)
            and header.queue_offset != 0
        )
        if moved and self.broker.config.is_slave:
            # Not corrected here: a slave may only not have caught up that far yet.
            back = group.broker_id if group is not None else MASTER_ID
            return self._reply(
                request, ResponseCode.PULL_RETRY_IMMEDIATELY, None, result, header.queue_offset, b"", back
            )
        if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            if header.queue_offset != 0:
                return self._reply(request, ResponseCode.PULL_OFFSET_MOVED, None, result, 0, b"", suggest)
            return self._reply(
                request, ResponseCode.PULL_NOT_FOUND, None, result, header.queue_offset, b"", suggest
            )
        if status.offset_moved:
            return self._reply(
                request, ResponseCode.PULL_OFFSET_MOVED, None, result, result.next_begin_offset, b"", suggest
            )
        return self._reply(
            request, ResponseCode.PULL_NOT_FOUND, None, result, result.next_begin_offset, b"", suggest
        )

    def _suggested_broker(self, group: SubscriptionGroupConfig | None, result: GetMessageResult) -> int:
        """suggestWhichBrokerId: the master unless ``slaveReadEnable``; then the group's
        slow-consumer broker for a pull far behind, else the group's own broker."""
        config = self.broker.config
        if not config.slave_read_enable or group is None:
            return MASTER_ID
        if result.status is GetMessageStatus.FOUND and result.messages:
            store = self.broker.store
            assert store is not None
            pulled_to = int.from_bytes(
                result.messages[-1][PHYSICAL_OFFSET_POS : PHYSICAL_OFFSET_POS + 8], "big"
            )
            behind = store.commit_log.max_offset - pulled_to
            if behind > _MEMORY_BYTES * config.access_message_in_memory_max_ratio / 100:
                return group.which_broker_when_consume_slowly
        return group.broker_id

    @staticmethod
    def _reply(
        request: RemotingCommand,
        code: int,
        remark: str | None,
        result: GetMessageResult | None,
        next_offset: int,
        body: bytes = b"",
        suggest: int = MASTER_ID,
    ) -> RemotingCommand:
        header = PullMessageResponseHeader(
            next_begin_offset=next_offset,
            min_offset=result.min_offset if result is not None else 0,
            max_offset=result.max_offset if result is not None else 0,
            suggest_which_broker_id=suggest,
        )
        return request.response(code, remark, ext_fields=header.to_fields(), body=body)
