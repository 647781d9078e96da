"""POP_MESSAGE (200050), ACK_MESSAGE (200051), CHANGE_MESSAGE_INVISIBLETIME (200053) and
QUIVER_GET_POP_STATUS: RocketMQ 5's pop consumption over the remoting protocol.

The gRPC proxy serves RocketMQ 5 clients' ReceiveMessage / AckMessage /
ChangeInvisibleDuration with these; any remoting client may use them too.

A pop answers SUCCESS with the records in the body (as a pull does; each record's
reconsume-times field is its delivery attempt - 1) and the batch's ``popTime`` and
``invisibleTime`` in the header, from which each message's receipt handle is built
(``broker_core.model.receipt``).  With nothing to hand out the pop is held up to its
``pollTime`` (woken by new messages, a FIFO group freed by an ack, or an in-flight message
coming back), then answered PULL_NOT_FOUND.  An ack or change naming a hand-out that is no
longer current (the message was handed out again, or already acked) is answered
NO_MESSAGE with the reason: RocketMQ 5 clients report it as an invalid receipt handle.

Pops are served by masters only; a group must be allowed to consume (as for pulls), and
a FIFO group is one whose config says ``consumeMessageOrderly`` or whose pop asks ``order``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.filters import pull_filter
from broker_core.broker.groups import group_not_exist_remark
from broker_core.broker.pop.book import AckOutcome, InFlight
from broker_core.broker.pop.service import PopService
from broker_core.broker.processors.pull import MAX_SUSPEND_MS, PullHoldService
from broker_core.errors import ResponseError
from broker_core.model.receipt import ReceiptHandle, ReceiptHandleError
from broker_core.model.topicconfig import is_readable
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.popheaders import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

# RocketMQ 5 bounds: at most 32 messages a pop; invisible time up to 12 h.
MAX_POP_NUMS = 32
MAX_INVISIBLE_MS = 12 * 3600 * 1000


class PopProcessor:
    def __init__(self, broker: BrokerController, hold: PullHoldService, service: PopService) -> None:
        self.broker = broker
        self.hold = hold
        self.service = service

    # -- POP_MESSAGE ----------------------------------------------------------------------------

    async def pop(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            header = PopMessageRequestHeader.from_fields(request.ext_fields)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed pop header: {exc}")
        if not 0 < header.max_msg_nums <= MAX_POP_NUMS:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"maxMsgNums must be 1..{MAX_POP_NUMS}, not {header.max_msg_nums}"
            )
        if not 0 < header.invisible_time <= MAX_INVISIBLE_MS:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"invisibleTime must be 1..{MAX_INVISIBLE_MS} ms, not {header.invisible_time}",
            )
        if self.broker.config.is_slave:
            return request.response(
                ResponseCode.NO_PERMISSION, "a slave does not serve pops: pop from the master"
            )
        group = self.broker.groups.find(
            header.consumer_group, auto_create=self.broker.config.auto_create_subscription_group
        )
        if group is None:
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, group_not_exist_remark(header.consumer_group)
            )
        if not group.consume_enable:
            return request.response(
                ResponseCode.NO_PERMISSION,
                f"subscription group no permission, {header.consumer_group}: its consumeEnable is false",
            )
        topic = self.broker.topics.get(header.topic)
        if topic is None:
            return request.response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not is_readable(topic.perm) or not is_readable(self.broker.config.broker_permission):
            return request.response(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        queue_count = topic.read_queue_nums
        if header.queue_id >= queue_count:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic {header.topic} has {queue_count} read queues",
            )
        queue_ids = list(range(queue_count)) if header.queue_id < 0 else [header.queue_id]
        try:
            choose = pull_filter(
                header.exp, header.exp_type, enabled=self.broker.config.enable_property_filter
            )
        except ResponseError as exc:
            return request.response(exc.code, exc.remark)
        fifo = header.order or group.consume_message_orderly
        max_attempts = group.retry_max_times + 1
        service = self.service
        clock = self.broker.clock_ms
        deadline = clock() + min(max(header.poll_time, 0), MAX_SUSPEND_MS)
        while True:
            outcome = await service.pop(
                header.consumer_group,
                header.topic,
                queue_ids,
                header.max_msg_nums,
                header.invisible_time,
                choose,
                fifo=fifo,
                max_attempts=max_attempts,
            )
            now = clock()
            if outcome.messages or now >= deadline or getattr(conn, "closed", False):
                break
            wait_until = deadline
            comes_back = service.next_visible_at(header.consumer_group, header.topic, queue_ids)
            if comes_back is not None:
                wait_until = min(wait_until, comes_back + 1)
            await self.hold.wait_any([(header.topic, q) for q in queue_ids], max(wait_until - now, 1) / 1000)
        if not outcome.messages:
            return request.response(ResponseCode.PULL_NOT_FOUND, "no new message")
        self.broker.stats.record_get(header.consumer_group, header.topic, len(outcome.messages))
        by_queue: dict[int, list[int]] = {}
        for message in outcome.messages:
            by_queue.setdefault(message.queue_id, []).append(message.offset)
        answer = PopMessageResponseHeader(
            pop_time=outcome.pop_time,
            invisible_time=header.invisible_time,
            rest_num=outcome.rest,
            start_offset_info=";".join(f"0 {q} {outcome.start_offsets.get(q, 0)}" for q in by_queue),
            msg_offset_info=";".join(f"0 {q} {','.join(map(str, offs))}" for q, offs in by_queue.items()),
        )
        return request.response(
            ext_fields=answer.to_fields(), body=b"".join(m.record for m in outcome.messages)
        )

    # -- ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME ----------------------------------------------

    def _handle(self, extra_info: str, queue_id: int, offset: int) -> ReceiptHandle:
        handle = ReceiptHandle.decode(extra_info)
        if handle.queue_id != queue_id or handle.offset != offset:
            raise ReceiptHandleError(
                f"extraInfo names queue {handle.queue_id} offset {handle.offset}, "
                f"the request queue {queue_id} offset {offset}"
            )
        if handle.broker_name != self.broker.config.broker_name:
            raise ReceiptHandleError(
                f"the receipt handle is of broker {handle.broker_name}, not {self.broker.config.broker_name}"
            )
        return handle

    @staticmethod
    def _refusal(request: RemotingCommand, outcome: str) -> RemotingCommand:
        why = (
            "the message was handed out again since (the receipt handle expired)"
            if outcome == AckOutcome.STALE
            else "the message is not in flight (already acked, or never popped)"
        )
        return request.response(ResponseCode.NO_MESSAGE, why)

    async def ack(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            header = AckMessageRequestHeader.from_fields(request.ext_fields)
            handle = self._handle(header.extra_info, header.queue_id, header.offset)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed ack: {exc}")
        outcome = self.service.ack(header.consumer_group, header.topic, handle)
        if outcome != AckOutcome.OK:
            return self._refusal(request, outcome)
        return request.response()

    async def change_invisible_time(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            header = ChangeInvisibleTimeRequestHeader.from_fields(request.ext_fields)
            handle = self._handle(header.extra_info, header.queue_id, header.offset)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed change of invisible time: {exc}")
        if not 0 <= header.invisible_time <= MAX_INVISIBLE_MS:  # 0: visible again at once
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"invisibleTime must be 0..{MAX_INVISIBLE_MS} ms, not {header.invisible_time}",
            )
        changed = self.service.change(header.consumer_group, header.topic, handle, header.invisible_time)
        if not isinstance(changed, InFlight):
            return self._refusal(request, changed)
        answer = ChangeInvisibleTimeResponseHeader(
            pop_time=changed.pop_time, invisible_time=header.invisible_time
        )
        return request.response(ext_fields=answer.to_fields())

    # -- QUIVER_GET_POP_STATUS -------------------------------------------------------------------

    async def status(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Every pop book of the broker (or of ``consumerGroup``), with each group's acked
        rate over the last minute and whether it is a FIFO group."""
        group = request.ext_fields.get("consumerGroup") or None
        rows = self.service.status(group)
        groups = sorted({row["group"] for row in rows})
        body = {
            "books": rows,
            "groups": {
                g: {
                    "ackedTps": round(self.service.acked_rate(g), 3),
                    "fifo": bool((config := self.broker.groups.get(g)) and config.consume_message_orderly),
                }
                for g in groups
            },
        }
        return request.response(body=orjson.dumps(body))
