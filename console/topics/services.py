"""Topics over broker_core's AdminClient: the reads the pages and the API show, with a
bounded number of broker calls (the list costs one nameserver call and one call per master,
however many topics there are), and the write actions, one function each (create, update,
delete after the impact check, send a test message) that checks the actor's right, acts on
every master and writes the audit row (see ``console.core.actions``).

A topic's ``messageType`` is RocketMQ 5's ``message.type`` attribute (NORMAL, FIFO, DELAY,
TRANSACTION; NORMAL when unset), which brokers checking message types hold sends to.  It is
not the console's ``type``, which sorts topics into application, retry, dead-letter and
system ones for the list's filter.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from broker_core.broker.topics import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.model.messagetype import DELAY as MESSAGE_DELAY
from broker_core.model.messagetype import FIFO as MESSAGE_FIFO
from broker_core.model.messagetype import NORMAL as MESSAGE_NORMAL
from broker_core.model.messagetype import TRANSACTION as MESSAGE_TRANSACTION
from broker_core.model.topicattributes import MESSAGE_TYPE_ATTRIBUTE
from broker_core.remoting.codes import ResponseCode
from broker_core.topics import is_system_topic
from console.audit.services import audited
from console.core.actions import Actor, NotConfirmed, require
from console.core.brokers import admin_call, on_every_master
from nameserver.clusters import ClusterRef

NORMAL, FIFO, RETRY, DLQ, DELAY, TRANSACTION, SYSTEM = (
    "NORMAL",
    "FIFO",
    "RETRY",
    "DLQ",
    "DELAY",
    "TRANSACTION",
    "SYSTEM",
)
TYPES = (NORMAL, FIFO, RETRY, DLQ, DELAY, TRANSACTION, SYSTEM)
# What a plain list shows: the topics applications use.
DEFAULT_TYPES = (NORMAL, FIFO)
# The message types the console sets (RocketMQ's MIXED, off by default on brokers, is not
# offered; a topic that has it shows it).
SETTABLE_MESSAGE_TYPES = (MESSAGE_NORMAL, MESSAGE_FIFO, MESSAGE_DELAY, MESSAGE_TRANSACTION)


def topic_type(name: str, order: bool) -> str:
    """The topic's kind, as the console filters it."""
    if name.startswith("%RETRY%"):
        return RETRY
    if name.startswith("%DLQ%"):
        return DLQ
    if name == "SCHEDULE_TOPIC_XXXX":
        return DELAY
    if name in ("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"):
        return TRANSACTION
    if is_system_topic(name):
        return SYSTEM
    return FIFO if order else NORMAL


# The console's permission spellings and the broker's bits.
PERMS = {"RW": PERM_READ | PERM_WRITE, "R-": PERM_READ, "-W": PERM_WRITE, "--": 0}


def perm_text(perm: int) -> str:
    return ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-")


class TopicRow(TypedDict):
    """One topic of the list; the figures are None when no master holds its config."""

    name: str
    type: str
    messageType: str | None
    brokers: list[str]
    readQueueNums: int | None
    writeQueueNums: int | None
    perm: str | None
    order: bool


class TopicQueue(TypedDict):
    """One queue of a topic's detail: its offsets and how long a span it retains."""

    brokerName: str
    queueId: int
    minOffset: int
    maxOffset: int
    messages: int
    lastUpdateTimestamp: int | None
    earliestStoreTimestamp: int | None
    retentionSpanMs: int | None


class RouteQueueData(TypedDict):
    """A broker's queues of the topic as the nameservers route them."""

    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: str


class RouteJson(TypedDict):
    """The topic's route: queue datas, each broker's addresses by id, the order conf."""

    queueDatas: list[RouteQueueData]
    brokers: dict[str, dict[str, str]]
    orderTopicConf: str | None


class TopicDetail(TypedDict):
    """A topic's route, per-queue offsets and consumer groups; the page and the API add
    ``storedToday`` (console/clusters/traffic.py ``topic_today``)."""

    name: str
    type: str
    messageType: str | None
    route: RouteJson
    totalMessages: int
    queues: list[TopicQueue]
    consumers: list[str]
    storedToday: NotRequired[dict[str, int | None]]


class ConsumerImpact(TypedDict):
    """A group consuming the topic: its lag and consume TPS on it."""

    group: str
    lag: int
    consumeTps: float


class TopicImpact(TypedDict):
    """What deleting a topic would touch."""

    topic: str
    messages: int
    consumers: list[ConsumerImpact]
    totalLag: int
    safe: bool


