"""mqadmin-style admin commands: ``python -m broker_core topicList -n ns:9876`` or ``quiver-admin``.

Names and flags are mqadmin's where mqadmin has the command (``-n namesrvAddr``, also
read from ``NAMESRV_ADDR``; ``-t topic``, ``-g group``, ``-c cluster``, ``-b broker``...).
Each command is a thin shell: it parses its arguments, makes one or two
``AdminClient`` calls and returns an ``Output`` (a table by default, JSON with
``--json``).  A failure is one line on stderr and exit status 1; bad usage exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import ssl
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from broker_core.cli.args import TIMESTAMP_FORMATS, format_timestamp, parse_bool, parse_timestamp
from broker_core.cli.output import Output, key_values, message_json, message_text, table
from broker_core.client.admin import MAINTENANCE_JOBS, AdminClient
from broker_core.clock import wall_clock_ms
from broker_core.errors import AdminError, BrokerCoreError, ConfigError
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.hastatus import BrokerHAStatus
from broker_core.model.message import PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.tls import (
    TLS_CERT_PATH_ENV,
    TLS_ENABLE_ENV,
    TLS_KEY_PATH_ENV,
    TLS_TRUST_CERT_PATH_ENV,
    client_context,
)

log = logging.getLogger(__name__)

NAMESRV_ENV = "NAMESRV_ADDR"
ACCESS_KEY_ENV = "QUIVER_ACCESS_KEY"
SECRET_KEY_ENV = "QUIVER_SECRET_KEY"

Runner = Callable[[AdminClient, argparse.Namespace], Awaitable[Output]]


@dataclass(frozen=True, slots=True)
class AdminCommand:
    """One command: its name, help, argument specs and what it runs.

    ``broker_level`` commands address a broker by ``-b`` and then need no nameserver.
    """

    name: str
    help: str
    arguments: tuple[Any, ...]
    run: Runner
    broker_level: bool = False
    # What ``-c`` addresses, for its help.
    cluster_scope: str = "master"


COMMANDS: dict[str, AdminCommand] = {}

TARGET = "-b|-c"
"""Argument spec: a required choice of ``-b brokerAddr`` or ``-c clusterName``."""
ANY_TARGET = "[-b|-c]"
"""Argument spec: ``-b brokerAddr`` or ``-c clusterName``, or neither (every cluster)."""


def arg(*flags: str, **kwargs: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """One ``add_argument`` call, declared."""
    return flags, kwargs


def command(
    name: str, help: str, *arguments: Any, broker_level: bool = False, cluster_scope: str = "master"
) -> Callable[[Runner], Runner]:
    """Register the decorated coroutine as the admin command ``name``."""

    def register(run: Runner) -> Runner:
        COMMANDS[name] = AdminCommand(name, help, arguments, run, broker_level, cluster_scope)
        return run

    return register


def _timestamp(text: str) -> int:
    try:
        return parse_timestamp(text, wall_clock_ms)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _boolean(text: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


TOPIC = arg("-t", "--topic", required=True, help="topic name")
GROUP = arg("-g", "--groupName", dest="group", required=True, help="consumer group name")


# -- cluster and topics --------------------------------------------------------------------


@command("clusterList", "list clusters and their brokers", arg("-c", "--clusterName", dest="cluster"))
async def cluster_list(admin: AdminClient, args: argparse.Namespace) -> Output:
    info = await admin.cluster_info()
    rows = [
        (cluster, broker.broker_name, bid, addr)
        for cluster, names in sorted(info.clusters.items())
        if args.cluster in (None, cluster)
        for broker in info.brokers_of(cluster)
        for bid, addr in sorted(broker.addrs.items())
    ]
    if args.cluster is not None and not rows:
        raise AdminError(f"cluster {args.cluster!r} is not registered with the nameservers")
    runtime = await asyncio.gather(*(_runtime_or_none(admin, row[3]) for row in rows))
    roles = await asyncio.gather(
        *(_role_or_none(admin, row[3], info_) for row, info_ in zip(rows, runtime, strict=True))
    )
    data = [
        {
            "cluster": cluster,
            "brokerName": name,
            "brokerId": bid,
            "brokerRole": role,
            "addr": addr,
            "version": info_.get("brokerVersionDesc") if info_ else None,
            "msgPutTotalTodayNow": info_.get("msgPutTotalTodayNow") if info_ else None,
            "msgGetTotalTodayNow": info_.get("msgGetTotalTodayNow") if info_ else None,
        }
        for (cluster, name, bid, addr), info_, role in zip(rows, runtime, roles, strict=True)
    ]
    text = table(
        ["#Cluster Name", "#Broker Name", "#BID", "#Role", "#Addr", "#Version", "#PutToday", "#GetToday"],
        [list(d.values()) for d in data],
    )
    return Output({"brokers": data}, text)


async def _runtime_or_none(admin: AdminClient, addr: str) -> dict[str, str] | None:
    """A broker's runtime figures, or None when it does not answer (the listing goes on)."""
    try:
        return await admin.broker_runtime_info(addr)
    except AdminError as exc:
        log.info("no runtime info from %s: %s", addr, exc)
        return None


