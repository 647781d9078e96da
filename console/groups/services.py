"""Consumer groups over broker_core's AdminClient: the reads the pages and the API show,
and the write actions, one function each (create or update the subscription config, delete
after the impact check, reset offsets, save or remove thresholds) that checks the actor's
right, acts and writes the audit row (see ``console.core.actions``).

The group list costs three calls per master broker whatever the number of groups: the
offset snapshot (every committed offset beside its queue's end and the store time at the
offset, plus the online groups), the subscription-group configs, and the pop books (how
RocketMQ 5 clients consume: messages in flight, acks per second).  Lag is counted in
messages and in seconds behind (snapshot time minus the store time of the message at
the committed offset).  A broker that does not answer leaves its groups' figures unknown
(None), never 0, and is named.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import orjson

from broker_core.client.admin import AdminClient
from broker_core.client.adminmodels import BrokerPopStatus, PopGroupTotals, PopStatus, as_message_queue
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.model.groupconfig import SubscriptionGroupConfig, SubscriptionGroupConfigJson
from broker_core.remoting import fastjson
from broker_core.remoting.codes import ResponseCode
from console.audit.services import audited
from console.core.actions import Actor, NotConfirmed, require
from console.core.brokers import admin_call, on_every_master
from console.groups.models import GroupMonitor
from console.maintenance import history
from nameserver.clusters import ClusterRef

SYSTEM_GROUPS = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
    }
)


def is_system_group(name: str) -> bool:
    return name in SYSTEM_GROUPS or name.startswith("CID_RMQ_SYS_")


class PopFigures(TypedDict):
    """A group's pop consumption at a glance (RocketMQ 5 clients): messages in flight and
    held (FIFO), acks per second over the last minute, and since the brokers started the
    acked, redelivered and dead-lettered counts."""

    inFlight: int
    held: int
    ackedTps: float
    acked: int
    redelivered: int
    deadLettered: int


class GroupRow(TypedDict):
    """One group of the list.  ``lag`` and ``secondsBehind`` are None when a broker did not
    answer (its offsets may hold the group's); ``config`` is the first master's
    subscription config, None when no master has one; ``fifo`` says it is a FIFO group
    (``consumeMessageOrderly``); ``pop`` holds its pop figures, None when it has not
    consumed by pop."""

    group: str
    lag: int | None
    secondsBehind: float | None
    topics: list[str]
    clients: int
    messageModel: str | None
    consumeType: str | None
    consumeTps: float
    config: SubscriptionGroupConfigJson | None
    online: bool
    fifo: bool
    pop: PopFigures | None


@dataclass
class _GroupTally:
    """A group's figures while the masters' snapshots and configs are summed."""

    lag: int = 0
    seconds_behind: float = 0.0
    topics: set[str] = field(default_factory=set)
    clients: int = 0
    message_model: str | None = None
    consume_type: str | None = None
    consume_tps: float = 0.0
    config: SubscriptionGroupConfigJson | None = None
    pop: PopGroupTotals | None = None


def pop_figures(totals: PopGroupTotals) -> PopFigures:
    """A group's summed pop figures as the group list shows them."""
    return {
        "inFlight": totals.in_flight,
        "held": totals.held,
        "ackedTps": round(totals.acked_tps, 3),
        "acked": totals.acked,
        "redelivered": totals.redelivered,
        "deadLettered": totals.dead_lettered,
    }


class TopicTotal(TypedDict):
    """A group's progress on one topic: its queues' offsets and lag summed."""

    topic: str
    brokerOffset: int
    consumerOffset: int
    lag: int


class GroupDetail(TypedDict):
    """A group's per-queue progress (``QueueProgress.to_json`` rows with the ``clientId``
    holding the queue when clients are online), its clients and subscriptions
    (``ConsumerConnection.to_json``, None when none is online) and its config per broker."""

    group: str
    totalLag: int
    consumeTps: float
    topics: list[TopicTotal]
    online: bool
    connection: dict[str, Any] | None
    queues: list[dict[str, Any]]
    configs: dict[str, SubscriptionGroupConfigJson]


class QueueOffsets(TypedDict):
    """One queue's range and the group's committed offset on it (-1: none)."""

    min: int
    max: int
    current: int


class ResetRow(TypedDict):
    """The change a reset makes on one queue (``delta``: messages skipped, negative when
    replayed); the queue's range is None for a queue the topic's stats did not list."""

    brokerName: str
    queueId: int
    currentOffset: int
    newOffset: int
    delta: int
    minOffset: int | None
    maxOffset: int | None


class ResetResult(ResetRow):
    """A queue's change as carried out: the offset read back and whether it is the new one."""

    resultOffset: int
    ok: bool


class ResetHow(TypedDict, total=False):
    """A reset mode's argument: ``timestamp`` (epoch ms) or ``offsets`` ({(brokerName,
    queueId): offset}); neither for earliest and latest."""

    timestamp: int | None
    offsets: dict[tuple[str, int], int]


class PlanSummary(TypedDict):
    """A reset plan's totals and, when it skips unconsumed messages, a warning in words."""

    current: int
    new: int
    delta: int
    skipped: int
    replayed: int
    warning: str


class GroupImpact(TypedDict):
    """What deleting a group would touch."""

    group: str
    clientsOnline: int
    totalLag: int
    topics: list[str]
    safe: bool


class LagTrend(TypedDict):
    """Per topic, ``[minute_ms, value]`` points of lag (messages) and seconds behind, and the
    window they cover."""

    lag: dict[str, list[list[int]]]
    secondsBehind: dict[str, list[list[float]]]
    since: int
    until: int


class MonitorData(TypedDict, total=False):
    """Validated ``MonitorWrite`` data: a group's alert thresholds (a missing one is off)."""

    minClients: int
    maxLag: int | None
    maxSecondsBehind: int | None
    growingMinutes: int | None
    webhookUrl: str


async def group_rows(admin: AdminClient) -> tuple[list[GroupRow], list[str]]:
    """Every group with lag, seconds behind, topics, clients online, model, TPS, whether it
    is a FIFO group and its pop figures."""
    info = await admin.cluster_info()
    masters = info.master_addrs()
    snaps, configs, pops = await asyncio.gather(
        asyncio.gather(*(admin.offset_snapshot(a) for a in masters.values()), return_exceptions=True),
        asyncio.gather(*(admin.subscription_groups(a) for a in masters.values()), return_exceptions=True),
        asyncio.gather(
            *(admin.broker_pop_status(a, broker_name=n) for n, a in masters.items()), return_exceptions=True
        ),
    )
    unreadable = []
    for (name, addr), *answers in zip(masters.items(), snaps, configs, pops, strict=True):
        failure = next((a for a in answers if isinstance(a, BaseException)), None)
        if failure is not None:
            unreadable.append(f"{name} ({addr}): {failure}")
    groups: dict[str, _GroupTally] = {}
    for snap in snaps:
        if isinstance(snap, BaseException):
            continue
        for q in snap.queues:
            t = groups.setdefault(q.group, _GroupTally())
            t.lag += q.lag
            t.topics.add(q.topic)
            if q.store_timestamp and q.lag:
                t.seconds_behind = max(t.seconds_behind, (snap.timestamp_ms - q.store_timestamp) / 1000)
        for name, online in snap.online_groups.items():
            t = groups.setdefault(name, _GroupTally())
            t.clients = max(t.clients, int(online.get("clients") or 0))
            t.message_model = online.get("messageModel")
            t.consume_type = online.get("consumeType")
            t.consume_tps += float(online.get("consumeTps") or 0.0)
    for table in configs:
        if isinstance(table, BaseException):
            continue
        for name, config in table.items():
            t = groups.setdefault(name, _GroupTally())
            t.config = t.config or config.to_json()
    popped = PopStatus(tuple(p for p in pops if isinstance(p, BrokerPopStatus)))
    for name, totals in popped.groups().items():
        groups.setdefault(name, _GroupTally()).pop = totals
    rows: list[GroupRow] = []
    for name, t in sorted(groups.items()):
        message_model = t.message_model
        if message_model is None and t.config is not None:
            message_model = "BROADCASTING" if t.config.get("consumeBroadcastEnable") is False else None
        # A group's offsets may live on a broker that did not answer: its lag is unknown.
        rows.append(
            {
                "group": name,
                "lag": None if unreadable else t.lag,
                "secondsBehind": None if unreadable else round(t.seconds_behind, 3),
                "topics": sorted(t.topics),
                "clients": t.clients,
                "messageModel": message_model,
                "consumeType": t.consume_type,
                "consumeTps": t.consume_tps,
                "config": t.config,
                "online": t.clients > 0,
                "fifo": bool((t.config and t.config.get("consumeMessageOrderly")) or (t.pop and t.pop.fifo)),
                "pop": pop_figures(t.pop) if t.pop is not None else None,
            }
        )
    return rows, unreadable


def filter_groups(
    rows: list[GroupRow], search: str = "", include_system: bool = False, sort: str = "group"
) -> list[GroupRow]:
    needle = search.strip().lower()
    shown = [
        r
        for r in rows
        if (include_system or not is_system_group(r["group"]))
        and (not needle or needle in r["group"].lower())
    ]
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    if key not in ("group", "lag", "secondsBehind", "consumeTps", "clients"):
        raise AdminError(f"cannot sort by {key!r} (group, lag, secondsBehind, consumeTps, clients)")

    def order(row: Mapping[str, Any]) -> tuple[bool, Any]:
        return row[key] is None, row[key] if row[key] is not None else 0

    return sorted(shown, key=order, reverse=descending)


def topic_totals(queues: list[dict[str, Any]]) -> list[TopicTotal]:
    """Per topic, the sums of the per-queue broker offsets, consumer offsets and lag: how far
    the group got through each topic, summed the way the per-queue table reads."""
    totals: dict[str, TopicTotal] = {}
    for q in queues:
        row = totals.setdefault(
            q["topic"], {"topic": q["topic"], "brokerOffset": 0, "consumerOffset": 0, "lag": 0}
        )
        row["brokerOffset"] += q["brokerOffset"]
        row["consumerOffset"] += max(0, q["consumerOffset"])
        row["lag"] += q["lag"]
    return [totals[t] for t in sorted(totals)]


async def group_detail(admin: AdminClient, group: str) -> GroupDetail:
    """Per-queue progress, clients and subscriptions, and the subscription config per broker."""
    info = await admin.cluster_info()
    masters = info.master_addrs()
    try:
        stats = await admin.consume_stats(group)
        queues = [q.to_json() for q in stats.queues]
        tps, lag = stats.consume_tps, stats.total_lag
    except AdminError as exc:
        if exc.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            raise
        queues, tps, lag = [], 0.0, 0
    try:
        connection = (await admin.consumer_connections(group)).to_json()
    except AdminError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        connection = None
    if connection is not None:
        owners = await queue_owners(admin, group, [c["clientId"] for c in connection["connectionSet"]])
        for q in queues:
            q["clientId"] = owners.get((q["topic"], q["brokerName"], q["queueId"]))
    tables = await asyncio.gather(*(admin.subscription_groups(a) for a in masters.values()))
    configs = {
        name: table[group].to_json() for name, table in zip(masters, tables, strict=True) if group in table
    }
    if not queues and connection is None and not configs:
        raise AdminError(
            f"no consumer group {group!r} on any broker", code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        )
    return {
        "group": group,
        "totalLag": lag,
        "consumeTps": tps,
        "topics": topic_totals(queues),
        "online": connection is not None,
        "connection": connection,
        "queues": queues,
        "configs": configs,
    }


async def queue_owners(
    admin: AdminClient, group: str, client_ids: list[str]
) -> dict[tuple[str, str, int], str]:
    """Which online client holds each queue, from each client's running info (its mqTable).

    One request per client, not per queue; a client whose answer cannot be read (the C++
    client's is not JSON) simply owns nothing here.
    """
    answers = await asyncio.gather(
        *(admin.consumer_running_info(group, client) for client in client_ids), return_exceptions=True
    )
    owners: dict[tuple[str, str, int], str] = {}
    for client, answer in zip(client_ids, answers, strict=True):
        if isinstance(answer, BaseException):
            continue
        try:
            table = fastjson.loads(answer).get("mqTable") or {}
            for key in table:
                mq = as_message_queue(key)
                owners[(mq.topic, mq.broker_name, mq.queue_id)] = client
        except (fastjson.FastjsonError, ValueError, AttributeError, KeyError, TypeError):
            continue
    return owners


async def current_offsets(admin: AdminClient, group: str, topic: str) -> dict[MessageQueue, QueueOffsets]:
    """Per queue of ``topic``: the group's committed offset and the queue's min and max."""
    stats = await admin.topic_stats(topic)
    committed: dict[MessageQueue, int] = {}
    try:
        for q in (await admin.consume_stats(group, topic)).queues:
            committed[q.queue] = q.consumer_offset
    except AdminError as exc:
        if exc.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            raise
    return {
        q.queue: {"min": q.min_offset, "max": q.max_offset, "current": committed.get(q.queue, -1)}
        for q in stats.queues
    }


async def plan_reset(admin: AdminClient, group: str, topic: str, mode: str, **how: Any) -> list[ResetRow]:
    """The per-queue change a reset would make: current offset, new offset, messages moved.

    ``mode`` is ``timestamp`` (``timestamp`` ms), ``earliest``, ``latest`` or ``exact``
    (``offsets``: {(brokerName, queueId): offset}, each within the queue's range).
    A group the cluster does not know is refused here as the reset itself refuses it, so a
    preview never shows a plan that cannot be carried out.
    """
    if not await group_known(admin, group):
        raise AdminError(
            f"there is no consumer group {group!r} in this cluster: check the name, or start a "
            "consumer of it (or create it) first",
            code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
        )
    now = await current_offsets(admin, group, topic)
    if mode == "timestamp":
        targets = await admin.offsets_by_time(topic, how["timestamp"])
    elif mode == "earliest":
        targets = {q: v["min"] for q, v in now.items()}
    elif mode == "latest":
        targets = {q: v["max"] for q, v in now.items()}
    elif mode == "exact":
        wanted = how["offsets"]
        known = {(q.broker_name, q.queue_id): q for q in now}
        unknown = sorted(set(wanted) - set(known))
        if unknown:
            raise AdminError(f"{topic} has no queue(s) {', '.join(f'{b}:{i}' for b, i in unknown)}")
        targets = {known[key]: offset for key, offset in wanted.items()}
        for q, offset in targets.items():
            low, high = now[q]["min"], now[q]["max"]
            if not low <= offset <= high:
                raise AdminError(
                    f"offset {offset} of {q.broker_name}:{q.queue_id} is outside [{low}, {high}]"
                )
    else:
        raise AdminError(f"unknown reset mode {mode!r} (timestamp, earliest, latest, exact)")
    plan: list[ResetRow] = []
    for q, new in sorted(targets.items()):
        offsets = now.get(q)
        current = offsets["current"] if offsets else -1
        plan.append(
            {
                "brokerName": q.broker_name,
                "queueId": q.queue_id,
                "currentOffset": current,
                "newOffset": new,
                "delta": new - max(current, 0),
                "minOffset": offsets["min"] if offsets else None,
                "maxOffset": offsets["max"] if offsets else None,
            }
        )
    return plan


async def stored_fifo(admin: AdminClient, group: str) -> bool:
    """Whether any master stores ``group`` as a FIFO group (``consumeMessageOrderly``)."""
    masters = (await admin.cluster_info()).master_addrs()
    tables = await asyncio.gather(*(admin.subscription_groups(a) for a in masters.values()))
    configs = [table[group] for table in tables if group in table]
    return any(config.consume_message_orderly for config in configs)


def with_stored_fifo(cluster: ClusterRef, group: str, data: dict[str, Any]) -> dict[str, Any]:
    """Validated ``GroupConfigWrite`` data with ``consumeMessageOrderly`` as stored when it
    does not name it: an update that does not mention FIFO leaves the group as it is."""
    if "consumeMessageOrderly" in data:
        return data
    fifo = admin_call(cluster.namesrv_addr, lambda admin: stored_fifo(admin, group))
    return {**data, "consumeMessageOrderly": fifo}


async def group_known(admin: AdminClient, group: str) -> bool:
    """Whether the cluster knows ``group`` (a config, committed offsets or a retry topic)."""
    return group in await admin.group_list()


def plan_summary(plan: Sequence[ResetRow], mode: str, how: ResetHow, now_ms: int) -> PlanSummary:
    """Totals of a reset plan, and a warning in words when it skips messages not consumed yet.

    A time in the future is the dangerous case: no message is stored at or after it, so every
    queue moves to its end and the whole backlog is skipped (RocketMQ resolves it the same way).
    """
    skipped = sum(p["delta"] for p in plan if p["delta"] > 0)
    summary: PlanSummary = {
        "current": sum(p["currentOffset"] for p in plan),
        "new": sum(p["newOffset"] for p in plan),
        "delta": sum(p["delta"] for p in plan),
        "skipped": skipped,
        "replayed": -sum(p["delta"] for p in plan if p["delta"] < 0),
        "warning": "",
    }
    if mode == "timestamp" and (how.get("timestamp") or 0) > now_ms:
        summary["warning"] = (
            "That time is in the future: no message is stored after it, so every queue would move "
            f"to its end, skipping {skipped} message(s) this group has not consumed."
        )
    elif skipped:
        summary["warning"] = f"This skips {skipped} message(s) this group has not consumed yet."
    return summary


async def apply_reset(admin: AdminClient, group: str, topic: str, plan: list[ResetRow]) -> list[ResetResult]:
    """Carry out ``plan`` exactly (online consumers are told), then read back each queue's offset."""
    wanted = {MessageQueue(topic, p["brokerName"], p["queueId"]): p["newOffset"] for p in plan}
    await admin.reset_offsets_exactly(group, wanted)
    after = await current_offsets(admin, group, topic)
    result: list[ResetResult] = []
    for p in plan:
        q = MessageQueue(topic, p["brokerName"], p["queueId"])
        offsets = after.get(q)
        now = offsets["current"] if offsets else -1
        result.append({**p, "resultOffset": now, "ok": now == p["newOffset"]})
    return result


async def impact(admin: AdminClient, group: str) -> GroupImpact:
    """What deleting ``group`` would touch: its clients online and its lag."""
    detail = await group_detail(admin, group)
    clients = len(detail["connection"]["connectionSet"]) if detail["connection"] else 0
    return {
        "group": group,
        "clientsOnline": clients,
        "totalLag": detail["totalLag"],
        "topics": sorted({q["topic"] for q in detail["queues"]}),
        "safe": clients == 0,
    }


def lag_trend(history_dir: Path, cluster: str, group: str, hours: int, now_ms: int) -> LagTrend:
    """The group's lag over the last ``hours`` from the offset history (console/maintenance/
    history.py), per topic and minute: ``{"lag": {topic: [[minute_ms, messages]]},
    "secondsBehind": {topic: [[minute_ms, seconds]]}, "since": ms, "until": ms}`` (the
    window, so a chart spans it whatever the points).

    Each queue counts with its last snapshot of the minute; a topic's lag is the sum over its
    queues, its seconds behind the worst queue's (snapshot time minus the store time at the
    committed offset; 0 when caught up).  Reads only the days the window touches.
    """
    since = now_ms - hours * 3_600_000
    latest: dict[tuple[str, int, str, int], dict[str, Any]] = {}
    for row in history.offset_rows(history_dir, since, now_ms, containing=orjson.dumps(group)):
        if row.get("group") != group or row.get("cluster") != cluster or not since <= row["ts"] <= now_ms:
            continue
        key = (row["topic"], row["ts"] // 60_000 * 60_000, row["broker"], row["queue_id"])
        if key not in latest or latest[key]["ts"] <= row["ts"]:
            latest[key] = row
    lag: dict[str, dict[int, int]] = {}
    behind: dict[str, dict[int, float]] = {}
    for (topic, minute, _broker, _queue), row in latest.items():
        queue_lag = history.queue_lag(row)
        stored = row.get("store_timestamp") or 0
        seconds = max(0.0, (row["ts"] - stored) / 1000) if queue_lag and stored > 0 else 0.0
        lag.setdefault(topic, {}).setdefault(minute, 0)
        lag[topic][minute] += queue_lag
        worst = behind.setdefault(topic, {})
        worst[minute] = max(worst.get(minute, 0.0), seconds)
    return {
        "lag": {t: sorted([m, n] for m, n in points.items()) for t, points in sorted(lag.items())},
        "secondsBehind": {t: sorted([m, s] for m, s in pts.items()) for t, pts in sorted(behind.items())},
        "since": since,
        "until": now_ms,
    }


def _store_group(
    actor: Actor, cluster: ClusterRef, config: SubscriptionGroupConfig, broker_cluster: str, action: str
) -> list[str]:
    require(actor, cluster, "operate")

    async def write(admin: AdminClient) -> list[str]:
        if broker_cluster:
            return list(await admin.create_or_update_subscription_group(config, cluster=broker_cluster))
        return await on_every_master(
            admin, lambda addr: admin.create_or_update_subscription_group(config, broker_addr=addr)
        )

    with audited(actor, action, cluster.name, config.group_name) as audit:
        audit.after = config.to_json()
        return admin_call(cluster.namesrv_addr, write)


def create_group(
    actor: Actor, cluster: ClusterRef, config: SubscriptionGroupConfig, broker_cluster: str = ""
) -> list[str]:
    """Store a new group's subscription config on every master (or ``broker_cluster``'s)
    (operators; audited ``group.create``); the brokers written."""
    return _store_group(actor, cluster, config, broker_cluster, "group.create")


def update_group(
    actor: Actor, cluster: ClusterRef, config: SubscriptionGroupConfig, broker_cluster: str = ""
) -> list[str]:
    """Store the group's changed subscription config where ``create_group`` would
    (operators; audited ``group.update``); the brokers written."""
    return _store_group(actor, cluster, config, broker_cluster, "group.update")


def delete_group(actor: Actor, cluster: ClusterRef, group: str, confirm: str) -> list[str]:
    """Delete the group's config, offsets and retry topic on every master (admins), only when
    ``confirm`` names it again (``NotConfirmed`` otherwise, nothing done); the audit row
    (``group.delete``) keeps the impact read just before.  The brokers it was deleted on."""
    require(actor, cluster, "admin")
    if confirm != group:
        raise NotConfirmed("type the group's name to confirm")

    async def remove(admin: AdminClient) -> list[str]:
        return await on_every_master(
            admin, lambda addr: admin.delete_subscription_group(group, broker_addr=addr, remove_offset=True)
        )

    with audited(actor, "group.delete", cluster.name, group) as audit:
        audit.before = admin_call(cluster.namesrv_addr, lambda admin: impact(admin, group))
        deleted = admin_call(cluster.namesrv_addr, remove)
        audit.after = {"deletedOn": deleted}
    return deleted


@dataclass(frozen=True)
class ResetSpec:
    """How to move a group on ``topic``: ``mode`` timestamp (``timestamp``, epoch ms),
    earliest, latest, or exact (``offsets``: {(brokerName, queueId): offset})."""

    topic: str
    mode: str
    timestamp: int | None = None
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)

    @classmethod
    def of(cls, data: dict[str, Any]) -> ResetSpec:
        """The spec from validated ``OffsetReset`` data."""
        offsets = {(o["brokerName"], o["queueId"]): o["offset"] for o in data.get("offsets") or []}
        return cls(data["topic"], data["mode"], data.get("timestamp"), offsets)

    @property
    def how(self) -> ResetHow:
        """The mode's argument, as ``plan_reset`` and ``plan_summary`` take it."""
        if self.mode == "timestamp":
            return {"timestamp": self.timestamp}
        if self.mode == "exact":
            return {"offsets": self.offsets}
        return {}


def by_queue(rows: Sequence[Mapping[str, Any]], key: str) -> dict[str, Any]:
    """``{"broker:queue": row[key]}`` for an audit row."""
    return {f"{p['brokerName']}:{p['queueId']}": p[key] for p in rows}


def preview_reset(actor: Actor, cluster: ClusterRef, group: str, spec: ResetSpec) -> list[ResetRow]:
    """The per-queue change a reset would make (current, new, delta); changes nothing, so
    viewers may ask too."""
    require(actor, cluster, "view")
    return admin_call(
        cluster.namesrv_addr, lambda admin: plan_reset(admin, group, spec.topic, spec.mode, **spec.how)
    )


def reset_offsets(actor: Actor, cluster: ClusterRef, group: str, spec: ResetSpec) -> list[ResetResult]:
    """Reset the group's offsets on ``spec.topic`` (online consumers are told) and read them
    back (operators; audited ``group.offsets.reset`` with each queue's offset before and
    after); the per-queue result, each with ``resultOffset`` and ``ok``."""
    require(actor, cluster, "operate")
    with audited(actor, "group.offsets.reset", cluster.name, f"{group}@{spec.topic}") as audit:
        plan = admin_call(
            cluster.namesrv_addr, lambda admin: plan_reset(admin, group, spec.topic, spec.mode, **spec.how)
        )
        audit.before = by_queue(plan, "currentOffset")
        result = admin_call(cluster.namesrv_addr, lambda admin: apply_reset(admin, group, spec.topic, plan))
        audit.after = by_queue(result, "resultOffset")
    return result


def save_thresholds(actor: Actor, cluster: ClusterRef, group: str, data: MonitorData) -> GroupMonitor:
    """Create or replace ``group``'s alert thresholds from validated ``MonitorWrite`` data
    (operators; audited ``group.monitor.save``); the alert check in console/alerts reads them."""
    require(actor, cluster, "operate")
    with audited(actor, "group.monitor.save", cluster.name, group) as audit:
        before = GroupMonitor.objects.filter(cluster=cluster.name, group=group).first()
        audit.before = before.to_json() if before else None
        row, _ = GroupMonitor.objects.update_or_create(
            cluster=cluster.name,
            group=group,
            defaults={
                "min_clients": data.get("minClients", 0),
                "max_lag": data.get("maxLag"),
                "max_seconds_behind": data.get("maxSecondsBehind"),
                "growing_minutes": data.get("growingMinutes"),
                "webhook_url": data.get("webhookUrl") or "",
            },
        )
        audit.after = row.to_json()
    return row


def remove_thresholds(actor: Actor, cluster: ClusterRef, group: str) -> bool:
    """Remove ``group``'s thresholds (operators; audited ``group.monitor.delete``); False,
    and no audit row, when it had none."""
    require(actor, cluster, "operate")
    row = GroupMonitor.objects.filter(cluster=cluster.name, group=group).first()
    if row is None:
        return False
    with audited(actor, "group.monitor.delete", cluster.name, group) as audit:
        audit.before = row.to_json()
        row.delete()
    return True
