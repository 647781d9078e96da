"""The offset RPCs of ``MessagingService`` and PullMessage: what RocketMQ 5's pull consumers
(Java's ``PullConsumer`` / ``LitePullConsumer``) use to read a queue by offset and keep
their group's place in it, with no pop and no receipt handles.

Each RPC names one queue (topic, broker name, queue id, as QueryRoute gave it) and becomes
one request to that broker's master:

- UpdateOffset: UPDATE_CONSUMER_OFFSET, the group's committed offset of the queue.
- GetOffset: QUERY_CONSUMER_OFFSET; OFFSET_NOT_FOUND when the broker has none for the group
  (QUERY_NOT_FOUND).  A new group on a queue that has lost nothing to expiry is told 0, as
  the broker tells any new group there (``broker_core.broker.processors.offsets``, RocketMQ's
  rule for a young queue), so it reads from the start; a client told OFFSET_NOT_FOUND
  starts at the end (QueryOffset END), as Java's does.
- QueryOffset: BEGINNING is GET_MIN_OFFSET, END GET_MAX_OFFSET, TIMESTAMP
  SEARCH_OFFSET_BY_TIMESTAMP (the first message stored at or after it).
- PullMessage: PULL_MESSAGE with the request's tag expression and, unless its long-polling
  timeout is 0, the suspend flag, so a pull at the end is held at the broker until a message
  arrives (up to ``MAX_LONG_POLLING_MS``).  It never commits an offset.  The answer streams,
  as RocketMQ's proxy does: a status, the messages (v2 form, without receipt handle or
  invisible duration: nothing was popped), then ``next_offset``.  Nothing new or nothing
  matching is MESSAGE_NOT_FOUND, an offset outside the queue ILLEGAL_OFFSET (both with the
  offset to pull from next); a refusal is its status alone.

A bad request (no group, an unknown broker name, a queue id the route does not have, a
negative offset to commit, a batch size outside 1..``MAX_PULL_BATCH``) is answered with a
status, as is every broker refusal and a broker that does not answer: never an exception.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError, AdminUnreachableError, BrokerRefusedError, ClientError
from broker_core.model.message import RecordFormatError, iter_records
from broker_core.proxy.consumption import Route
from broker_core.proxy.convert import (
    long_polling_ms,
    request_filter,
    status,
    to_millis,
    v2_message,
)
from broker_core.proxy.stubs import load
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker_core.tags import parse_tags

pb, svc, _grpc = load()

# The most messages one pull returns (RocketMQ's maxTransferCountOnMessageInMemory; the
# Java client asks for 32).
MAX_PULL_BATCH = 32
# Seconds a broker request may take beyond the time it is held.
REQUEST_MARGIN_S = 5.0

# v2 statuses of the broker refusals a request for one queue can meet.
_REFUSALS: dict[int, int] = {
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: pb.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
}


def refusal(code: int, remark: str | None) -> Any:
    """The v2 status of a broker's refusal (INTERNAL_SERVER_ERROR for one without a match)."""
    return status(_REFUSALS.get(code, pb.INTERNAL_SERVER_ERROR), remark or f"the broker refused ({code})")


def _failure(exc: ClientError | AdminError) -> Any:
    """The v2 status of a request that raised: a refusal, or no answer at all."""
    if isinstance(exc, BrokerRefusedError):
        return refusal(exc.code, exc.remark or str(exc))
    if isinstance(exc, AdminUnreachableError):
        return status(pb.PROXY_TIMEOUT, str(exc))
    return status(pb.INTERNAL_SERVER_ERROR, str(exc))


