"""HEART_BEAT (34), UNREGISTER_CLIENT (35) and GET_CONSUMER_LIST_BY_GROUP (38)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.broker.topics import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.topics import retry_topic

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


class ClientProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._watched: set[int] = set()

    def heartbeat(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        try:
            body = orjson.loads(request.body) if request.body else {}
        except orjson.JSONDecodeError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the heartbeat body is not JSON: {exc}")
        if not isinstance(body, dict) or not body.get("clientID"):
            return request.response(ResponseCode.SYSTEM_ERROR, "the heartbeat body lacks clientID")
        try:
            changed = self.broker.clients.heartbeat(
                body, conn, language=request.language, version=request.version, now_ms=self.broker.clock_ms()
            )
        except (KeyError, TypeError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed heartbeat: {exc!r}")
        self._watch(conn)
        for consumer in body.get("consumerDataSet") or []:
            self._ensure_group(str(consumer["groupName"]))
        for group in changed:
            self.broker.clients.notify_ids_changed(group)
        return request.response()

    def _ensure_group(self, group: str) -> None:
        """A consumer group gets its subscription config and its retry topic, as in RocketMQ."""
        if self.broker.config.auto_create_subscription_group:
            self.broker.groups.ensure(SubscriptionGroupConfig(group))
        if self.broker.topics.ensure(TopicConfig(retry_topic(group), 1, 1, PERM_READ | PERM_WRITE)):
            self.broker.topics_changed()

    def _watch(self, conn: Any) -> None:
        if id(conn) in self._watched:
            return
        self._watched.add(id(conn))

        def closed(c: Any) -> None:
            self._watched.discard(id(c))
            for group in self.broker.clients.connection_closed(c):
                self.broker.clients.notify_ids_changed(group)

        conn.add_close_callback(closed)

    def unregister_client(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        changed = self.broker.clients.unregister(
            fields.get("clientID", ""), fields.get("producerGroup", ""), fields.get("consumerGroup", "")
        )
        for group in changed:
            self.broker.clients.notify_ids_changed(group)
        return request.response()

    def consumer_list(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        ids = self.broker.clients.consumer_ids(group)
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.response(body=orjson.dumps({"consumerIdList": ids}))