async def topic_rows(admin: AdminClient) -> tuple[list[TopicRow], list[str]]:
    """Every topic with its type, brokers, queue counts and permission (one call per master),
    and the brokers that did not answer (their topics' figures are then incomplete)."""
    info, names = await asyncio.gather(admin.cluster_info(), admin.topic_list())
    masters = info.master_addrs()
    tables = await asyncio.gather(
        *(admin.topic_configs(addr) for addr in masters.values()), return_exceptions=True
    )
    by_topic: dict[str, list[tuple[str, TopicConfig]]] = {}
    unreadable = []
    for (broker, addr), table in zip(masters.items(), tables, strict=True):
        if isinstance(table, BaseException):
            unreadable.append(f"{broker} ({addr}): {table}")
            continue
        for name, config in table.items():
            by_topic.setdefault(name, []).append((broker, config))
    rows: list[TopicRow] = []
    for name in sorted(set(names) | set(by_topic)):
        configs = by_topic.get(name, [])
        order = any(c.order for _, c in configs)
        rows.append(
            {
                "name": name,
                "type": topic_type(name, order),
                "messageType": min(configs, key=lambda c: c[0])[1].message_type if configs else None,
                "brokers": sorted(b for b, _ in configs),
                "readQueueNums": sum(c.read_queue_nums for _, c in configs) if configs else None,
                "writeQueueNums": sum(c.write_queue_nums for _, c in configs) if configs else None,
                "perm": perm_text(configs[0][1].perm) if configs else None,
                "order": order,
            }
        )
    return rows, unreadable


def filter_topics(
    rows: list[TopicRow], search: str = "", types: tuple[str, ...] = DEFAULT_TYPES
) -> list[TopicRow]:
    needle = search.strip().lower()
    return [r for r in rows if r["type"] in types and (not needle or needle in r["name"].lower())]


async def message_type(admin: AdminClient, topic: str) -> str | None:
    """The topic's message type as a master of its route holds it; None when none does."""
    try:
        return (await admin.topic_config(topic)).message_type
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return None


async def topic_detail(admin: AdminClient, topic: str) -> TopicDetail:
    """Route, message type, per-queue offsets with retention span, and the groups consuming it."""
    route = await admin.topic_route(topic)
    stats, consumers, earliest, kind = await asyncio.gather(
        admin.topic_stats(topic),
        admin.topic_consumers(topic),
        admin.earliest_store_times(topic),
        message_type(admin, topic),
    )
    queues: list[TopicQueue] = []
    for q in stats.queues:
        first = earliest.get(q.queue, 0)
        queues.append(
            {
                "brokerName": q.queue.broker_name,
                "queueId": q.queue.queue_id,
                "minOffset": q.min_offset,
                "maxOffset": q.max_offset,
                "messages": q.max_offset - q.min_offset,
                "lastUpdateTimestamp": q.last_update_timestamp or None,
                "earliestStoreTimestamp": first or None,
                "retentionSpanMs": (q.last_update_timestamp - first)
                if first and q.last_update_timestamp
                else None,
            }
        )
    order = bool(route.order_topic_conf)
    return {
        "name": topic,
        "type": topic_type(topic, order),
        "messageType": kind,
        "route": {
            "queueDatas": [
                {
                    "brokerName": q.broker_name,
                    "readQueueNums": q.read_queue_nums,
                    "writeQueueNums": q.write_queue_nums,
                    "perm": perm_text(q.perm),
                }
                for q in route.queue_datas
            ],
            "brokers": {b.broker_name: {str(i): a for i, a in b.addrs.items()} for b in route.broker_datas},
            "orderTopicConf": route.order_topic_conf,
        },
        "totalMessages": stats.total_messages,
        "queues": queues,
        "consumers": consumers,
    }


async def impact(admin: AdminClient, topic: str) -> TopicImpact:
    """What deleting ``topic`` would touch: its consumer groups with their lag, its messages, its traffic."""
    stats, consumers = await asyncio.gather(admin.topic_stats(topic), admin.topic_consumers(topic))
    groups: list[ConsumerImpact] = []
    for group in consumers:
        try:
            consume = await admin.consume_stats(group, topic)
            groups.append({"group": group, "lag": consume.total_lag, "consumeTps": consume.consume_tps})
        except AdminError as exc:
            if exc.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                raise
            groups.append({"group": group, "lag": 0, "consumeTps": 0.0})
    return {
        "topic": topic,
        "messages": stats.total_messages,
        "consumers": groups,
        "totalLag": sum(g["lag"] for g in groups),
        "safe": not groups and stats.total_messages == 0,
    }


