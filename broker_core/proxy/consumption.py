"""The consumer RPCs of ``MessagingService``: receive (pop), ack, change invisible
duration, forward to the DLQ, query assignment, and the consumer's settings.

Each RPC becomes the brokers' pop requests (``broker_core.broker.processors.pop``):

- ReceiveMessage pops (``queueId`` -1: every queue of one broker) from the broker the
  request's queue names (the one QueryAssignment handed a push consumer), else from the
  topic's masters in turn, held up to the request's long-polling timeout.  The answer
  streams a status, the delivery time, then the messages, each with its receipt handle
  (``broker_core.model.receipt``, with the commit-log offset), attempt and body digest.
  A push consumer (``auto_renew``) names no invisible duration; it gets
  ``DEFAULT_INVISIBLE_MS``.
- AckMessage and ChangeInvisibleDuration send the handle's broker ACK_MESSAGE /
  CHANGE_MESSAGE_INVISIBLETIME; a handle that is no longer current is INVALID_RECEIPT_HANDLE.
- ForwardMessageToDeadLetterQueue stores the message in the group's DLQ (the broker's
  CONSUMER_SEND_MSG_BACK with delay level -1) and acks it.
- QueryAssignment gives a push consumer one queue per master broker (id -1: all of its
  queues), so its receives spread over the brokers.
- A consumer's Settings come back with the group's FIFO flag (``consumeMessageOrderly``)
  and its retry policy: ``retryMaxTimes + 1`` attempts, RocketMQ's backoff steps.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from broker_core.client.admin import AdminClient
from broker_core.client.routes import TopicRoute
from broker_core.errors import AdminError
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.message import RecordFormatError, iter_records
from broker_core.model.receipt import ReceiptHandle, ReceiptHandleError
from broker_core.model.topicconfig import PERM_READ
from broker_core.proxy.convert import (
    MAX_LONG_POLLING_MS,
    duration,
    duration_millis,
    long_polling_ms,
    request_filter,
    status,
    timestamp,
    v2_message,
)
from broker_core.proxy.stubs import load
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.popheaders import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

log = logging.getLogger(__name__)

pb, svc, _grpc = load()

# What a push consumer's messages stay invisible for (RocketMQ proxy's defaultInvisibleTimeMills).
DEFAULT_INVISIBLE_MS = 60_000
MAX_BATCH = 32
MAX_INVISIBLE_MS = 12 * 3600 * 1000
GROUP_CONFIG_TTL_S = 10.0
# RocketMQ 5's default retry backoff for a consumer group, step by step (1 s, 5 s, 10 s, ...).
RETRY_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)

Route = Callable[[str], Awaitable[TopicRoute]]


_POP_CODES: dict[int, int] = {
    ResponseCode.PULL_NOT_FOUND: pb.MESSAGE_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
}


class Consumption:
    """The consumer RPCs over the brokers of one cluster."""

    def __init__(self, route: Route, endpoints: Callable[[], Any]) -> None:
        self._route = route
        self._endpoints = endpoints
        self._turn = itertools.count()
        self._groups: dict[tuple[str, str], tuple[SubscriptionGroupConfig, float]] = {}

    # -- helpers -----------------------------------------------------------------------------

    async def _masters(self, topic: str) -> dict[str, str] | Any:
        """The topic's readable masters by broker name, or a status saying why none."""
        try:
            route = await self._route(topic)
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return status(pb.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
            return status(pb.INTERNAL_SERVER_ERROR, str(exc))
        masters = route.master_addrs()
        readable = {
            qd.broker_name for qd in route.queue_datas if qd.perm & PERM_READ and qd.read_queue_nums > 0
        }
        found = {name: addr for name, addr in masters.items() if name in readable}
        if not found:
            return status(pb.FORBIDDEN, f"topic {topic!r} has no readable queue on a master")
        return found

    async def group_config(self, client: AdminClient, addr: str, group: str) -> SubscriptionGroupConfig:
        """The group's config on the broker at ``addr`` (defaults when it has none yet)."""
        cached = self._groups.get((addr, group))
        if cached is not None and time.monotonic() - cached[1] < GROUP_CONFIG_TTL_S:
            return cached[0]
        try:
            config = (await client.subscription_groups(addr)).get(group) or SubscriptionGroupConfig(group)
        except AdminError as exc:
            log.warning("could not read group %s's config from %s: %s", group, addr, exc)
            config = SubscriptionGroupConfig(group)
        self._groups[(addr, group)] = (config, time.monotonic())
        return config

    async def _handle_addr(self, topic: str, receipt_handle: str) -> tuple[ReceiptHandle, str] | Any:
        """The decoded handle and its broker's master address, or a status saying why not."""
        try:
            handle = ReceiptHandle.decode(receipt_handle)
        except ReceiptHandleError as exc:
            return status(pb.INVALID_RECEIPT_HANDLE, str(exc))
        masters = await self._masters(topic)
        if not isinstance(masters, dict):
            return masters
        addr = masters.get(handle.broker_name)
        if addr is None:
            return status(
                pb.INVALID_RECEIPT_HANDLE, f"broker {handle.broker_name!r} of the handle serves no {topic!r}"
            )
        return handle, addr

    # -- ReceiveMessage ---------------------------------------------------------------------------

    async def receive(self, request: Any, client: AdminClient) -> AsyncIterator[Any]:
        group = request.group.name
        topic = request.message_queue.topic.name
        if not group:
            yield svc.ReceiveMessageResponse(
                status=status(pb.ILLEGAL_CONSUMER_GROUP, "the request names no group")
            )
            return
        batch = request.batch_size or 1
        if not 0 < batch <= MAX_BATCH:
            yield svc.ReceiveMessageResponse(
                status=status(pb.BAD_REQUEST, f"batch_size must be 1..{MAX_BATCH}, not {batch}")
            )
            return
        if request.HasField("invisible_duration"):
            invisible_ms = duration_millis(request.invisible_duration)
        elif request.auto_renew:
            invisible_ms = DEFAULT_INVISIBLE_MS
        else:
            invisible_ms = 0
        if not 0 < invisible_ms <= MAX_INVISIBLE_MS:
            yield svc.ReceiveMessageResponse(
                status=status(
                    pb.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be 1 ms..12 h, not {invisible_ms} ms"
                )
            )
            return
        expression, expression_type = request_filter(request)
        poll_ms = long_polling_ms(request)
        masters = await self._masters(topic)
        if not isinstance(masters, dict):
            yield svc.ReceiveMessageResponse(status=masters)
            return
        wanted = request.message_queue.broker.name
        if wanted in masters:
            broker_name = wanted
        else:
            names = sorted(masters)
            broker_name = names[next(self._turn) % len(names)]
        addr = masters[broker_name]
        header = PopMessageRequestHeader(
            group,
            topic,
            queue_id=-1,
            max_msg_nums=batch,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
            born_time=int(time.time() * 1000),
            exp_type=expression_type,
            exp=expression,
        )
        try:
            response = await client.requests.pop_message(addr, header, timeout_s=poll_ms / 1000 + 5)
        except AdminError as exc:
            yield svc.ReceiveMessageResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
            return
        if response.code != ResponseCode.SUCCESS:
            code = _POP_CODES.get(response.code, pb.INTERNAL_SERVER_ERROR)
            yield svc.ReceiveMessageResponse(status=status(code, response.remark or "no message"))
            return
        try:
            answer = PopMessageResponseHeader.from_fields(response.ext_fields)
            stored = list(iter_records(response.body))
        except (ValueError, RecordFormatError) as exc:
            yield svc.ReceiveMessageResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, f"broker answered garbage: {exc}")
            )
            return
        namespace = request.group.resource_namespace
        yield svc.ReceiveMessageResponse(status=status(pb.OK))
        yield svc.ReceiveMessageResponse(delivery_timestamp=timestamp(int(time.time() * 1000)))
        for message in stored:
            handle = ReceiptHandle(
                broker_name,
                message.queue_id,
                message.queue_offset,
                answer.pop_time,
                answer.invisible_time,
                commit_log_offset=message.commit_log_offset,
            )
            yield svc.ReceiveMessageResponse(
                message=v2_message(message, namespace, handle.encode(), answer.invisible_time)
            )

    # -- AckMessage ----------------------------------------------------------------------------------

    async def ack(self, request: Any, client: AdminClient) -> Any:
        group, topic = request.group.name, request.topic.name
        if not request.entries:
            return svc.AckMessageResponse(status=status(pb.BAD_REQUEST, "the request acks nothing"))
        # Each entry's ack goes to its own broker; they are sent together, not one by one.
        outcomes = await asyncio.gather(
            *(self._ack_one(client, group, topic, e.receipt_handle) for e in request.entries)
        )
        entries = [
            svc.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=o)
            for e, o in zip(request.entries, outcomes, strict=True)
        ]
        codes = {e.status.code for e in entries}
        if codes == {pb.OK}:
            overall = status(pb.OK)
        elif len(codes) == 1:
            overall = entries[0].status
        else:
            overall = status(pb.MULTIPLE_RESULTS, "some entries were not acked: see each entry")
        return svc.AckMessageResponse(status=overall, entries=entries)

    async def _ack_one(self, client: AdminClient, group: str, topic: str, receipt_handle: str) -> Any:
        found = await self._handle_addr(topic, receipt_handle)
        if not isinstance(found, tuple):
            return found
        handle, addr = found
        header = AckMessageRequestHeader(group, topic, handle.queue_id, handle.extra_info(), handle.offset)
        try:
            response = await client.requests.ack_message(addr, header)
        except AdminError as exc:
            return status(pb.PROXY_TIMEOUT, str(exc))
        return _handle_status(response.code, response.remark)

    # -- ChangeInvisibleDuration -----------------------------------------------------------------------

    async def change_invisible_duration(self, request: Any, client: AdminClient) -> Any:
        group, topic = request.group.name, request.topic.name
        invisible_ms = duration_millis(request.invisible_duration)
        # 0 is allowed here (visible again at once): how a consumer without a backoff
        # policy of its own gives a message back (the Node client does).
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            return svc.ChangeInvisibleDurationResponse(
                status=status(
                    pb.ILLEGAL_INVISIBLE_TIME, f"invisible duration must be 0 ms..12 h, not {invisible_ms} ms"
                )
            )
        found = await self._handle_addr(topic, request.receipt_handle)
        if not isinstance(found, tuple):
            return svc.ChangeInvisibleDurationResponse(status=found)
        handle, addr = found
        header = ChangeInvisibleTimeRequestHeader(
            group, topic, handle.queue_id, handle.extra_info(), handle.offset, invisible_ms
        )
        try:
            response = await client.requests.change_invisible_time(addr, header)
        except AdminError as exc:
            return svc.ChangeInvisibleDurationResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
        if response.code != ResponseCode.SUCCESS:
            return svc.ChangeInvisibleDurationResponse(status=_handle_status(response.code, response.remark))
        answer = ChangeInvisibleTimeResponseHeader.from_fields(response.ext_fields)
        renewed = ReceiptHandle(
            handle.broker_name,
            handle.queue_id,
            handle.offset,
            answer.pop_time,
            answer.invisible_time,
            commit_log_offset=handle.commit_log_offset,
        )
        return svc.ChangeInvisibleDurationResponse(status=status(pb.OK), receipt_handle=renewed.encode())

    # -- ForwardMessageToDeadLetterQueue ---------------------------------------------------------------

    async def forward_to_dlq(self, request: Any, client: AdminClient) -> Any:
        group, topic = request.group.name, request.topic.name
        found = await self._handle_addr(topic, request.receipt_handle)
        if not isinstance(found, tuple):
            return svc.ForwardMessageToDeadLetterQueueResponse(status=found)
        handle, addr = found
        if handle.commit_log_offset < 0:
            return svc.ForwardMessageToDeadLetterQueueResponse(
                status=status(pb.INVALID_RECEIPT_HANDLE, "the receipt handle carries no commit-log offset")
            )
        try:
            response = await client.requests.consumer_send_msg_back(
                addr,
                commit_log_offset=handle.commit_log_offset,
                group=group,
                delay_level=-1,
                origin_msg_id=request.message_id,
                origin_topic=topic,
                max_reconsume_times=max(request.max_delivery_attempts - 1, 0),
            )
            if response.code != ResponseCode.SUCCESS:
                return svc.ForwardMessageToDeadLetterQueueResponse(
                    status=status(pb.INTERNAL_SERVER_ERROR, response.remark or f"refused ({response.code})")
                )
            acked = await self._ack_one(client, group, topic, request.receipt_handle)
        except AdminError as exc:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=status(pb.PROXY_TIMEOUT, str(exc)))
        if acked.code not in (pb.OK, pb.INVALID_RECEIPT_HANDLE):
            return svc.ForwardMessageToDeadLetterQueueResponse(status=acked)
        return svc.ForwardMessageToDeadLetterQueueResponse(status=status(pb.OK))

    # -- QueryAssignment -------------------------------------------------------------------------------

    async def query_assignment(self, request: Any) -> Any:
        topic = request.topic.name
        masters = await self._masters(topic)
        if not isinstance(masters, dict):
            return svc.QueryAssignmentResponse(status=masters)
        endpoints = self._endpoints()
        assignments = [
            pb.Assignment(
                message_queue=pb.MessageQueue(
                    topic=request.topic,
                    id=-1,
                    permission=pb.READ_WRITE,
                    broker=pb.Broker(name=name, id=0, endpoints=endpoints),
                )
            )
            for name in sorted(masters)
        ]
        return svc.QueryAssignmentResponse(status=status(pb.OK), assignments=assignments)

    # -- settings --------------------------------------------------------------------------------------

    async def complete_settings(self, settings: Any, answer: Any, client: AdminClient) -> None:
        """Fill a consumer's settings answer: FIFO flag, retry policy, receive limits."""
        group = settings.subscription.group.name
        config = SubscriptionGroupConfig(group)
        for subscription in settings.subscription.subscriptions:
            masters = await self._masters(subscription.topic.name)
            if isinstance(masters, dict) and masters:
                config = await self.group_config(client, masters[sorted(masters)[0]], group)
                break
        answer.subscription.fifo = config.consume_message_orderly
        answer.subscription.receive_batch_size = MAX_BATCH
        answer.subscription.long_polling_timeout.CopyFrom(duration(MAX_LONG_POLLING_MS))
        answer.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=config.retry_max_times + 1,
                customized_backoff=pb.CustomizedBackoff(next=[duration(s * 1000) for s in RETRY_BACKOFF_S]),
            )
        )


def _handle_status(code: int, remark: str | None) -> Any:
    """The v2 status of a broker's answer to an ack or a change of invisible time."""
    if code == ResponseCode.SUCCESS:
        return status(pb.OK)
    if code in (ResponseCode.NO_MESSAGE, ResponseCode.SYSTEM_ERROR):
        return status(pb.INVALID_RECEIPT_HANDLE, remark or "the receipt handle is not current")
    if code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
        return status(pb.CONSUMER_GROUP_NOT_FOUND, remark or "no such group")
    return status(pb.INTERNAL_SERVER_ERROR, remark or f"refused ({code})")
