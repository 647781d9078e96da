"""The broker's client tables: which producers and consumers are connected, per group.

Filled from HEART_BEAT bodies.  A consumer group's membership change (a client joins,
unregisters or its connection closes) is pushed to every member as a oneway
NOTIFY_CONSUMER_IDS_CHANGED, so they rebalance at once rather than at their next timer.
C++ clients send enums as integers, Java as names: both are accepted.

A client's entry is refreshed by each heartbeat; one silent for ``CHANNEL_EXPIRED_MS``
(RocketMQ: 120 s) is dropped and its connection closed by ``expire_idle``, which the
broker's housekeeping calls every 10 s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker_core.model.hashcode import tags_code
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import NotifyConsumerIdsChangedRequestHeader
from broker_core.sql92 import is_sql92
from broker_core.tags import parse_tags

log = logging.getLogger(__name__)

BROADCASTING = "BROADCASTING"
CLUSTERING = "CLUSTERING"
_MESSAGE_MODELS = {
    0: BROADCASTING,
    1: CLUSTERING,
    BROADCASTING: BROADCASTING,
    CLUSTERING: CLUSTERING,
}
_CONSUME_TYPES = {
    0: "CONSUME_ACTIVELY",
    1: "CONSUME_PASSIVELY",
    2: "CONSUME_POP",
    "CONSUME_ACTIVELY": "CONSUME_ACTIVELY",
    "CONSUME_PASSIVELY": "CONSUME_PASSIVELY",
    "CONSUME_POP": "CONSUME_POP",
}
# ConsumeFromWhere by ordinal: the C++ client's enum has Java's order, deprecated ones too.
_CONSUME_FROM_WHERE = (
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
)


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer's subscription to one topic: its expression (tags, or SQL92 by
    ``expression_type``) and, for tags, their hashes."""

    topic: str
    expression: str
    sub_version: int = 0
    expression_type: str = "TAG"

    @property
    def tags(self) -> frozenset[str] | None:
        """The subscribed tags, or None for every message (``*`` or empty) or a SQL92 one."""
        return None if is_sql92(self.expression_type) else parse_tags(self.expression)

    @property
    def tag_codes(self) -> frozenset[int] | None:
        tags = self.tags
        return None if tags is None else frozenset(tags_code(t) for t in tags)


CHANNEL_EXPIRED_MS = 120_000


@dataclass(frozen=True, slots=True)
class ProxiedClient:
    """What a gRPC proxy says of a RocketMQ 5 client it registers (Quiver's heartbeat keys
    ``clientProtocol``, ``clientVersion``, ``clientAddr``): the client talks to the proxy,
    the proxy's connection carries its heartbeats."""

    protocol: str
    version: str
    addr: str

    @classmethod
    def from_heartbeat(cls, body: Mapping[str, Any]) -> ProxiedClient | None:
        protocol = body.get("clientProtocol")
        if not protocol:
            return None
        return cls(str(protocol), str(body.get("clientVersion") or ""), str(body.get("clientAddr") or ""))


@dataclass(slots=True)
class ClientChannel:
    """A connected client as the connection tables show it (RocketMQ ``ClientChannelInfo``)."""

    client_id: str
    conn: Any
    language: str = "JAVA"
    version: int = 0
    last_update_ms: int = 0
    proxied: ProxiedClient | None = None

    @property
    def address(self) -> str:
        if self.proxied is not None and self.proxied.addr:
            return self.proxied.addr
        return str(getattr(self.conn, "remote_address", ""))

    def to_json(self) -> dict[str, Any]:
        """One entry of a connection list body (RocketMQ ``Connection``; a proxied RocketMQ 5
        client also names its protocol and its SDK's version)."""
        entry: dict[str, Any] = {
            "clientId": self.client_id,
            "clientAddr": self.address,
            "language": self.language,
            "version": self.version,
        }
        if self.proxied is not None:
            entry["protocol"] = self.proxied.protocol
            entry["versionDesc"] = self.proxied.version
        return entry


@dataclass(slots=True)
class ConsumerClient(ClientChannel):
    message_model: str = "CLUSTERING"
    consume_type: str = "CONSUME_PASSIVELY"
    consume_from_where: Any = None
    subscriptions: dict[str, Subscription] = field(default_factory=dict)