async def until_routed(admin: AdminClient, topic: str, timeout_s: float = 5.0) -> bool:
    """Wait (bounded) until the nameservers route ``topic``: a broker registers a new topic
    a moment after creating it, and a send or a browse right after must find it."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            await admin.topic_route(topic)
            return True
        except AdminError:
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.05)


@dataclass(frozen=True)
class TopicSpec:
    """What a create or an update asks for: queue counts, permission (``RW``, ``R-``, ``-W``,
    ``--``), the order flag, the message type (None: a new topic is NORMAL, an updated one
    keeps its own), and where (one broker cluster's masters, or every master when
    ``broker_cluster`` is empty)."""

    name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: str = "RW"
    order: bool = False
    broker_cluster: str = ""
    message_type: str | None = None

    @classmethod
    def of(cls, name: str, data: dict[str, Any]) -> TopicSpec:
        """The spec of ``name`` from validated ``TopicWrite`` data."""
        return cls(
            name,
            data["readQueueNums"],
            data["writeQueueNums"],
            data["perm"],
            data["order"],
            data.get("brokerCluster") or "",
            data.get("messageType") or None,
        )

    def config(self) -> TopicConfig:
        """The config to send; its attributes carry the message type when one is asked for."""
        attributes = {MESSAGE_TYPE_ATTRIBUTE: self.message_type} if self.message_type else {}
        return TopicConfig(
            self.name,
            self.read_queue_nums,
            self.write_queue_nums,
            PERMS[self.perm],
            order=self.order,
            attributes=attributes,
        )

    def to_json(self) -> dict[str, Any]:
        """The spec in the API's names (what the audit row and the API's answer show)."""
        shown: dict[str, Any] = {
            "name": self.name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "order": self.order,
        }
        if self.broker_cluster:
            shown["brokerCluster"] = self.broker_cluster
        if self.message_type:
            shown["messageType"] = self.message_type
        return shown


def _write_topic(actor: Actor, cluster: ClusterRef, spec: TopicSpec, action: str) -> list[str]:
    require(actor, cluster, "operate")
    config = spec.config()

    async def write(admin: AdminClient) -> list[str]:
        if spec.broker_cluster:
            addrs = await admin.create_or_update_topic(config, cluster=spec.broker_cluster)
        else:
            addrs = await on_every_master(
                admin, lambda addr: admin.create_or_update_topic(config, broker_addr=addr)
            )
        await until_routed(admin, spec.name)  # its page and a send work as soon as we answer
        return list(addrs)

    with audited(actor, action, cluster.name, spec.name) as audit:
        audit.after = spec.to_json()
        return admin_call(cluster.namesrv_addr, write)


def create_topic(actor: Actor, cluster: ClusterRef, spec: TopicSpec) -> list[str]:
    """Create the topic on every master (or one broker cluster's) and wait until the
    nameservers route it (operators; audited ``topic.create``); the brokers written."""
    return _write_topic(actor, cluster, spec, "topic.create")


def update_topic(actor: Actor, cluster: ClusterRef, spec: TopicSpec) -> list[str]:
    """Store the topic's new queue counts, permission, order flag and message type (when
    given) where ``create_topic`` would (operators; audited ``topic.update``); the brokers
    written."""
    return _write_topic(actor, cluster, spec, "topic.update")


def delete_topic(actor: Actor, cluster: ClusterRef, topic: str, confirm: str) -> list[str]:
    """Delete ``topic`` everywhere (admins), only when ``confirm`` names it again
    (``NotConfirmed`` otherwise, nothing done); the audit row (``topic.delete``) keeps the
    impact read just before.  The brokers it was deleted on."""
    require(actor, cluster, "admin")
    if confirm != topic:
        raise NotConfirmed("type the topic's name to confirm")
    with audited(actor, "topic.delete", cluster.name, topic) as audit:
        audit.before = admin_call(cluster.namesrv_addr, lambda admin: impact(admin, topic))
        deleted = admin_call(cluster.namesrv_addr, lambda admin: admin.delete_topic(topic))
        audit.after = {"deletedOn": deleted}
    return list(deleted)


def send_test_message(
    actor: Actor, cluster: ClusterRef, topic: str, message: dict[str, Any]
) -> dict[str, Any]:
    """Send a message built from validated ``TestMessage`` data (operators; audited
    ``topic.send``); the send result (msgId, offsetMsgId, queue, offset)."""
    require(actor, cluster, "operate")
    with audited(actor, "topic.send", cluster.name, topic) as audit:
        sent = admin_call(
            cluster.namesrv_addr,
            lambda admin: admin.send_message(
                topic,
                message["bytes"],
                tags=message["tags"],
                keys=message["keys"],
                properties=message["properties"],
                delay_level=message["delayLevel"],
            ),
        )
        audit.after = sent
    return sent
