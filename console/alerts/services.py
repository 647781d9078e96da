"""The alert check the beat job runs: read each monitored group's live numbers, then raise,
update or resolve its alerts, and announce each raise and resolve (console/alerts/notify.py).
Every group, monitored or not, also gets an alert when file expiry deletes messages it had
not consumed (``check_expiry``: read from each master's latest expiry runs).

Live numbers come from the same two calls per master as the group list (the offset
snapshot and the subscription configs: console/groups/services.py ``group_rows``).  A
cluster is unread — every figure unknown, so no alert of it is raised or resolved — when
its nameservers do not answer, a master does not answer, it has no master at all, or a
master the maintenance jobs saw lately is no longer listed (a broker that went down is
dropped by the nameservers: its groups' lag is unknown, not zero).

The same check watches replication (``check_replication``): a slave whose HA link is down,
or that is further behind its master than ``QUIVER_REPLICATION_MAX_BEHIND_BYTES`` /
``_SECONDS``, gets a ``replication`` alert, resolved once it is connected and within them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import orjson
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from redis.exceptions import RedisError

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.model.maintenance import FILE_EXPIRY
from console.alerts import rules
from console.alerts.models import Alert
from console.clusters import replication
from console.core.brokers import admin_call
from console.core.redis import redis_client
from console.groups.models import GroupMonitor
from console.groups.services import GroupRow, group_rows
from console.maintenance.runs import RECENT_KEPT, recent_runs
from console.maintenance.services import KNOWN_KEY
from console.quiver import platform_settings
from nameserver.clusters import ClusterRef, managed_clusters

log = logging.getLogger(__name__)

RAISED = "raised"
RESOLVED = "resolved"
# The last check's summary (JSON, with its time) and how many checks ran: the alerts page
# says when the figures were last checked, and a check that stopped shows.
LAST_CHECK_KEY = "quiver:alerts:last"
CHECKS_KEY = "quiver:alerts:checks"
# Per broker address: the start (ms, the broker's clock) of the newest expiry run checked.
EXPIRY_SEEN_KEY = "quiver:alerts:expiry-seen"


@dataclass
class LiveNumbers:
    """A cluster's groups as read now; ``problem`` says why they are unknown (if they are)."""

    rows: dict[str, GroupRow] = field(default_factory=dict)
    problem: str = ""

    def reading(self, group: str) -> rules.Reading:
        if self.problem:
            return rules.UNREAD
        row = self.rows.get(group)
        if row is None:  # every broker answered and none knows the group: nothing behind
            return rules.Reading(0, 0.0, 0)
        return rules.Reading(row["lag"], row["secondsBehind"], row["clients"])


@dataclass
class Event:
    """An alert raised or resolved by this check, to announce once the check is done."""

    kind: str  # RAISED or RESOLVED
    alert: Alert
    webhook_url: str


class CheckSummaryJson(TypedDict):
    """A check's summary as Redis keeps it and the alerts page shows it."""

    atMs: int
    clusters: int
    groups: int
    raised: int
    resolved: int
    unknown: list[str]