class OffsetRpcs:
    """UpdateOffset, GetOffset, QueryOffset and PullMessage over the brokers of one cluster."""

    def __init__(self, route: Route) -> None:
        self._route = route

    async def _queue_addr(self, queue: Any) -> tuple[str, str, int] | Any:
        """(master address, topic, queue id) of the request's ``message_queue``, or the
        status saying why it names no queue of the cluster."""
        topic = queue.topic.name
        if not topic:
            return status(pb.ILLEGAL_TOPIC, "the request names no topic")
        try:
            route = await self._route(topic)
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return status(pb.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
            return status(pb.INTERNAL_SERVER_ERROR, str(exc))
        broker_name = queue.broker.name
        addr = route.master_addrs().get(broker_name)
        if addr is None:
            return status(pb.BAD_REQUEST, f"no master broker named {broker_name!r} serves {topic!r}")
        counts = [
            max(qd.read_queue_nums, qd.write_queue_nums)
            for qd in route.queue_datas
            if qd.broker_name == broker_name
        ]
        if not 0 <= queue.id < max(counts, default=0):
            return status(pb.BAD_REQUEST, f"{topic!r} has no queue {queue.id} on broker {broker_name!r}")
        return addr, topic, queue.id

    # -- UpdateOffset ----------------------------------------------------------------------------

    async def update_offset(self, request: Any, client: AdminClient) -> Any:
        group = request.group.name
        if not group:
            return svc.UpdateOffsetResponse(
                status=status(pb.ILLEGAL_CONSUMER_GROUP, "the request names no group")
            )
        if request.offset < 0:
            return svc.UpdateOffsetResponse(
                status=status(pb.ILLEGAL_OFFSET, f"an offset is never negative, not {request.offset}")
            )
        found = await self._queue_addr(request.message_queue)
        if not isinstance(found, tuple):
            return svc.UpdateOffsetResponse(status=found)
        addr, topic, queue_id = found
        header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, request.offset)
        try:
            response = await client.requests.update_consumer_offset(addr, header)
        except (AdminError, ClientError) as exc:
            return svc.UpdateOffsetResponse(status=_failure(exc))
        if response.code != ResponseCode.SUCCESS:
            return svc.UpdateOffsetResponse(status=refusal(response.code, response.remark))
        return svc.UpdateOffsetResponse(status=status(pb.OK))

    # -- GetOffset -------------------------------------------------------------------------------

    async def get_offset(self, request: Any, client: AdminClient) -> Any:
        group = request.group.name
        if not group:
            return svc.GetOffsetResponse(
                status=status(pb.ILLEGAL_CONSUMER_GROUP, "the request names no group")
            )
        found = await self._queue_addr(request.message_queue)
        if not isinstance(found, tuple):
            return svc.GetOffsetResponse(status=found)
        addr, topic, queue_id = found
        header = QueryConsumerOffsetRequestHeader(group, topic, queue_id)
        try:
            response, answer = await client.requests.query_consumer_offset(addr, header)
        except (AdminError, ClientError) as exc:
            return svc.GetOffsetResponse(status=_failure(exc))
        except ValueError as exc:  # an offset that does not parse
            return svc.GetOffsetResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, f"broker answered garbage: {exc}")
            )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return svc.GetOffsetResponse(
                status=status(pb.OFFSET_NOT_FOUND, f"group {group!r} has no offset in {topic}:{queue_id}")
            )
        if response.code != ResponseCode.SUCCESS:
            return svc.GetOffsetResponse(status=refusal(response.code, response.remark))
        return svc.GetOffsetResponse(status=status(pb.OK), offset=answer.offset)

    # -- QueryOffset -----------------------------------------------------------------------------

    async def query_offset(self, request: Any, client: AdminClient) -> Any:
        policy = request.query_offset_policy
        if policy == pb.TIMESTAMP and not request.HasField("timestamp"):
            return svc.QueryOffsetResponse(
                status=status(pb.BAD_REQUEST, "the TIMESTAMP policy needs a timestamp")
            )
        if policy not in (pb.BEGINNING, pb.END, pb.TIMESTAMP):
            return svc.QueryOffsetResponse(
                status=status(pb.BAD_REQUEST, f"unknown query offset policy {policy}")
            )
        found = await self._queue_addr(request.message_queue)
        if not isinstance(found, tuple):
            return svc.QueryOffsetResponse(status=found)
        addr, topic, queue_id = found
        requests = client.requests
        try:
            if policy == pb.BEGINNING:
                offset = await requests.get_min_offset(addr, topic, queue_id)
            elif policy == pb.END:
                offset = await requests.get_max_offset(addr, topic, queue_id)
            else:
                when = to_millis(request.timestamp)
                offset = await requests.search_offset_by_timestamp(addr, topic, queue_id, when)
        except (AdminError, ClientError) as exc:
            return svc.QueryOffsetResponse(status=_failure(exc))
        return svc.QueryOffsetResponse(status=status(pb.OK), offset=offset)

    # -- PullMessage -----------------------------------------------------------------------------

    async def pull(self, request: Any, client: AdminClient) -> AsyncIterator[Any]:
        group = request.group.name
        if not group:
            yield svc.PullMessageResponse(
                status=status(pb.ILLEGAL_CONSUMER_GROUP, "the request names no group")
            )
            return
        batch = request.batch_size
        if not 0 < batch <= MAX_PULL_BATCH:
            yield svc.PullMessageResponse(
                status=status(pb.BAD_REQUEST, f"batch_size must be 1..{MAX_PULL_BATCH}, not {batch}")
            )
            return
        expression, expression_type = request_filter(request)
        poll_ms = long_polling_ms(request)
        found = await self._queue_addr(request.message_queue)
        if not isinstance(found, tuple):
            yield svc.PullMessageResponse(status=found)
            return
        addr, topic, queue_id = found
        flags = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if poll_ms > 0 else PullSysFlag(0))
        header = PullMessageRequestHeader(
            group,
            topic,
            queue_id,
            # A negative offset is below every queue's minimum: the broker answers it as
            # too small, with the offset to pull from instead.
            request.offset,
            max_msg_nums=batch,
            sys_flag=flags,
            suspend_timeout_millis=poll_ms,
            subscription=expression,
            expression_type=expression_type,
        )
        try:
            reply = await client.requests.pull_message(
                addr, header, timeout_s=poll_ms / 1000 + REQUEST_MARGIN_S
            )
            next_offset = reply.header.next_offset_or(request.offset)
            stored = list(iter_records(reply.body)) if reply.code == ResponseCode.SUCCESS else []
        except (AdminError, ClientError) as exc:
            yield svc.PullMessageResponse(status=_failure(exc))
            return
        except (ValueError, RecordFormatError) as exc:
            yield svc.PullMessageResponse(
                status=status(pb.INTERNAL_SERVER_ERROR, f"broker answered garbage: {exc}")
            )
            return
        if reply.code == ResponseCode.SUCCESS:
            # The broker filtered by the tags' hash codes; a hash shared by another tag
            # lets its message through, so filter again by the tag itself, as clients do.
            tags = parse_tags(expression)
            stored = [m for m in stored if tags is None or m.tags in tags]
            if stored:
                outcome = status(pb.OK)
            else:
                outcome = status(pb.MESSAGE_NOT_FOUND, "no message matches the filter expression")
        elif reply.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
            outcome = status(pb.MESSAGE_NOT_FOUND, "no new message")
        elif reply.code == ResponseCode.PULL_OFFSET_MOVED:
            outcome = status(
                pb.ILLEGAL_OFFSET, f"offset {request.offset} is outside the queue; pull from {next_offset}"
            )
        else:
            yield svc.PullMessageResponse(status=refusal(reply.code, reply.response.remark))
            return
        yield svc.PullMessageResponse(status=outcome)
        namespace = request.message_queue.topic.resource_namespace
        for message in stored:
            v2 = v2_message(message, namespace, "", 0)
            # Pulled, not popped: no receipt handle to ack with, nothing made invisible.
            v2.system_properties.ClearField("receipt_handle")
            v2.system_properties.ClearField("invisible_duration")
            yield svc.PullMessageResponse(message=v2)
        yield svc.PullMessageResponse(next_offset=next_offset)
