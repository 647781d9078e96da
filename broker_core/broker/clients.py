"""The broker's client tables: which producers and consumers are connected, per group.

Filled from HEART_BEAT bodies.  A consumer group's membership change (a client joins,
unregisters or its connection closes) is pushed to every member as a oneway
NOTIFY_CONSUMER_IDS_CHANGED, so they rebalance at once rather than at their next timer.
C++ clients send enums as integers, Java as names: both are accepted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.store.hashcode import tags_code

log = logging.getLogger(__name__)

_MESSAGE_MODELS = {
    0: "BROADCASTING",
    1: "CLUSTERING",
    "BROADCASTING": "BROADCASTING",
    "CLUSTERING": "CLUSTERING",
}
_CONSUME_TYPES = {0: "CONSUME_ACTIVELY", 1: "CONSUME_PASSIVELY"}


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's subscription to one topic: its tag expression and the tags' hashes."""

    topic: str
    expression: str
    sub_version: int = 0

    @property
    def tags(self) -> frozenset[str] | None:
        """The subscribed tags, or None for every message (``*`` or empty)."""
        return parse_tags(self.expression)

    @property
    def tag_codes(self) -> frozenset[int] | None:
        tags = self.tags
        return None if tags is None else frozenset(tags_code(t) for t in tags)


def parse_tags(expression: str | None) -> frozenset[str] | None:
    """``"TagA || TagB"`` -> {"TagA", "TagB"}; ``*`` or empty -> None (everything)."""
    if expression is None or expression.strip() in ("", "*"):
        return None
    tags = frozenset(part.strip() for part in expression.split("||") if part.strip())
    return tags or None


@dataclass(slots=True)
class ConsumerClient:
    client_id: str
    conn: Any
    message_model: str
    consume_type: str
    consume_from_where: Any
    subscriptions: dict[str, Subscription] = field(default_factory=dict)


class ClientTables:
    """Producer and consumer groups, by client id, with their connections."""

    def __init__(self) -> None:
        self.consumers: dict[str, dict[str, ConsumerClient]] = {}
        self.producers: dict[str, dict[str, Any]] = {}

    def heartbeat(self, body: dict[str, Any], conn: Any) -> list[str]:
        """Record a heartbeat; return the consumer groups whose membership changed."""
        client_id = str(body["clientID"])
        changed = []
        for producer in body.get("producerDataSet") or []:
            self.producers.setdefault(str(producer["groupName"]), {})[client_id] = conn
        for consumer in body.get("consumerDataSet") or []:
            group = str(consumer["groupName"])
            members = self.consumers.setdefault(group, {})
            subscriptions = {}
            for sub in consumer.get("subscriptionDataSet") or []:
                try:
                    version = int(sub.get("subVersion") or 0)
                except (TypeError, ValueError):
                    version = 0
                subscriptions[str(sub["topic"])] = Subscription(
                    str(sub["topic"]), str(sub.get("subString") or "*"), version
                )
            joined = client_id not in members
            members[client_id] = ConsumerClient(
                client_id=client_id,
                conn=conn,
                message_model=_MESSAGE_MODELS.get(consumer.get("messageModel"), "CLUSTERING"),
                consume_type=_CONSUME_TYPES.get(
                    consumer.get("consumeType"), str(consumer.get("consumeType"))
                ),
                consume_from_where=consumer.get("consumeFromWhere"),
                subscriptions=subscriptions,
            )
            if joined:
                changed.append(group)
        return changed

    def unregister(self, client_id: str, producer_group: str, consumer_group: str) -> list[str]:
        if producer_group:
            self.producers.get(producer_group, {}).pop(client_id, None)
        if consumer_group and self.consumers.get(consumer_group, {}).pop(client_id, None) is not None:
            return [consumer_group]
        return []

    def connection_closed(self, conn: Any) -> list[str]:
        """Forget every client on ``conn``; return the consumer groups that lost a member."""
        changed = []
        for group, members in self.consumers.items():
            for client_id in [cid for cid, client in members.items() if client.conn is conn]:
                del members[client_id]
                changed.append(group)
        for members in self.producers.values():
            for client_id in [cid for cid, c in members.items() if c is conn]:
                del members[client_id]
        return changed

    def consumer_ids(self, group: str) -> list[str]:
        return sorted(self.consumers.get(group, {}))

    def subscription(self, group: str, topic: str) -> Subscription | None:
        for client in self.consumers.get(group, {}).values():
            sub = client.subscriptions.get(topic)
            if sub is not None:
                return sub
        return None

    def notify_ids_changed(self, group: str) -> None:
        """Tell every member of ``group`` to rebalance now (oneway, as RocketMQ does)."""
        for client in list(self.consumers.get(group, {}).values()):
            request = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True
            )
            try:
                client.conn.send_oneway(request)
            except Exception as exc:  # a member that just went away is not an error
                log.debug("notifying %s of group %s failed: %s", client.client_id, group, exc)