@dataclass
class CheckSummary:
    clusters: int = 0
    groups: int = 0
    raised: int = 0
    resolved: int = 0
    unknown: list[str] = field(default_factory=list)
    at_ms: int = field(default_factory=lambda: time.time_ns() // 1_000_000)

    def to_json(self) -> CheckSummaryJson:
        return {
            "atMs": self.at_ms,
            "clusters": self.clusters,
            "groups": self.groups,
            "raised": self.raised,
            "resolved": self.resolved,
            "unknown": self.unknown,
        }


def _recently_seen_masters(cluster: str) -> set[str]:
    """Masters of ``cluster`` the maintenance jobs' broker discovery saw lately."""
    forget_ms = platform_settings()["FORGET_BROKER_SECONDS"] * 1000
    now = time.time() * 1000
    try:
        entries = redis_client().hgetall(KNOWN_KEY)
    except RedisError as exc:
        log.warning("alerts: cannot read the brokers seen lately: %s", exc)
        return set()
    seen = set()
    for addr, raw in entries.items():
        entry = orjson.loads(raw)
        if entry.get("cluster") == cluster and entry.get("master") and now - entry["seenMs"] <= forget_ms:
            seen.add(addr.decode() if isinstance(addr, bytes) else addr)
    return seen


async def _read(admin: AdminClient) -> tuple[set[str], list[GroupRow], list[str]]:
    masters = set((await admin.cluster_info()).master_addrs().values())
    rows, unreadable = await group_rows(admin)
    return masters, rows, unreadable


def read_live(cluster: ClusterRef) -> LiveNumbers:
    """Every group's lag, seconds behind and clients on ``cluster``, or why they are unknown."""
    try:
        masters, rows, unreadable = admin_call(cluster.namesrv_addr, _read)
    except (AdminError, TimeoutError, OSError) as exc:
        return LiveNumbers(problem=f"cluster {cluster.name} did not answer: {exc or 'timed out'}")
    if unreadable:
        return LiveNumbers(problem="not answering: " + "; ".join(unreadable))
    if not masters:
        return LiveNumbers(problem=f"cluster {cluster.name} lists no master broker")
    gone = sorted(_recently_seen_masters(cluster.name) - masters)
    if gone:
        return LiveNumbers(problem="seen lately but no longer listed: " + ", ".join(gone))
    return LiveNumbers({r["group"]: r for r in rows})


def growth_of(cluster: str, group: str, minutes: int, live_lag: int | None, now_ms: int) -> rules.Growth:
    """The group's lag over the last ``minutes``: the offset history, then the live figure."""
    period_ms = platform_settings()["OFFSET_PERSIST_SECONDS"] * 1000
    slack_ms = max(3 * period_ms, 10_000)
    start = now_ms - minutes * 60_000
    series = rules.lag_series(platform_settings()["HISTORY_DIR"], cluster, group, start - slack_ms, now_ms)
    if live_lag is not None:
        series.append((now_ms, live_lag))
    return rules.growth(series, start, slack_ms)


def _open(
    cluster: str,
    group: str,
    kind: str,
    threshold: float,
    value: float,
    message: str,
    now: Any,
    on_open: dict[str, Any],
) -> Alert | None:
    """Open a ``kind`` alert of ``group``; when one is open already (the one-open-alert
    constraint refuses another), update that one with ``on_open`` and return None."""
    try:
        with transaction.atomic():
            return Alert.objects.create(
                cluster=cluster,
                group=group,
                kind=kind,
                threshold=threshold,
                value=value,
                last_value=value,
                message=message,
                raised_at=now,
            )
    except IntegrityError:
        Alert.objects.filter(cluster=cluster, group=group, kind=kind, resolved_at__isnull=True).update(
            **on_open, updated_at=timezone.now()
        )
        return None


def _raise(cluster: str, group: str, verdict: rules.Verdict, now: Any) -> Alert | None:
    """Open an alert; None when another check opened it first (that one is updated)."""
    value, threshold = float(verdict.value or 0), float(verdict.threshold or 0)
    message = f"{group} on {cluster}: {verdict.message}"
    return _open(
        cluster,
        group,
        verdict.kind,
        threshold,
        value,
        message,
        now,
        {"last_value": value, "threshold": threshold, "message": message},
    )


def _update(cluster: str, group: str, verdict: rules.Verdict) -> None:
    Alert.objects.filter(cluster=cluster, group=group, kind=verdict.kind, resolved_at__isnull=True).update(
        last_value=float(verdict.value or 0),
        threshold=float(verdict.threshold or 0),
        message=f"{group} on {cluster}: {verdict.message}",
        updated_at=timezone.now(),
    )


def _resolve(alert: Alert, value: float | None, why: str, now: Any) -> Alert | None:
    """Close ``alert`` if it is still open; None when another check closed it first."""
    changes: dict[str, Any] = {"resolved_at": now, "resolution": why, "updated_at": now}
    if value is not None:
        changes["last_value"] = float(value)
    if not Alert.objects.filter(pk=alert.pk, resolved_at__isnull=True).update(**changes):
        return None
    return Alert.objects.get(pk=alert.pk)


def apply_verdicts(
    cluster: str, group: str, verdicts: list[rules.Verdict], open_alerts: dict[str, Alert], now: Any
) -> list[tuple[str, Alert]]:
    """Raise, update or resolve ``group``'s alerts by kind; return what was raised or resolved.

    ``open_alerts`` maps kind to the group's open alert as read before the check.
    """
    events: list[tuple[str, Alert]] = []
    for verdict in verdicts:
        current = open_alerts.get(verdict.kind)
        if verdict.state == rules.BREACHED:
            if current is None:
                raised = _raise(cluster, group, verdict, now)
                if raised is not None:
                    events.append((RAISED, raised))
            else:
                _update(cluster, group, verdict)
        elif verdict.state in (rules.CLEAR, rules.OFF) and current is not None:
            why = verdict.message
            if verdict.state == rules.OFF:
                why = f"threshold removed ({verdict.message})"
            resolved = _resolve(current, verdict.value, why, now)
            if resolved is not None:
                events.append((RESOLVED, resolved))
    return events


def check_cluster(cluster: ClusterRef, summary: CheckSummary) -> list[Event]:
    """Check every monitored group of ``cluster``; resolve alerts of groups no longer monitored.

    Expiry and replication alerts are no group threshold's: ``check_expiry`` and
    ``check_replication`` keep them.
    """
    monitors = {m.group: m for m in GroupMonitor.objects.filter(cluster=cluster.name)}
    open_by_group: dict[str, dict[str, Alert]] = {}
    open_alerts = Alert.objects.filter(cluster=cluster.name, resolved_at__isnull=True).exclude(
        kind__in=(Alert.EXPIRED, Alert.REPLICATION)
    )
    for alert in open_alerts:
        open_by_group.setdefault(alert.group, {})[alert.kind] = alert
    if not monitors and not open_by_group:
        return []
    summary.clusters += 1
    global_hook = platform_settings()["ALERT_WEBHOOK_URL"]
    events: list[Event] = []
    now = timezone.now()
    for group in sorted(set(open_by_group) - set(monitors)):
        for alert in open_by_group[group].values():
            resolved = _resolve(alert, None, "thresholds removed", now)
            if resolved is not None:
                events.append(Event(RESOLVED, resolved, global_hook))
    if not monitors:
        return events
    live = read_live(cluster)
    if live.problem:
        summary.unknown.append(f"{cluster.name}: {live.problem}")
        log.warning("alerts: %s: figures unknown, nothing raised or resolved: %s", cluster.name, live.problem)
    now_ms = int(now.timestamp() * 1000)
    for group, monitor in sorted(monitors.items()):
        summary.groups += 1
        reading = live.reading(group)
        grown = None
        if monitor.growing_minutes and not live.problem:
            grown = growth_of(cluster.name, group, monitor.growing_minutes, reading.lag, now_ms)
        verdicts = rules.evaluate(rules.Thresholds.of(monitor), reading, grown)
        hook = monitor.webhook_url or global_hook
        for kind, alert in apply_verdicts(cluster.name, group, verdicts, open_by_group.get(group, {}), now):
            events.append(Event(kind, alert, hook))
    return events


# -- messages deleted by expiry before their group consumed them ------------------------------


@dataclass
class ExpiryLoss:
    """What the expiry runs seen by one check deleted of one group's unconsumed messages."""

    messages: int = 0
    topics: set[str] = field(default_factory=set)
    brokers: set[str] = field(default_factory=set)
    reasons: set[str] = field(default_factory=set)

    def describe(self, group: str, cluster: str) -> str:
        return (
            f"{group} on {cluster}: {self.messages} message(s) of {', '.join(sorted(self.topics))} "
            f"deleted by file expiry on {', '.join(sorted(self.brokers))} before the group consumed them "
            f"({'; '.join(sorted(self.reasons))})"
        )


async def _master_statuses(admin: AdminClient) -> tuple[dict[str, str], list[Any]]:
    masters = (await admin.cluster_info()).master_addrs()
    calls = [admin.maintenance_status(addr) for addr in masters.values()]
    return masters, list(await asyncio.gather(*calls, return_exceptions=True))


async def _snapshots(admin: AdminClient, addrs: list[str]) -> list[Any]:
    return list(await asyncio.gather(*(admin.offset_snapshot(a) for a in addrs), return_exceptions=True))


def new_expiry_losses(
    cluster: str, masters: dict[str, str], statuses: list[Any], summary: CheckSummary
) -> tuple[dict[str, ExpiryLoss], dict[str, int]]:
    """Unconsumed messages deleted per group by the expiry runs this check is the first to
    see, and the newest run seen per broker (to note once the alerts are written).

    Each master keeps its latest runs that deleted something (whoever drove them), and the
    platform's own runs are recorded in Redis too (they outlive a broker's restart); a run
    is new when it started (the broker's clock) after the newest one an earlier check saw
    on that broker.  A slave's copy expires with its master's, so only masters' runs count.
    """
    try:
        client = redis_client()
        seen = {
            (k.decode() if isinstance(k, bytes) else k): int(v)
            for k, v in client.hgetall(EXPIRY_SEEN_KEY).items()
        }
        recorded = recent_runs(client, RECENT_KEPT, FILE_EXPIRY)
    except RedisError as exc:
        summary.unknown.append(f"{cluster}: expiry runs not checked: {exc}")
        return {}, {}
    names = {addr: name for name, addr in masters.items()}
    runs: dict[tuple[str, int], dict[str, Any]] = {}  # (broker addr, started ms) -> details
    for run in recorded:
        started = int(run.details.get("brokerStartedMs") or 0)
        if run.broker_addr in names and started and run.details.get("unconsumed"):
            runs[(run.broker_addr, started)] = run.details
    for (name, addr), status in zip(masters.items(), statuses, strict=True):
        if isinstance(status, BaseException):
            summary.unknown.append(f"{cluster}: expiry runs of {name} ({addr}) unknown: {status}")
            continue
        for deletion in status.deletions:
            runs[(addr, deletion.started_ms)] = dict(deletion.details)
    losses: dict[str, ExpiryLoss] = {}
    newest: dict[str, int] = {}
    for (addr, started), details in sorted(runs.items()):
        last = seen.get(addr, 0)
        if started <= last:
            continue
        newest[addr] = max(newest.get(addr, last), started)
        for lost in details.get("unconsumed") or []:
            loss = losses.setdefault(str(lost["group"]), ExpiryLoss())
            loss.messages += int(lost.get("messages") or 0)
            loss.topics.add(str(lost.get("topic", "")))
            loss.brokers.add(names[addr])
            loss.reasons.add(str(details.get("reason", "")))
    return losses, newest


def _raise_expiry(cluster: str, group: str, loss: ExpiryLoss, now: Any) -> Alert | None:
    """Open the group's expiry alert, or add ``loss`` to the one open (None then)."""
    message = loss.describe(group, cluster)
    value = float(loss.messages)
    return _open(
        cluster,
        group,
        Alert.EXPIRED,
        0.0,
        value,
        message,
        now,
        {"last_value": F("last_value") + loss.messages, "message": message},
    )


def _still_behind(snapshots: list[Any]) -> set[str] | None:
    """Groups with a committed offset below its queue's first offset on some master; None
    when a master did not answer (unknown, so nothing is resolved)."""
    behind: set[str] = set()
    for snap in snapshots:
        if isinstance(snap, BaseException):
            return None
        behind.update(q.group for q in snap.queues if q.consumer_offset < q.min_offset)
    return behind


def check_expiry(cluster: ClusterRef, summary: CheckSummary) -> list[Event]:
    """Raise an alert for every group whose unconsumed messages file expiry deleted since
    the last check (on any master, whoever ran it), and resolve such alerts once the group
    no longer has an offset below its queues' first offsets (its consumers came back and
    moved to the queues' new start, or its offsets were reset).

    One alert per group stays open; a further deletion adds to it (``last_value`` is the
    total deleted while it is open).  It goes to the console and to the group's webhook
    (the global one when the group has no monitor), as a lag alert does.
    """
    try:
        masters, statuses = admin_call(cluster.namesrv_addr, _master_statuses)
    except (AdminError, TimeoutError, OSError) as exc:
        summary.unknown.append(f"{cluster.name}: expiry runs unknown: {exc or 'timed out'}")
        return []
    losses, newest = new_expiry_losses(cluster.name, masters, statuses, summary)
    now = timezone.now()
    global_hook = platform_settings()["ALERT_WEBHOOK_URL"]
    hooks = {m.group: m.webhook_url for m in GroupMonitor.objects.filter(cluster=cluster.name)}
    events: list[Event] = []
    for group, loss in sorted(losses.items()):
        raised = _raise_expiry(cluster.name, group, loss, now)
        if raised is not None:
            events.append(Event(RAISED, raised, hooks.get(group) or global_hook))
    if newest:
        try:
            redis_client().hset(EXPIRY_SEEN_KEY, mapping={addr: str(ms) for addr, ms in newest.items()})
        except RedisError as exc:  # the next check sees these runs again: their alerts are open
            log.warning("alerts: could not note the expiry runs checked: %s", exc)
    open_alerts = list(
        Alert.objects.filter(cluster=cluster.name, kind=Alert.EXPIRED, resolved_at__isnull=True)
    )
    if not open_alerts or not masters:
        return events
    addrs = list(masters.values())
    try:
        behind = _still_behind(admin_call(cluster.namesrv_addr, lambda admin: _snapshots(admin, addrs)))
    except (AdminError, TimeoutError, OSError):
        behind = None
    if behind is None:  # a master did not answer: unknown, nothing resolved
        return events
    for alert in open_alerts:
        if alert.group in behind:
            continue
        resolved = _resolve(alert, None, "the group's offsets are past the deleted messages", now)
        if resolved is not None:
            events.append(Event(RESOLVED, resolved, hooks.get(alert.group) or global_hook))
    return events


def _down_why(broker_set: replication.BrokerSet, slave: replication.SlaveRow) -> str:
    if broker_set["master"] is None:
        return "master down"
    reasons = [slave["error"], broker_set["error"], *slave["problems"]]
    return next((r for r in reasons if r), "")


def check_replication(cluster: ClusterRef, summary: CheckSummary) -> list[Event]:
    """Raise a ``replication`` alert for every slave of ``cluster`` whose HA link is down
    (or that does not answer, or whose master is down) or that is behind its master by more
    than the limits, and resolve it once the slave is connected and within them.

    A slave the nameservers stopped listing is remembered (``replication.note_slaves``) and
    stays alerted until it is back, or resolved as forgotten once neither the listing nor
    the memory has had it for ``QUIVER_FORGET_BROKER_SECONDS``.  Nothing is raised or
    resolved when the nameservers do not answer.  Events go to the global webhook.
    """
    remembered = replication.remembered_slaves(cluster.name)
    limits = replication.LagLimits.from_settings()
    try:
        sets = admin_call(
            cluster.namesrv_addr, lambda admin: replication.broker_sets(admin, remembered, limits)
        )
    except (AdminError, TimeoutError, OSError) as exc:
        summary.unknown.append(f"{cluster.name}: replication unknown: {exc or 'timed out'}")
        return []
    replication.note_slaves(cluster.name, sets)
    now = timezone.now()
    hook = platform_settings()["ALERT_WEBHOOK_URL"]
    open_alerts = {
        a.group: a
        for a in Alert.objects.filter(cluster=cluster.name, kind=Alert.REPLICATION, resolved_at__isnull=True)
    }
    events: list[Event] = []
    checked: set[str] = set()
    for broker_set in sets:
        for slave in broker_set["slaves"]:
            if slave["brokerId"] is None:  # a link no listed slave accounts for: shown, not alerted
                continue
            name = replication.slave_key(broker_set["brokerName"], slave["brokerId"])
            checked.add(name)
            verdict = rules.replication(
                slave["connected"],
                slave["behindBytes"],
                slave["behindMs"],
                limits.max_bytes,
                limits.max_ms,
                _down_why(broker_set, slave),
            )
            verdict = dataclasses.replace(verdict, message=f"slave {slave['addr']} {verdict.message}")
            current = {Alert.REPLICATION: open_alerts[name]} if name in open_alerts else {}
            for kind, alert in apply_verdicts(cluster.name, name, [verdict], current, now):
                events.append(Event(kind, alert, hook))
    forget_s = platform_settings()["FORGET_BROKER_SECONDS"]
    for name, alert in sorted(open_alerts.items()):
        # Neither listed nor remembered: gone for good once untouched that long (a Redis
        # that did not answer hides the memory for a while, not for ever).
        if name not in checked and (now - alert.updated_at).total_seconds() > forget_s:
            why = f"the slave has not been listed for {forget_s} s: forgotten"
            resolved = _resolve(alert, None, why, now)
            if resolved is not None:
                events.append(Event(RESOLVED, resolved, hook))
    return events


def check_all(announce: Callable[[Event], None]) -> CheckSummary:
    """Check every managed cluster; ``announce`` each raise and resolve (after the DB has it).

    Never raises for a cluster's failure: its figures are unknown and the next check
    tries again.
    """
    summary = CheckSummary()
    for cluster in managed_clusters():
        try:
            events = (
                check_cluster(cluster, summary)
                + check_expiry(cluster, summary)
                + check_replication(cluster, summary)
            )
        except Exception:  # one cluster's trouble never stops the others' check
            log.exception("alerts: checking cluster %s failed", cluster.name)
            summary.unknown.append(f"{cluster.name}: check failed")
            continue
        for event in events:
            if event.kind == RAISED:
                summary.raised += 1
            else:
                summary.resolved += 1
            try:
                announce(event)
            except Exception:
                log.exception("alerts: announcing alert %s failed", event.alert.pk)
    return summary


def record_check(summary: CheckSummary) -> None:
    """Keep ``summary`` as the last check's and count the check (Redis; best effort)."""
    try:
        pipe = redis_client().pipeline(transaction=False)
        pipe.set(LAST_CHECK_KEY, orjson.dumps(summary.to_json()))
        pipe.incr(CHECKS_KEY)
        pipe.execute()
    except RedisError as exc:
        log.warning("alerts: could not record the check: %s", exc)


def last_check() -> CheckSummaryJson | None:
    """The last check's summary, or None (never ran, or Redis did not answer)."""
    try:
        raw = redis_client().get(LAST_CHECK_KEY)
    except RedisError:
        return None
    return orjson.loads(raw) if raw else None
