"""Who is connected, and requests the broker relays to a consumer.

GET_CONSUMER_CONNECTION_LIST (203) and GET_PRODUCER_CONNECTION_LIST (204) answer from
the client tables; GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309) are
forwarded to the named consumer over its own connection and its answer relayed as it
came (the C++ client's running-info body is not valid JSON; it is passed on untouched).
The C++ client never answers CONSUME_MESSAGE_DIRECTLY: the requester gets
CONSUME_MSG_TIMEOUT with a remark saying so when the consumer stays silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.clients import ConsumerClient, Subscription
from broker_core.errors import MessageIllegalError
from broker_core.model.hashcode import tags_code
from broker_core.model.message import decode_message_id
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import ConnectionClosedError, RemotingTimeoutError
from broker_core.remoting.headers import (
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
)

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

# Well inside a tool's own timeout (AdminClient: 5 s), so the requester reads our remark.
FORWARD_TIMEOUT_S = 3.0


def subscription_json(sub: Subscription) -> dict[str, Any]:
    """RocketMQ's SubscriptionData as tools read it."""
    tag_list = sorted(sub.tags) if sub.tags else []
    return {
        "classFilterMode": False,
        "codeSet": [tags_code(tag) for tag in tag_list],
        "expressionType": sub.expression_type,
        "subString": sub.expression,
        "subVersion": sub.sub_version,
        "tagsSet": tag_list,
        "topic": sub.topic,
    }


def _forwarded(request: RemotingCommand) -> dict[str, str]:
    """The requester's header as the consumer gets it (its own ACL signature left out)."""
    return {k: v for k, v in request.ext_fields.items() if k not in ("AccessKey", "Signature")}


class ConnectionProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def consumer_connections(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        group = GetConsumerConnectionListRequestHeader.from_fields(request.ext_fields).consumer_group
        clients = self.broker.clients.consumer_clients(group)
        if not clients:
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        subscriptions: dict[str, dict[str, Any]] = {}
        for client in clients:
            for topic, sub in client.subscriptions.items():
                subscriptions.setdefault(topic, subscription_json(sub))
        newest = max(clients, key=lambda c: c.last_update_ms)
        body = {
            "connectionSet": [client.to_json() for client in clients],
            "subscriptionTable": subscriptions,
            "consumeType": newest.consume_type,
            "messageModel": newest.message_model,
            "consumeFromWhere": newest.consume_from_where,
        }
        return request.response(body=orjson.dumps(body))

    def producer_connections(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        group = GetProducerConnectionListRequestHeader.from_fields(request.ext_fields).producer_group
        clients = self.broker.clients.producer_clients(group)
        if not clients:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return request.response(body=orjson.dumps({"connectionSet": [c.to_json() for c in clients]}))

    def _consumer(self, request: RemotingCommand) -> ConsumerClient | RemotingCommand:
        # GET_CONSUMER_RUNNING_INFO's and CONSUME_MESSAGE_DIRECTLY's headers name the
        # consumer alike (consumerGroup, clientId).
        header = GetConsumerRunningInfoRequestHeader.from_fields(request.ext_fields)
        group, client_id = header.consumer_group, header.client_id
        client = self.broker.clients.consumer_client(group, client_id)
        if client is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{client_id}> of group {group} Not Online"
            )
        return client

    async def consumer_running_info(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        client = self._consumer(request)
        if isinstance(client, RemotingCommand):
            return client
        forward = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, _forwarded(request))
        return await self._relay(request, client, forward)

    async def consume_message_directly(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        client = self._consumer(request)
        if isinstance(client, RemotingCommand):
            return client
        msg_id = ConsumeMessageDirectlyRequestHeader.from_fields(request.ext_fields).msg_id
        store = self.broker.store
        assert store is not None
        try:
            _host, offset = decode_message_id(msg_id)
        except MessageIllegalError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, str(exc))
        msg = store.look_message_by_offset(offset)
        record = store.commit_log.read(offset, msg.store_size) if msg is not None else None
        if not record:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no message with msgId {msg_id} here")
        fields = _forwarded(request)
        fields.setdefault("brokerName", self.broker.config.broker_name)
        forward = RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY, fields, bytes(record))
        return await self._relay(request, client, forward)

    @staticmethod
    async def _relay(
        request: RemotingCommand, client: ConsumerClient, forward: RemotingCommand
    ) -> RemotingCommand:
        try:
            answer = await client.conn.request(forward, FORWARD_TIMEOUT_S)
        except RemotingTimeoutError:
            return request.response(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"consumer {client.client_id} did not answer within {FORWARD_TIMEOUT_S:g}s "
                "(the C++ client never answers CONSUME_MESSAGE_DIRECTLY)",
            )
        except ConnectionClosedError as exc:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"consumer {client.client_id} went away: {exc}"
            )
        return request.response(answer.code, answer.remark, answer.ext_fields, answer.body)