def _consume_from_where_name(value: Any) -> str:
    """C++ sends the enum's ordinal; Java its name."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _CONSUME_FROM_WHERE[value] if 0 <= value < len(_CONSUME_FROM_WHERE) else str(value)
    return str(value) if value else "CONSUME_FROM_LAST_OFFSET"


class ClientTables:
    """Producer and consumer groups, by client id, with their connections."""

    def __init__(self) -> None:
        self.consumers: dict[str, dict[str, ConsumerClient]] = {}
        self.producers: dict[str, dict[str, ClientChannel]] = {}

    def heartbeat(
        self,
        body: dict[str, Any],
        conn: Any,
        *,
        language: str = "JAVA",
        version: int = 0,
        now_ms: int = 0,
    ) -> list[str]:
        """Record a heartbeat; return the consumer groups whose membership changed."""
        client_id = str(body["clientID"])
        proxied = ProxiedClient.from_heartbeat(body)
        changed = []
        for producer in body.get("producerDataSet") or []:
            self.producers.setdefault(str(producer["groupName"]), {})[client_id] = ClientChannel(
                client_id, conn, language, version, now_ms, proxied
            )
        for consumer in body.get("consumerDataSet") or []:
            group = str(consumer["groupName"])
            members = self.consumers.setdefault(group, {})
            subscriptions = {}
            for sub in consumer.get("subscriptionDataSet") or []:
                try:
                    sub_version = int(sub.get("subVersion") or 0)
                except (TypeError, ValueError):
                    sub_version = 0
                subscriptions[str(sub["topic"])] = Subscription(
                    str(sub["topic"]),
                    str(sub.get("subString") or "*"),
                    sub_version,
                    str(sub.get("expressionType") or "TAG"),
                )
            joined = client_id not in members
            members[client_id] = ConsumerClient(
                client_id=client_id,
                conn=conn,
                language=language,
                version=version,
                last_update_ms=now_ms,
                proxied=proxied,
                message_model=_MESSAGE_MODELS.get(consumer.get("messageModel"), "CLUSTERING"),
                consume_type=_CONSUME_TYPES.get(consumer.get("consumeType"), "CONSUME_PASSIVELY"),
                consume_from_where=_consume_from_where_name(consumer.get("consumeFromWhere")),
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
        for producers in self.producers.values():
            for client_id in [cid for cid, c in producers.items() if c.conn is conn]:
                del producers[client_id]
        return changed

    def expire_idle(self, now_ms: int, max_idle_ms: int = CHANNEL_EXPIRED_MS) -> list[str]:
        """Drop clients whose last heartbeat is older than ``max_idle_ms`` and close their
        connections; return the consumer groups that lost a member."""
        stale_conns = []
        changed: list[str] = []
        tables: list[dict[str, Any]] = [*self.consumers.values(), *self.producers.values()]
        for table in tables:
            for client_id, client in list(table.items()):
                if now_ms - client.last_update_ms <= max_idle_ms:
                    continue
                if client.proxied is not None:
                    # A proxy's connection carries many clients: only this one went quiet.
                    del table[client_id]
                    if isinstance(client, ConsumerClient):
                        changed.extend(g for g, members in self.consumers.items() if members is table)
                else:
                    stale_conns.append(client.conn)
        for conn in {id(c): c for c in stale_conns}.values():
            log.warning(
                "closing %s: no heartbeat for %d ms", getattr(conn, "remote_address", conn), max_idle_ms
            )
            changed.extend(self.connection_closed(conn))
            try:
                conn.close("client channel expired")
            except Exception as exc:  # closing an already broken connection is not an error
                log.debug("closing an expired channel failed: %s", exc)
        return sorted(set(changed))

    def consumer_groups(self) -> list[str]:
        """Groups with at least one consumer connected."""
        return sorted(group for group, members in self.consumers.items() if members)

    def producer_groups(self) -> list[str]:
        return sorted(group for group, members in self.producers.items() if members)

    def consumer_clients(self, group: str) -> list[ConsumerClient]:
        return [self.consumers[group][cid] for cid in sorted(self.consumers.get(group, {}))]

    def producer_clients(self, group: str) -> list[ClientChannel]:
        return [self.producers[group][cid] for cid in sorted(self.producers.get(group, {}))]

    def consumer_client(self, group: str, client_id: str) -> ConsumerClient | None:
        return self.consumers.get(group, {}).get(client_id)

    def groups_consuming(self, topic: str) -> list[str]:
        """Online groups with a subscription to ``topic``."""
        return sorted(
            group
            for group, members in self.consumers.items()
            if any(topic in client.subscriptions for client in members.values())
        )

    def consumer_ids(self, group: str) -> list[str]:
        return sorted(self.consumers.get(group, {}))

    def message_model(self, group: str, conn: Any) -> str | None:
        """How ``group`` consumes, as its heartbeats said: the model of its consumer on
        ``conn`` (the puller), else of any member; None when no member is connected.

        RocketMQ keeps one model per group, the last heartbeat's; a pull's connection
        names the very consumer that pulls.
        """
        members = list(self.consumers.get(group, {}).values())
        for client in members:
            if client.conn is conn:
                return client.message_model
        return members[-1].message_model if members else None

    def has_consumer_on(self, group: str, conn: Any) -> bool:
        """Whether a member of ``group`` is registered on the connection ``conn``."""
        return any(client.conn is conn for client in self.consumers.get(group, {}).values())

    def subscriptions_of(self, group: str) -> list[Subscription]:
        """The group's subscriptions, one per topic (a member's, as ``subscription`` picks)."""
        found: dict[str, Subscription] = {}
        for client in self.consumers.get(group, {}).values():
            for topic, sub in client.subscriptions.items():
                found.setdefault(topic, sub)
        return list(found.values())

    def subscription(self, group: str, topic: str) -> Subscription | None:
        for client in self.consumers.get(group, {}).values():
            sub = client.subscriptions.get(topic)
            if sub is not None:
                return sub
        return None

    def notify_ids_changed(self, group: str) -> None:
        """Tell every member of ``group`` to rebalance now (oneway, as RocketMQ does)."""
        fields = NotifyConsumerIdsChangedRequestHeader(group).to_fields()
        for client in list(self.consumers.get(group, {}).values()):
            request = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, dict(fields), oneway=True
            )
            try:
                client.conn.send_oneway(request)
            except Exception as exc:  # a member that just went away is not an error
                log.debug("notifying %s of group %s failed: %s", client.client_id, group, exc)