async def _role_or_none(admin: AdminClient, addr: str, runtime: dict[str, str] | None) -> str | None:
    """ASYNC_MASTER, SYNC_MASTER or SLAVE: from the runtime figures, else from the broker's
    settings (a broker whose runtime info has no role: RocketMQ's); None when it does not answer."""
    if runtime is None:
        return None
    if runtime.get("brokerRole"):
        return runtime["brokerRole"]
    try:
        return (await admin.broker_config(addr)).get("brokerRole") or None
    except AdminError as exc:
        log.info("no settings from %s: %s", addr, exc)
        return None


@command(
    "topicList", "list every topic", arg("-c", "--clusterName", dest="cluster", help="only this cluster's")
)
async def topic_list(admin: AdminClient, args: argparse.Namespace) -> Output:
    topics = await (admin.topics_by_cluster(args.cluster) if args.cluster else admin.topic_list())
    return Output({"topicList": topics}, "\n".join(topics))


@command("topicRoute", "show where a topic lives", TOPIC)
async def topic_route(admin: AdminClient, args: argparse.Namespace) -> Output:
    route = await admin.topic_route(args.topic)
    queues = table(
        ["#Broker Name", "#Read Queues", "#Write Queues", "#Perm"],
        [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas],
    )
    brokers = table(
        ["#Broker Name", "#Cluster", "#BID", "#Addr"],
        [
            (b.broker_name, b.cluster, bid, addr)
            for b in route.broker_datas
            for bid, addr in sorted(b.addrs.items())
        ],
    )
    text = f"{queues}\n\n{brokers}"
    if route.order_topic_conf:
        text += f"\n\norderTopicConf: {route.order_topic_conf}"
    return Output(route.to_json(), text)


@command("topicStatus", "show the offsets of every queue of a topic", TOPIC)
async def topic_status(admin: AdminClient, args: argparse.Namespace) -> Output:
    stats = await admin.topic_stats(args.topic)
    text = table(
        ["#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated"],
        [
            (
                q.queue.broker_name,
                q.queue.queue_id,
                q.min_offset,
                q.max_offset,
                format_timestamp(q.last_update_timestamp),
            )
            for q in stats.queues
        ],
    )
    return Output(stats.to_json(), text)


@command(
    "updateTopic",
    "create or update a topic on a cluster's masters or one broker",
    TOPIC,
    TARGET,
    arg("-r", "--readQueueNums", dest="read_queue_nums", type=int, default=8),
    arg("-w", "--writeQueueNums", dest="write_queue_nums", type=int, default=8),
    arg("-p", "--perm", type=int, default=6, help="permission bits: 2 write, 4 read, 6 both"),
    arg("-o", "--order", type=_boolean, default=False, help="true for an order topic"),
    arg(
        "-a",
        "--attributes",
        help="attribute changes, +key=value or -key, comma separated: +message.type=FIFO "
        "(NORMAL, FIFO, DELAY, TRANSACTION); without it an existing topic keeps its own",
    ),
    broker_level=True,
)
async def update_topic(admin: AdminClient, args: argparse.Namespace) -> Output:
    config = TopicConfig(args.topic, args.read_queue_nums, args.write_queue_nums, args.perm, order=args.order)
    attributes = (args.attributes or "").strip()
    addrs = await admin.create_or_update_topic(
        config, cluster=args.cluster, broker_addr=args.broker_addr, attributes=attributes
    )
    shown = {**config.to_json(), "attributes": attributes} if attributes else config.to_json()
    text = "\n".join(f"create topic to {addr} success." for addr in addrs)
    text += "\n" + key_values(shown.items(), " = ")
    return Output({"topic": args.topic, "brokers": addrs, "config": shown}, text)


