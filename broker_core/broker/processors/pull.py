"""PULL_MESSAGE (11) with long polling.

A pull that finds nothing new (and allows suspension) is held until a message arrives on
its queue or its suspend timeout passes, then read once more.  Arrivals come from the
store's dispatcher (``MessageStore.add_arrival_listener``), possibly on another thread,
and are handed to the event loop with ``call_soon_threadsafe``.

Every response carries suggestWhichBrokerId, nextBeginOffset, minOffset and maxOffset as
strings: the C++ client reads them for every response code.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker_core.broker.topics import is_readable
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.store.hashcode import tags_code
from broker_core.store.results import GetMessageResult, GetMessageStatus
from broker_core.tags import parse_tags

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
# The C++ client's async pull gives up after 30 s: never hold a pull that long.
MAX_SUSPEND_MS = 25_000


@dataclass(slots=True)
class PullHeader:
    group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_ms: int
    subscription: str

    @classmethod
    def parse(cls, request: RemotingCommand) -> PullHeader:
        f = request.ext_fields
        return cls(
            group=f.get("consumerGroup", ""),
            topic=f.get("topic", ""),
            queue_id=int(f.get("queueId") or 0),
            queue_offset=int(f.get("queueOffset") or 0),
            max_msg_nums=int(f.get("maxMsgNums") or 32),
            sys_flag=int(f.get("sysFlag") or 0),
            commit_offset=int(f.get("commitOffset") or 0),
            suspend_timeout_ms=int(f.get("suspendTimeoutMillis") or 15_000),
            subscription=f.get("subscription") or "*",
        )


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

    def _wake(self, keys: list[tuple[str, int]]) -> None:
        for key in keys:
            for future in self._waiting.pop(key, []):
                if not future.done():
                    future.set_result(None)

    async def wait(self, topic: str, queue_id: int, timeout_s: float) -> None:
        future: asyncio.Future[None] = self._loop.create_future()
        self._waiting.setdefault((topic, queue_id), []).append(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
            waiting = self._waiting.get((topic, queue_id))
            if waiting is not None and future in waiting:
                waiting.remove(future)
                if not waiting:
                    del self._waiting[(topic, queue_id)]


class PullProcessor:
    def __init__(self, broker: BrokerController, hold: PullHoldService) -> None:
        self.broker = broker
        self.hold = hold

    async def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            header = PullHeader.parse(request)
        except ValueError as exc:
            return self._reply(request, ResponseCode.SYSTEM_ERROR, f"malformed pull header: {exc}", None, 0)
        config = self.broker.topics.get(header.topic)
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
        if header.sys_flag & FLAG_SUBSCRIPTION:
            tags = parse_tags(header.subscription)
            codes = None if tags is None else frozenset(tags_code(t) for t in tags)
        else:
            subscription = self.broker.clients.subscription(header.group, header.topic)
            if subscription is None:
                return self._reply(
                    request,
                    ResponseCode.SUBSCRIPTION_NOT_EXIST,
                    f"the consumer's subscription not exist, group: {header.group}",
                    None,
                    header.queue_offset,
                )
            codes = subscription.tag_codes
        store = self.broker.store
        assert store is not None
        if header.sys_flag & FLAG_COMMIT_OFFSET and header.commit_offset >= 0:
            store.consumer_offsets.commit_offset(
                getattr(conn, "remote_address", ""),
                header.group,
                header.topic,
                header.queue_id,
                header.commit_offset,
            )
        result = store.get_message(
            header.topic, header.queue_id, header.queue_offset, header.max_msg_nums, codes
        )
        if (
            result.status.no_new_message
            and header.sys_flag & FLAG_SUSPEND
            and self.broker.config.long_polling_enable
            and header.queue_offset == result.next_begin_offset
        ):
            await self.hold.wait(
                header.topic, header.queue_id, min(header.suspend_timeout_ms, MAX_SUSPEND_MS) / 1000
            )
            result = store.get_message(
                header.topic, header.queue_id, header.queue_offset, header.max_msg_nums, codes
            )
        if result.status is GetMessageStatus.FOUND:
            self.broker.stats.record_get(header.group, header.topic, len(result.messages))
        return self._result_reply(request, header, result)

    def _result_reply(
        self, request: RemotingCommand, header: PullHeader, result: GetMessageResult
    ) -> RemotingCommand:
        status = result.status
        if status is GetMessageStatus.FOUND:
            return self._reply(
                request, ResponseCode.SUCCESS, None, result, result.next_begin_offset, result.body
            )
        if status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING):
            return self._reply(
                request, ResponseCode.PULL_RETRY_IMMEDIATELY, None, result, result.next_begin_offset
            )
        if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
            if header.queue_offset != 0:
                return self._reply(request, ResponseCode.PULL_OFFSET_MOVED, None, result, 0)
            return self._reply(request, ResponseCode.PULL_NOT_FOUND, None, result, header.queue_offset)
        if status.offset_moved:
            return self._reply(
                request, ResponseCode.PULL_OFFSET_MOVED, None, result, result.next_begin_offset
            )
        return self._reply(request, ResponseCode.PULL_NOT_FOUND, None, result, result.next_begin_offset)

    @staticmethod
    def _reply(
        request: RemotingCommand,
        code: int,
        remark: str | None,
        result: GetMessageResult | None,
        next_offset: int,
        body: bytes = b"",
    ) -> RemotingCommand:
        return request.response(
            code,
            remark,
            ext_fields={
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": str(next_offset),
                "minOffset": str(result.min_offset if result is not None else 0),
                "maxOffset": str(result.max_offset if result is not None else 0),
            },
            body=body,
        )
