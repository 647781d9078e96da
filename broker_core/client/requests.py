"""Typed requests to a broker: one method per request code, over the caller's transport.

The producer and the push and pull consumers (through their ``ClientInstance``), the admin
client and the range scanner all build their requests here, with the headers of
``broker_core.remoting.headers``, so a request's fields are written once.  The transport
is the owner's: a ``ClientInstance`` signs requests and raises ``RemotingError`` when a
broker does not answer; an ``AdminClient`` signs them and raises ``AdminUnreachableError``.

Which answers count as a refusal differs by caller for a pull (a tool read accepts
PULL_NOT_FOUND, a consumer maps every pull code to a status), so ``pull_message`` returns
every answer with its parsed header; requests with one meaning of success raise
``BrokerRefusedError`` themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson

from broker_core.errors import BrokerRefusedError, ClientError
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import (
    GetConsumerListByGroupRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SendMessageRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker_core.remoting.popheaders import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    PopMessageRequestHeader,
)

Send = Callable[[str, RemotingCommand, "float | None"], Awaitable[RemotingCommand]]
"""Send one request to an address and return whatever it answered (``timeout`` in seconds,
None for the transport's default)."""


def refused(addr: str, what: str, response: RemotingCommand) -> BrokerRefusedError:
    """The error for a broker's refusal of ``what``, keeping its code and remark."""
    try:
        name = ResponseCode(response.code).name
    except ValueError:
        name = f"code {response.code}"
    return BrokerRefusedError(
        f"{addr} refused {what}: {name} {response.remark or ''}".rstrip(),
        code=response.code,
        remark=response.remark or "",
        addr=addr,
    )


@dataclass(frozen=True, slots=True)
class PullReply:
    """A broker's answer to PULL_MESSAGE: its code, parsed header and records (``body``)."""

    response: RemotingCommand

    @property
    def header(self) -> PullMessageResponseHeader:
        """The parsed response header; ``ValueError`` when a number in it does not parse."""
        return PullMessageResponseHeader.from_fields(self.response.ext_fields)

    @property
    def code(self) -> int:
        return self.response.code

    @property
    def body(self) -> bytes:
        return self.response.body


def send_message_request(header: SendMessageRequestHeader, body: bytes) -> RemotingCommand:
    """SEND_MESSAGE_V2, or SEND_BATCH_MESSAGE when ``header.batch``: the compact (V2) header
    Java clients send.  Built apart from ``BrokerRequests.send_message`` for the producer's
    paths that do not go through the loop's transport (its thread's own socket, oneway)."""
    code = RequestCode.SEND_BATCH_MESSAGE if header.batch else RequestCode.SEND_MESSAGE_V2
    return RemotingCommand.request(code, header.to_v2_fields(), body)


class BrokerRequests:
    """The requests a client sends a broker, each with its typed header and answer."""

    def __init__(self, send: Send) -> None:
        self._send = send

    async def pull_message(
        self, addr: str, header: PullMessageRequestHeader, timeout_s: float | None = None
    ) -> PullReply:
        """PULL_MESSAGE: every answer, whatever its code (the caller judges it)."""
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_fields())
        return PullReply(await self._send(addr, request, timeout_s))

    async def query_consumer_offset(
        self, addr: str, header: QueryConsumerOffsetRequestHeader, timeout_s: float | None = None
    ) -> tuple[RemotingCommand, QueryConsumerOffsetResponseHeader]:
        """QUERY_CONSUMER_OFFSET: the answer (SUCCESS, QUERY_NOT_FOUND or a refusal: the
        caller judges it) and its parsed header."""
        request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_fields())
        response = await self._send(addr, request, timeout_s)
        return response, QueryConsumerOffsetResponseHeader.from_fields(response.ext_fields)

    async def update_consumer_offset(
        self, addr: str, header: UpdateConsumerOffsetRequestHeader, timeout_s: float | None = None
    ) -> RemotingCommand:
        """UPDATE_CONSUMER_OFFSET: the answer, whatever its code (the caller judges it)."""
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_fields())
        return await self._send(addr, request, timeout_s)

    async def get_min_offset(
        self, addr: str, topic: str, queue_id: int, timeout_s: float | None = None
    ) -> int:
        """GET_MIN_OFFSET: the queue's smallest offset still stored (BrokerRefusedError when refused)."""
        return await self._queue_offset(addr, RequestCode.GET_MIN_OFFSET, topic, queue_id, None, timeout_s)

    async def get_max_offset(
        self, addr: str, topic: str, queue_id: int, timeout_s: float | None = None
    ) -> int:
        """GET_MAX_OFFSET: the offset the queue's next message will get (BrokerRefusedError when refused)."""
        return await self._queue_offset(addr, RequestCode.GET_MAX_OFFSET, topic, queue_id, None, timeout_s)

    async def search_offset_by_timestamp(
        self, addr: str, topic: str, queue_id: int, timestamp_ms: int, timeout_s: float | None = None
    ) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the offset of the queue's first message stored at or
        after ``timestamp_ms`` (the end when none is), BrokerRefusedError when refused."""
        return await self._queue_offset(
            addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, topic, queue_id, timestamp_ms, timeout_s
        )

    async def _queue_offset(
        self,
        addr: str,
        code: RequestCode,
        topic: str,
        queue_id: int,
        timestamp_ms: int | None,
        timeout_s: float | None,
    ) -> int:
        fields = {"topic": topic, "queueId": str(queue_id)}
        if timestamp_ms is not None:
            fields["timestamp"] = str(timestamp_ms)
        response = await self._send(addr, RemotingCommand.request(code, fields), timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise refused(addr, f"{code.name} of {topic}:{queue_id}", response)
        try:
            return int(response.ext_fields.get("offset") or 0)
        except ValueError:
            raise ClientError(f"{addr} answered {code.name} with a malformed offset") from None

    async def send_message(
        self, addr: str, header: SendMessageRequestHeader, body: bytes, timeout_s: float | None = None
    ) -> RemotingCommand:
        """SEND_MESSAGE_V2 (SEND_BATCH_MESSAGE for a batch): the answer, whatever its code
        (the producer judges it and parses its ``SendMessageResponseHeader``)."""
        return await self._send(addr, send_message_request(header, body), timeout_s)

    async def raw(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Any request built by the caller (its header has no typed form here): the answer."""
        return await self._send(addr, request, timeout_s)

    async def pop_message(
        self, addr: str, header: PopMessageRequestHeader, timeout_s: float | None = None
    ) -> RemotingCommand:
        """POP_MESSAGE: the answer, whatever its code (SUCCESS with records, PULL_NOT_FOUND
        when nothing came within the poll time, or a refusal: the caller judges it)."""
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_fields())
        return await self._send(addr, request, timeout_s)

    async def ack_message(
        self, addr: str, header: AckMessageRequestHeader, timeout_s: float | None = None
    ) -> RemotingCommand:
        """ACK_MESSAGE: the answer (SUCCESS, or NO_MESSAGE for a handle no longer current)."""
        request = RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_fields())
        return await self._send(addr, request, timeout_s)

    async def change_invisible_time(
        self, addr: str, header: ChangeInvisibleTimeRequestHeader, timeout_s: float | None = None
    ) -> RemotingCommand:
        """CHANGE_MESSAGE_INVISIBLETIME: the answer; on SUCCESS its header carries the new
        pop time (``ChangeInvisibleTimeResponseHeader``), which makes the new handle."""
        request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_fields())
        return await self._send(addr, request, timeout_s)

    async def consumer_send_msg_back(
        self,
        addr: str,
        *,
        commit_log_offset: int,
        group: str,
        delay_level: int,
        origin_msg_id: str,
        origin_topic: str,
        max_reconsume_times: int,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: give the message stored at ``commit_log_offset`` back for
        ``group`` (``delay_level`` 0: the broker's choice; -1: straight to the DLQ)."""
        fields = {
            "offset": str(commit_log_offset),
            "group": group,
            "delayLevel": str(delay_level),
            "originMsgId": origin_msg_id,
            "originTopic": origin_topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(max_reconsume_times),
        }
        request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        return await self._send(addr, request, timeout_s)

    async def pop_status(self, addr: str, group: str = "", timeout_s: float | None = None) -> dict[str, Any]:
        """QUIVER_GET_POP_STATUS: the broker's pop books (of ``group``, or all)."""
        fields = {"consumerGroup": group} if group else {}
        response = await self._send(
            addr, RemotingCommand.request(RequestCode.QUIVER_GET_POP_STATUS, fields), timeout_s
        )
        if response.code != ResponseCode.SUCCESS:
            raise refused(addr, "its pop status", response)
        try:
            body = orjson.loads(response.body)
        except orjson.JSONDecodeError as exc:
            raise ClientError(f"{addr} answered its pop status with a malformed body: {exc}") from None
        if not isinstance(body, dict):
            raise ClientError(f"{addr} answered its pop status with {type(body).__name__}, not an object")
        return body

    async def get_consumer_list_by_group(
        self, addr: str, group: str, timeout_s: float | None = None
    ) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of ``group``'s consumers ``addr`` knows.

        Raises:
            BrokerRefusedError: the broker refused (it answers SYSTEM_ERROR for a group
                with no consumer online).
            ClientError: the answer's body is not a consumer list, or the list is empty.
        """
        header = GetConsumerListByGroupRequestHeader(group)
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_fields())
        response = await self._send(addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise refused(addr, f"the consumer list of {group!r}", response)
        try:
            ids = orjson.loads(response.body)["consumerIdList"]
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ClientError(f"{addr} answered the consumer list with a malformed body: {exc!r}") from None
        if not ids:
            raise ClientError(f"{addr} lists no consumer in group {group!r}")
        return [str(cid) for cid in ids]

    async def check_client_config(
        self,
        addr: str,
        client_id: str,
        group: str,
        subscription: dict[str, Any],
        timeout_s: float | None = None,
    ) -> None:
        """CHECK_CLIENT_CONFIG: may ``addr`` serve ``group``'s ``subscription`` (a heartbeat's
        subscriptionData entry)?  Java consumers ask at start for SQL92 subscriptions.

        Raises BrokerRefusedError with the broker's code and remark (SYSTEM_ERROR when it
        does not filter by SQL92, SUBSCRIPTION_PARSE_FAILED for a bad expression).
        """
        body = orjson.dumps({"clientId": client_id, "group": group, "subscriptionData": subscription})
        request = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)
        response = await self._send(addr, request, timeout_s)
        if response.code != ResponseCode.SUCCESS:
            raise refused(addr, f"the subscription of {group!r} to {subscription.get('topic')!r}", response)