@command(
    "deleteTopic",
    "delete a topic from its brokers and the nameservers",
    TOPIC,
    arg("-c", "--clusterName", dest="cluster", help="the cluster to delete it from (default: its route)"),
)
async def delete_topic(admin: AdminClient, args: argparse.Namespace) -> Output:
    addrs = await admin.delete_topic(args.topic, cluster=args.cluster)
    text = f"delete topic [{args.topic}] from {', '.join(addrs)} and the nameservers success."
    return Output({"topic": args.topic, "brokers": addrs}, text)


# -- consumer and producer groups ------------------------------------------------------------


@command("groupList", "list every consumer group")
async def group_list(admin: AdminClient, args: argparse.Namespace) -> Output:
    groups = await admin.group_list()
    return Output({"groupList": groups}, "\n".join(groups))


@command(
    "consumerProgress",
    "every group's lag and TPS, or one group's progress per queue",
    arg("-g", "--groupName", dest="group"),
    arg("-t", "--topic", help="with -g: only this topic"),
)
async def consumer_progress(admin: AdminClient, args: argparse.Namespace) -> Output:
    if args.group is None:
        summaries = await admin.group_summaries()
        text = table(
            ["#Group", "#Count", "#Type", "#Model", "#TPS", "#Diff Total"],
            [
                (s.group, s.clients, s.consume_type, s.message_model, s.consume_tps, s.total_lag)
                for s in summaries
            ],
        )
        return Output({"groups": [s.to_json() for s in summaries]}, text)
    stats = await admin.consume_stats(args.group, args.topic)
    rows = [
        (
            q.queue.topic,
            q.queue.broker_name,
            q.queue.queue_id,
            q.broker_offset,
            q.consumer_offset,
            q.lag,
            format_timestamp(q.last_timestamp),
        )
        for q in stats.queues
    ]
    text = table(
        ["#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff", "#LastTime"], rows
    )
    text += f"\n\nConsume TPS: {stats.consume_tps:.2f}\nDiff Total: {stats.total_lag}"
    return Output(stats.to_json(), text)


@command("consumerConnection", "the clients of a consumer group and what they subscribe to", GROUP)
async def consumer_connection(admin: AdminClient, args: argparse.Namespace) -> Output:
    conn = await admin.consumer_connections(args.group)
    clients = table(
        ["#ClientId", "#ClientAddr", "#Language", "#Version"],
        [(c.client_id, c.client_addr, c.language, c.version) for c in conn.connections],
    )
    subscriptions = table(
        ["#Topic", "#SubExpression"], [(s.topic, s.expression) for s in conn.subscriptions.values()]
    )
    settings = key_values(
        [
            ("ConsumeType", conn.consume_type),
            ("MessageModel", conn.message_model),
            ("ConsumeFromWhere", conn.consume_from_where),
        ]
    )
    return Output(conn.to_json(), f"{clients}\n\nBelow is subscription:\n{subscriptions}\n\n{settings}")


@command(
    "producerConnection",
    "the producers of a group connected to a topic's brokers",
    arg("-g", "--producerGroup", dest="group", required=True),
    TOPIC,
)
async def producer_connection(admin: AdminClient, args: argparse.Namespace) -> Output:
    connections = await admin.producer_connections(args.group, args.topic)
    text = table(
        ["#ClientId", "#ClientAddr", "#Language", "#Version"],
        [(c.client_id, c.client_addr, c.language, c.version) for c in connections],
    )
    data = {"group": args.group, "topic": args.topic, "connectionSet": [c.to_json() for c in connections]}
    return Output(data, text)


@command(
    "resetOffsetByTime",
    "move a group's offsets on a topic to a point in time",
    GROUP,
    TOPIC,
    arg("-s", "--timestamp", type=_timestamp, required=True, help=f"{TIMESTAMP_FORMATS}; -1: to the end"),
    arg("-f", "--force", type=_boolean, default=True, help="false: only move offsets back, never forward"),
)
async def reset_offset_by_time(admin: AdminClient, args: argparse.Namespace) -> Output:
    offsets = await admin.reset_offset_by_time(args.group, args.topic, args.timestamp, force=args.force)
    rows = [(mq.broker_name, mq.queue_id, offset) for mq, offset in offsets.items()]
    text = f"reset {args.group} on {args.topic} to {args.timestamp} ({format_timestamp(args.timestamp)})\n"
    text += table(["#Broker Name", "#QID", "#Offset"], rows)
    data = {
        "group": args.group,
        "topic": args.topic,
        "timestamp": args.timestamp,
        "offsets": [{"brokerName": b, "queueId": q, "offset": o} for b, q, o in rows],
    }
    return Output(data, text)


@command(
    "updateSubGroup",
    "create or update a consumer group's settings",
    TARGET,
    GROUP,
    arg("-s", "--consumeEnable", dest="consume_enable", type=_boolean, default=True),
    arg(
        "-m",
        "--consumeFromMinEnable",
        dest="consume_from_min_enable",
        type=_boolean,
        default=True,
        help="stored for RocketMQ's tools; no broker acts on it (RocketMQ 4.9's does not either)",
    ),
    arg("-d", "--consumeBroadcastEnable", dest="consume_broadcast_enable", type=_boolean, default=True),
    arg("-q", "--retryQueueNums", dest="retry_queue_nums", type=int, default=1),
    arg("-r", "--retryMaxTimes", dest="retry_max_times", type=int, default=16),
    arg(
        "-i",
        "--brokerId",
        dest="broker_id",
        type=int,
        default=0,
        help="the broker of the set pulls are suggested to when slaveReadEnable is on (0: the master)",
    ),
    arg(
        "-w",
        "--whichBrokerWhenConsumeSlowly",
        dest="which_broker_when_consume_slowly",
        type=int,
        default=1,
        help="the broker a consumer far behind is sent to when slaveReadEnable is on",
    ),
    arg(
        "-a",
        "--notifyConsumerIdsChanged",
        dest="notify_consumer_ids_changed_enable",
        type=_boolean,
        default=True,
    ),
    arg(
        "-o",
        "--consumeMessageOrderly",
        dest="consume_message_orderly",
        type=_boolean,
        default=False,
        help="a FIFO group: pop consumers (RocketMQ 5 clients) get each message group in order",
    ),
    broker_level=True,
)
async def update_sub_group(admin: AdminClient, args: argparse.Namespace) -> Output:
    config = SubscriptionGroupConfig(
        args.group,
        consume_enable=args.consume_enable,
        consume_from_min_enable=args.consume_from_min_enable,
        consume_broadcast_enable=args.consume_broadcast_enable,
        retry_queue_nums=args.retry_queue_nums,
        retry_max_times=args.retry_max_times,
        broker_id=args.broker_id,
        which_broker_when_consume_slowly=args.which_broker_when_consume_slowly,
        notify_consumer_ids_changed_enable=args.notify_consumer_ids_changed_enable,
        consume_message_orderly=args.consume_message_orderly,
    )
    addrs = await admin.create_or_update_subscription_group(
        config, cluster=args.cluster, broker_addr=args.broker_addr
    )
    text = "\n".join(f"create subscription group to {addr} success." for addr in addrs)
    text += "\n" + key_values(config.to_json().items(), " = ")
    return Output({"group": args.group, "brokers": addrs, "config": config.to_json()}, text)


@command(
    "deleteSubGroup",
    "delete a consumer group's settings (and with -r true its offsets)",
    TARGET,
    GROUP,
    arg("-r", "--removeOffset", dest="remove_offset", type=_boolean, default=False),
    broker_level=True,
)
async def delete_sub_group(admin: AdminClient, args: argparse.Namespace) -> Output:
    addrs = await admin.delete_subscription_group(
        args.group, cluster=args.cluster, broker_addr=args.broker_addr, remove_offset=args.remove_offset
    )
    text = "\n".join(f"delete subscription group [{args.group}] from {addr} success." for addr in addrs)
    return Output({"group": args.group, "brokers": addrs, "removeOffset": args.remove_offset}, text)


# -- messages ----------------------------------------------------------------------------------


@command(
    "queryMsgById", "show a message by its offset msgId", arg("-i", "--msgId", dest="msg_id", required=True)
)
async def query_msg_by_id(admin: AdminClient, args: argparse.Namespace) -> Output:
    msg = await admin.view_message(args.msg_id)
    return Output(message_json(msg), message_text(msg))


class _Window(TypedDict, total=False):
    """The time window of a key query; a bound left out is the client's default."""

    begin_ms: int
    end_ms: int


@command(
    "queryMsgByKey",
    "find a topic's messages by key",
    TOPIC,
    arg("-k", "--msgKey", dest="key", required=True),
    arg("-b", "--beginTimestamp", dest="begin", type=_timestamp, default=0, help=TIMESTAMP_FORMATS),
    arg("-e", "--endTimestamp", dest="end", type=_timestamp, default=None, help=TIMESTAMP_FORMATS),
    arg("-c", "--maxNum", dest="max_num", type=int, default=64, help="most messages per broker"),
)
async def query_msg_by_key(admin: AdminClient, args: argparse.Namespace) -> Output:
    window: _Window = {"begin_ms": args.begin}
    if args.end is not None:
        window["end_ms"] = args.end
    messages = await admin.query_by_key(args.topic, args.key, max_num=args.max_num, **window)
    text = table(
        ["#Message ID", "#Unique Key", "#QID", "#Offset", "#Tags", "#Keys", "#Store Time"],
        [
            (
                m.msg_id,
                m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                m.queue_id,
                m.queue_offset,
                m.properties.get(PROPERTY_TAGS),
                m.properties.get(PROPERTY_KEYS),
                format_timestamp(m.store_timestamp),
            )
            for m in messages
        ],
    )
    return Output(
        {"topic": args.topic, "key": args.key, "messages": [message_json(m) for m in messages]}, text
    )


@command(
    "queryMsgByUniqueKey",
    "show a message by its client msgId (UNIQ_KEY)",
    arg("-i", "--msgId", dest="msg_id", required=True),
    TOPIC,
)
async def query_msg_by_unique_key(admin: AdminClient, args: argparse.Namespace) -> Output:
    messages = await admin.query_by_unique_key(args.topic, args.msg_id)
    if not messages:
        raise AdminError(f"no message with unique key {args.msg_id} in topic {args.topic!r}")
    text = "\n\n".join(message_text(m) for m in messages)
    return Output({"topic": args.topic, "messages": [message_json(m) for m in messages]}, text)


# -- brokers -----------------------------------------------------------------------------------


async def _broker_addrs(admin: AdminClient, args: argparse.Namespace) -> list[str]:
    """``-b``'s broker, or every master of ``-c``'s cluster."""
    if args.broker_addr is not None:
        return [args.broker_addr]
    addrs = sorted((await admin.cluster_info()).master_addrs(args.cluster).values())
    if not addrs:
        raise AdminError(f"cluster {args.cluster!r} has no master broker registered with the nameservers")
    return addrs


@dataclass(frozen=True, slots=True)
class _Member:
    """A broker of a listing: where the nameservers place it (unknown for ``-b``) and its address."""

    cluster: str | None
    broker_name: str | None
    broker_id: int | None
    addr: str


async def _members(admin: AdminClient, cluster: str | None) -> list[_Member]:
    """Every registered broker, masters and slaves, of ``cluster`` (None: of every cluster),
    by cluster, broker name and id."""
    info = await admin.cluster_info()
    members = [
        _Member(name, broker.broker_name, bid, addr)
        for name in sorted(info.clusters)
        if cluster in (None, name)
        for broker in info.brokers_of(name)
        for bid, addr in sorted(broker.addrs.items())
    ]
    if cluster is not None and not members:
        raise AdminError(f"cluster {cluster!r} is not registered with the nameservers")
    return members


@command(
    "brokerStatus",
    "a broker's runtime figures: its role and, for a master, its slaves' lag",
    TARGET,
    broker_level=True,
    cluster_scope="master and slave",
)
async def broker_status(admin: AdminClient, args: argparse.Namespace) -> Output:
    if args.cluster is None:
        return _per_broker(
            [args.broker_addr], [await admin.broker_runtime_info(args.broker_addr)], ": ", False
        )
    # Every broker of the cluster, as mqadmin's: one that does not answer is shown so, not fatal.
    addrs = [m.addr for m in await _members(admin, args.cluster)]
    answers = await asyncio.gather(*(admin.broker_runtime_info(a) for a in addrs), return_exceptions=True)
    tables: list[dict[str, str]] = []
    for addr, answer in zip(addrs, answers, strict=True):
        if isinstance(answer, AdminError):
            log.info("no runtime info from %s: %s", addr, answer)
            answer = {"error": str(answer)}
        elif isinstance(answer, BaseException):
            raise answer
        tables.append(answer)
    return _per_broker(addrs, tables, ": ", by_addr=True)


@command("getBrokerConfig", "a broker's running settings", TARGET, broker_level=True)
async def get_broker_config(admin: AdminClient, args: argparse.Namespace) -> Output:
    addrs = await _broker_addrs(admin, args)
    configs = await asyncio.gather(*(admin.broker_config(a) for a in addrs))
    return _per_broker(addrs, configs, " = ", by_addr=args.cluster is not None)


def _per_broker(
    addrs: Sequence[str], tables: Sequence[dict[str, str]], separator: str, by_addr: bool
) -> Output:
    """``-b``: the broker's table as is; ``-c``: each master's table under its address."""
    if not by_addr:
        return Output(tables[0], key_values(tables[0].items(), separator))
    text = "\n\n".join(
        f"============{a}============\n{key_values(t.items(), separator)}"
        for a, t in zip(addrs, tables, strict=True)
    )
    return Output(dict(zip(addrs, tables, strict=True)), text)


@command(
    "haStatus",
    "replication: each master's slaves and their lag, each slave's link to its master",
    ANY_TARGET,
    broker_level=True,
    cluster_scope="master and slave",
)
async def ha_status(admin: AdminClient, args: argparse.Namespace) -> Output:
    if args.broker_addr is not None:
        members = [_Member(None, None, None, args.broker_addr)]
        answers: list[BrokerHAStatus | str] = [await admin.ha_status(args.broker_addr)]
    else:
        members = await _members(admin, args.cluster)
        if not members:
            raise AdminError("no broker is registered with the nameservers")
        answers = list(await asyncio.gather(*(_ha_or_error(admin, m.addr) for m in members)))
    entries = [_ha_entry(m, a) for m, a in zip(members, answers, strict=True)]
    # A slave's distance from its master, when its master is in the listing.
    ends = {e["addr"]: e["maxOffset"] for e in entries if e["side"] == "master" and not e["error"]}
    for entry in entries:
        if entry["side"] == "slave" and not entry["error"]:
            end = ends.get(entry["masterAddr"])
            entry["behindMasterBytes"] = None if end is None else max(0, end - entry["maxOffset"])
    return Output({"brokers": entries}, _ha_text(entries))


async def _ha_or_error(admin: AdminClient, addr: str) -> BrokerHAStatus | str:
    """The broker's replication status, or why there is none (the listing goes on)."""
    try:
        return await admin.ha_status(addr)
    except AdminError as exc:
        log.info("no replication status from %s: %s", addr, exc)
        return str(exc)


def _ha_entry(member: _Member, answer: BrokerHAStatus | str) -> dict[str, Any]:
    """One broker of ``haStatus --json``: its place, then its side's figures (or ``error``)."""
    entry: dict[str, Any] = {
        "cluster": member.cluster,
        "brokerName": member.broker_name,
        "brokerId": member.broker_id,
        "addr": member.addr,
    }
    if isinstance(answer, str):
        # Where it would sit were it answering: brokerId 0 is a master's place.
        side = "master" if member.broker_id == 0 else "slave"
        return {
            **entry,
            "brokerRole": None,
            "side": side,
            "error": answer,
            "maxOffset": None,
        }
    entry["brokerName"] = member.broker_name or answer.broker_name
    entry.update(brokerRole=answer.broker_role, side=answer.side, error=None, maxOffset=answer.max_offset)
    if answer.side == "master":
        entry.update(
            haAddr=answer.ha_addr,
            slaves=[s.to_json() for s in answer.slaves],
            inSyncSlaves=sum(1 for s in answer.slaves if s.in_sync),
            problems=list(answer.problems),
        )
    else:
        entry.update(
            masterAddr=answer.master_addr,
            masterHaAddr=answer.master_ha_addr,
            connected=answer.connected,
            lastFrameMs=answer.last_frame_ms,
            lastSyncMs=answer.last_sync_ms,
            problem=answer.problem,
            syncProblem=answer.sync_problem,
            behindMasterBytes=None,
        )
    return entry


def _ha_text(entries: list[dict[str, Any]]) -> str:
    """The masters, the slaves connected to each, and the slave brokers: one table each."""
    masters = [e for e in entries if e["side"] == "master"]
    slaves = [e for e in entries if e["side"] == "slave"]
    sections = []
    if masters:
        rows = [
            (
                m["brokerName"],
                m["addr"],
                m["brokerRole"],
                m.get("haAddr"),
                m["maxOffset"],
                None if m["error"] else len(m["slaves"]),
                None if m["error"] else m["inSyncSlaves"],
                m["error"] or (m["problems"][-1] if m["problems"] else None),
            )
            for m in masters
        ]
        headers = [
            "#Broker Name",
            "#Addr",
            "#Role",
            "#HA Addr",
            "#Max Offset",
            "#Slaves",
            "#In Sync",
            "#Problem",
        ]
        sections.append("Masters:\n" + table(headers, rows))
        links = [
            (
                m["brokerName"],
                m["addr"],
                s["addr"],
                s["ackedOffset"],
                s["behindBytes"],
                _duration(s["behindMs"]),
                s["inSync"],
                format_timestamp(s["lastReportMs"]),
            )
            for m in masters
            if not m["error"]
            for s in m["slaves"]
        ]
        headers = [
            "#Broker Name",
            "#Master Addr",
            "#Slave (HA peer)",
            "#Acked Offset",
            "#Behind Bytes",
            "#Behind",
            "#In Sync",
            "#Last Report",
        ]
        body = table(headers, links) if links else "none: no slave is connected"
        sections.append("Slaves connected to each master:\n" + body)
    if slaves:
        slave_rows = [
            (
                s["brokerName"],
                s["addr"],
                s["brokerRole"],
                s.get("masterAddr"),
                s.get("masterHaAddr"),
                None if s["error"] else s["connected"],
                s["maxOffset"],
                s.get("behindMasterBytes"),
                format_timestamp(s["lastFrameMs"]) if not s["error"] else None,
                s["error"] or s["problem"] or s["syncProblem"],
            )
            for s in slaves
        ]
        headers = [
            "#Broker Name",
            "#Addr",
            "#Role",
            "#Master Addr",
            "#Master HA Addr",
            "#Connected",
            "#Max Offset",
            "#Behind Bytes",
            "#Last Frame",
            "#Problem",
        ]
        sections.append("Slaves:\n" + table(headers, slave_rows))
    return "\n\n".join(sections)


def _duration(ms: int) -> str:
    """How long behind: ``0ms``, ``850ms``, ``12.3s``, ``4m05s``, ``2h07m``."""
    if ms < 1_000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    minutes, seconds = divmod(ms // 1000, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


@command(
    "runMaintenance",
    "run a broker maintenance job now",
    arg("-b", "--brokerAddr", dest="broker_addr", required=True),
    arg("-j", "--job", required=True, choices=MAINTENANCE_JOBS),
    broker_level=True,
)
async def run_maintenance(admin: AdminClient, args: argparse.Namespace) -> Output:
    run = await admin.run_maintenance(args.broker_addr, args.job)
    text = key_values(
        [
            ("Job", run.job),
            ("Started", format_timestamp(run.started_ms)),
            ("Duration (ms)", f"{run.duration_ms:.3f}"),
            ("OK", run.ok),
            ("Result", run.result),
        ]
    )
    return Output(run.to_json(), text)


@command(
    "maintenanceStatus",
    "who runs each maintenance job on a broker (the platform, or the broker on fallback)",
    arg("-b", "--brokerAddr", dest="broker_addr", required=True),
    broker_level=True,
)
async def maintenance_status(admin: AdminClient, args: argparse.Namespace) -> Output:
    status = await admin.maintenance_status(args.broker_addr)
    rows: list[tuple[str, object]] = [("standaloneMaintenance", status.mode)]
    for job, state in status.jobs.items():
        driver = "broker (fallback: no platform pass within the lease)" if state.fallback else state.driver
        last = state.last_run
        ran = f"{format_timestamp(last.started_ms)} by {last.runner}: {last.result}" if last else "never"
        rows += [(f"{job}.driver", driver), (f"{job}.leaseMs", state.lease_ms), (f"{job}.lastRun", ran)]
    rows.append(("store.writes", f"refused: {status.disk_full}" if status.disk_full else "accepted"))
    for damaged in status.damaged_ranges:
        where = f"[{damaged['start']}, {damaged['end']}) ({damaged['size']} bytes)"
        rows.append(("store.damagedRange", f"{where}: {damaged['reason']}"))
    return Output(status.to_json(), key_values(rows))


# -- parser and dispatch --------------------------------------------------------------------


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-n",
        "--namesrvAddr",
        dest="namesrv_addr",
        default=None,
        help=f"nameservers, host:port[;host:port] (default: ${NAMESRV_ENV})",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for each answer")
    common.add_argument(
        "--accessKey",
        dest="access_key",
        default=None,
        help=f"ACL account for brokers with aclEnable (default: ${ACCESS_KEY_ENV})",
    )
    common.add_argument(
        "--secretKey", dest="secret_key", default=None, help=f"its secret (default: ${SECRET_KEY_ENV})"
    )
    # TLS, as mqadmin's -Dtls.enable=true and tls.client.*; the console's environment too.
    common.add_argument(
        "--tls",
        dest="tls",
        action="store_true",
        default=None,
        help=f"connect over TLS (servers with tlsMode = enforcing; default: ${TLS_ENABLE_ENV})",
    )
    common.add_argument(
        "--tlsTrustCertPath",
        dest="tls_trust",
        default=None,
        help=f"check the servers against these certificates (PEM; default: ${TLS_TRUST_CERT_PATH_ENV}; "
        "none: not checked, as RocketMQ's clients)",
    )
    common.add_argument(
        "--tlsCertPath",
        dest="tls_cert",
        default=None,
        help=f"a client certificate to show (PEM; default: ${TLS_CERT_PATH_ENV})",
    )
    common.add_argument(
        "--tlsKeyPath", dest="tls_key", default=None, help=f"its key (PEM; default: ${TLS_KEY_PATH_ENV})"
    )
    return common


def tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS the command connects with, from its options, else the environment (whose
    certificate paths count only with TLS on, as the console's).

    Raises ConfigError for a QUIVER_TLS_ENABLE that is not a boolean, a file that cannot be loaded,
    or a certificate option given without TLS on."""
    flags = {"trust_cert_path": args.tls_trust, "cert_path": args.tls_cert, "key_path": args.tls_key}
    enabled = args.tls
    if enabled is None:
        try:
            enabled = parse_bool(os.environ.get(TLS_ENABLE_ENV, "false"))
        except ValueError as exc:
            raise ConfigError(f"{TLS_ENABLE_ENV}: {exc}") from None
    if not enabled:
        if any(flags.values()):
            raise ConfigError(
                f"--tlsTrustCertPath, --tlsCertPath and --tlsKeyPath need --tls (or {TLS_ENABLE_ENV})"
            )
        return None
    env = {
        "trust_cert_path": TLS_TRUST_CERT_PATH_ENV,
        "cert_path": TLS_CERT_PATH_ENV,
        "key_path": TLS_KEY_PATH_ENV,
    }
    paths = {
        name: flags[name] if flags[name] is not None else os.environ.get(env[name], "") for name in flags
    }
    return client_context(**paths)


def add_admin_commands(subparsers: Any) -> None:
    """Add every admin command to an argparse ``add_subparsers()`` object."""
    common = _common_options()
    for cmd in COMMANDS.values():
        parser = subparsers.add_parser(cmd.name, parents=[common], help=cmd.help, description=cmd.help)
        for spec in cmd.arguments:
            if spec in (TARGET, ANY_TARGET):
                target = parser.add_mutually_exclusive_group(required=spec == TARGET)
                target.add_argument("-b", "--brokerAddr", dest="broker_addr", help="one broker, ip:port")
                target.add_argument(
                    "-c", "--clusterName", dest="cluster", help=f"every {cmd.cluster_scope} of a cluster"
                )
            else:
                flags, kwargs = spec
                parser.add_argument(*flags, **kwargs)
        parser.set_defaults(func=run_admin_command, admin_command=cmd)


def run_admin_command(args: argparse.Namespace) -> int:
    """Run the parsed admin command; print its output; return the exit status."""
    cmd: AdminCommand = args.admin_command
    namesrv = args.namesrv_addr if args.namesrv_addr is not None else os.environ.get(NAMESRV_ENV, "")
    if not namesrv.strip() and not (cmd.broker_level and getattr(args, "broker_addr", None)):
        return fail(f"no nameserver address: give -n host:port[;host:port] or set {NAMESRV_ENV}")
    try:
        output = asyncio.run(_run(cmd, args, namesrv))
    except BrokerCoreError as exc:
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # the last guard: a bug must still end in one line, not a traceback
        log.info("%s failed", cmd.name, exc_info=True)
        return fail(f"{cmd.name} failed unexpectedly: {type(exc).__name__}: {exc} (-v shows the traceback)")
    print(output.render(args.json))
    return 0


async def _run(cmd: AdminCommand, args: argparse.Namespace, namesrv: str) -> Output:
    access_key = args.access_key if args.access_key is not None else os.environ.get(ACCESS_KEY_ENV)
    secret_key = args.secret_key if args.secret_key is not None else os.environ.get(SECRET_KEY_ENV)
    async with AdminClient(
        namesrv, timeout=args.timeout, access_key=access_key, secret_key=secret_key, tls=tls_context(args)
    ) as admin:
        return await cmd.run(admin, args)


def fail(message: str) -> int:
    """Print one ``error:`` line on stderr; return exit status 1."""
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="quiver-admin", description="Manage a Quiver (RocketMQ) cluster.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    add_admin_commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return parser


def run_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv``, set up logging (``-v``: INFO), run the chosen command; its exit status."""
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )
    return int(args.func(args))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``quiver-admin``."""
    return run_command_line(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
