"""Run the maintenance jobs on the brokers the nameservers know: locked, recorded, reported.

Celery tasks (tasks.py) stay thin and call these.  Every job run on a broker:

1. takes the job's overlap lock for that broker in Redis (``SET NX`` with expiry), so
   two beats, a slow run or a manual run never run the same job on one broker twice at
   once; a run that finds the lock taken is recorded as skipped;
2. asks the broker to run the job (QUIVER_RUN_MAINTENANCE_JOB) through the admin client;
3. records the outcome (runs.py): ok, failed (the broker refused or the job failed
   there) or unreachable (the broker did not answer: reported now, retried next period).

The delay scan runs as one self-rescheduling chain per broker: each pass asks for the due
messages, learns from the broker when the next one falls due, and schedules the next
pass for then (at most ``DELAY_SCAN_MAX_SLEEP_MS`` later, so new delayed messages, which
are due a whole delay level after they arrive, are always seen in time).  A token in
Redis names the live chain; beat's one-second safety net starts a chain for any broker
without one, and a chain that loses its token (a newer chain took over) stops.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypedDict

import orjson
import redis
from redis.exceptions import LockError

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError, AdminUnreachableError
from broker_core.model.maintenance import DELAY_SCAN, FILE_EXPIRY, OFFSET_PERSISTENCE
from console.core.brokers import admin_call
from console.core.redis import as_text, redis_client
from console.maintenance import history, runs
from console.maintenance.jobs import HISTORY_RETENTION, PLATFORM, job_specs
from console.maintenance.runs import FAILED, OK, SKIPPED, UNREACHABLE, RunRecord, note_fanout, now_ms, record
from console.quiver import platform_settings
from nameserver.clusters import managed_clusters

log = logging.getLogger(__name__)

LOCK_KEY = "quiver:lock:{job}:{addr}"
# Every broker address seen through the nameservers, with when it was last listed.
KNOWN_KEY = "quiver:maint:known"
CHAIN_KEY = "quiver:chain:delay_scan:{addr}"
# How long a chain's token outlives its last pass: beat restarts a chain silent this long.
CHAIN_GRACE_MS = 3000

# Compare-and-set on the chain token: extend (or drop) it only while it is still ours.
_EXTEND_IF_OURS = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"
)
_DROP_IF_OURS = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class KnownBroker(TypedDict):
    """A broker seen through the nameservers (Redis ``KNOWN_KEY``, by address): its cluster,
    the nameservers that listed it, its name, whether it is a master, when last seen."""

    cluster: str
    namesrv: str
    name: str
    master: bool
    seenMs: int


class BrokerRef(TypedDict):
    """Which broker a row is about."""

    brokerAddr: str
    brokerName: str
    cluster: str


class UnconsumedLoss(TypedDict):
    """Messages of ``topic`` an expiry run deleted before ``group`` consumed them."""

    group: str
    topic: str
    messages: int
    queues: int


class DeletionRow(TypedDict):
    """One expiry run that deleted something, as the page and the API show it."""

    brokerAddr: str
    brokerName: str
    cluster: str
    startedMs: int
    runner: str
    reason: str
    segments: list[str]
    commitLogFilesDeleted: int
    fromOffset: int
    toOffset: int
    messages: int
    messagesByTopic: dict[str, int]
    unconsumed: list[UnconsumedLoss]
    unconsumedMessages: int


class BrokerDriver(TypedDict):
    """A broker seen lately, as it reports its maintenance.  ``jobs`` holds each job's
    ``MaintenanceJobState.to_json`` and ``damaged`` the store's damaged ranges, as the
    broker sent them; when the broker did not answer, ``reachable`` is False, ``error``
    says why and the rest is empty."""

    brokerAddr: str
    brokerName: str
    cluster: str
    master: bool
    reachable: bool
    error: str
    mode: str
    jobs: dict[str, dict[str, Any]]
    fallback: list[str]
    deletions: list[DeletionRow]
    damaged: list[dict[str, Any]]
    diskFull: str | None


class JobOverview(TypedDict):
    """What the maintenance page and API show.  ``jobs`` are ``JobStatus.to_json`` with each
    broker's run given its ``driver``, ``fallback``, ``lastRunBy`` and ``lastRunByBrokerMs``;
    ``recent`` are ``RunRecord.to_json``."""

    jobs: list[dict[str, Any]]
    brokers: list[BrokerDriver]
    fallbackBrokers: list[str]
    recent: list[dict[str, Any]]
    deletions: list[DeletionRow]


@dataclass(frozen=True)
class BrokerTarget:
    """A broker a job runs on: its address, its name, the cluster (and nameservers) it is in.

    ``missing`` marks a broker the nameservers no longer list although it was seen lately
    (they drop a broker whose connection closes): it is still tried, and reported.
    """

    cluster: str
    namesrv_addr: str
    broker_name: str
    addr: str
    missing: bool = False

    def to_args(self) -> list[str | bool]:
        """As Celery task arguments (JSON)."""
        return [self.cluster, self.namesrv_addr, self.broker_name, self.addr, self.missing]


def known_brokers(client: redis.Redis) -> dict[str, KnownBroker]:
    """Every broker seen through the nameservers lately, by address: its cluster, the
    nameservers that listed it, its name, whether it is a master, when it was last seen."""
    return {as_text(k): orjson.loads(v) for k, v in client.hgetall(KNOWN_KEY).items()}


def discover(job: str, *, masters_only: bool = True) -> list[BrokerTarget]:
    """The brokers registered with every managed cluster's nameservers, and those seen
    within ``QUIVER_FORGET_BROKER_SECONDS`` that are missing now (a broker that went down
    is reported until it is back or forgotten, not silently dropped).

    A cluster whose nameservers do not answer is recorded as an unreachable run of
    ``job`` (under ``namesrv:<addrs>``); its brokers seen lately are still tried.
    """
    client = redis_client()
    known = known_brokers(client)
    seen: dict[str, KnownBroker] = {}
    errors = []
    at = now_ms()
    for cluster in managed_clusters():
        try:
            info = admin_call(cluster.namesrv_addr, lambda admin: admin.cluster_info())
        except (AdminError, TimeoutError) as exc:
            errors.append(f"{cluster.name}: {exc}")
            log.warning("%s: nameservers of cluster %s did not answer: %s", job, cluster.name, exc)
            run = RunRecord(
                job,
                f"namesrv:{cluster.namesrv_addr}",
                at,
                now_ms() - at,
                UNREACHABLE,
                f"nameservers did not answer: {exc}",
                cluster=cluster.name,
            )
            record(client, run)
            continue
        for broker in info.brokers.values():
            for broker_id, addr in broker.addrs.items():
                seen[addr] = {
                    "cluster": cluster.name,
                    "namesrv": cluster.namesrv_addr,
                    "name": broker.broker_name,
                    "master": int(broker_id) == 0,
                    "seenMs": at,
                }
    forget_ms = platform_settings()["FORGET_BROKER_SECONDS"] * 1000
    missing = {a: e for a, e in known.items() if a not in seen and at - e["seenMs"] <= forget_ms}
    pipe = client.pipeline(transaction=False)
    for addr, entry in seen.items():
        pipe.hset(KNOWN_KEY, addr, orjson.dumps(entry))
    for addr in set(known) - set(seen) - set(missing):
        pipe.hdel(KNOWN_KEY, addr)
    pipe.execute()
    targets = [
        BrokerTarget(e["cluster"], e["namesrv"], e["name"], addr, missing=addr in missing)
        for addr, e in sorted({**seen, **missing}.items(), key=lambda item: (item[1]["name"], item[0]))
        if e["master"] or not masters_only
    ]
    note_fanout(client, job, [t.addr for t in targets], "; ".join(errors))
    return targets


def lease_ms(job: str) -> int:
    """How long the broker's own timer should stand by after one of our passes of ``job``:
    until our schedule has missed its next passes (the broker then takes the job over).

    The broker never waits less than its own ``*LeaseMillis`` setting (1 s for the delay
    scan), so by default only slow schedules (a long expiry period) lengthen it.
    """
    if job == DELAY_SCAN:
        return 2 * platform_settings()["DELAY_SCAN_MAX_SLEEP_MS"]
    return int(job_specs()[job].overdue_after_seconds * 1000)


def _scheduled_run(admin: AdminClient, target: BrokerTarget, job: str) -> Any:
    return admin.run_maintenance(target.addr, job, scheduled=True, lease_ms=lease_ms(job))


async def _persist_and_snapshot(admin: AdminClient, target: BrokerTarget) -> tuple[Any, Any]:
    run = await _scheduled_run(admin, target, OFFSET_PERSISTENCE)
    return run, await admin.offset_snapshot(target.addr)


def _run_delay_scan(target: BrokerTarget) -> tuple[str, dict[str, Any]]:
    run = admin_call(target.namesrv_addr, lambda admin: _scheduled_run(admin, target, DELAY_SCAN))
    details = {**run.details, "brokerStartedMs": run.started_ms, "brokerDurationMs": run.duration_ms}
    return run.result, details


def _run_offset_persistence(target: BrokerTarget) -> tuple[str, dict[str, Any]]:
    run, snapshot = admin_call(target.namesrv_addr, lambda admin: _persist_and_snapshot(admin, target))
    rows, counters = history.append_snapshot(
        platform_settings()["HISTORY_DIR"], snapshot, target.cluster, target.addr
    )
    details = {"offsetRows": rows, "counterRows": counters, "brokerDurationMs": run.duration_ms}
    return f"offsets persisted; {rows} queue offsets and {counters} counters recorded", details


def _run_file_expiry(target: BrokerTarget) -> tuple[str, dict[str, Any]]:
    run = admin_call(target.namesrv_addr, lambda admin: _scheduled_run(admin, target, FILE_EXPIRY))
    # The broker's start time names the run as the broker's status lists it (deletions).
    return run.result, {**run.details, "brokerStartedMs": run.started_ms}


RUNNERS: dict[str, Callable[[BrokerTarget], tuple[str, dict[str, Any]]]] = {
    DELAY_SCAN: _run_delay_scan,
    OFFSET_PERSISTENCE: _run_offset_persistence,
    FILE_EXPIRY: _run_file_expiry,
}


def run_on_broker(
    job: str, target: BrokerTarget, *, keep: Callable[[RunRecord], bool] = lambda run: True
) -> RunRecord:
    """Run ``job`` on ``target`` under its overlap lock and record the outcome.

    ``keep`` decides whether the run goes on the recent-runs list (the last run per broker
    is always kept).  Never raises for a broker's failure: that is the record's status.
    """
    spec = job_specs()[job]
    client = redis_client()
    lock = client.lock(LOCK_KEY.format(job=job, addr=target.addr), timeout=spec.lock_seconds, blocking=False)
    started, t0 = now_ms(), time.perf_counter()
    if not lock.acquire(blocking=False):
        run = RunRecord(
            job,
            target.addr,
            started,
            0.0,
            SKIPPED,
            "another run of this job holds the lock",
            target.broker_name,
            target.cluster,
        )
        record(client, run)
        return run
    try:
        status, details = OK, dict[str, Any]()
        try:
            result, details = RUNNERS[job](target)
        except (AdminUnreachableError, TimeoutError) as exc:
            status, result = UNREACHABLE, f"broker did not answer: {exc or 'timed out'}"
            if target.missing:
                result = "not registered with the nameservers, and " + result
            log.warning("%s on %s (%s): %s", job, target.broker_name, target.addr, result)
        except AdminError as exc:
            status, result = FAILED, str(exc)
            log.warning("%s on %s (%s) failed: %s", job, target.broker_name, target.addr, exc)
        except Exception as exc:  # recorded, and the next period tries again
            status, result = FAILED, f"{type(exc).__name__}: {exc}"
            log.exception("%s on %s (%s) failed", job, target.broker_name, target.addr)
    finally:
        try:
            lock.release()
        except LockError:  # it expired under a very slow run; the next run has it
            log.warning("%s on %s: the overlap lock expired before the run ended", job, target.addr)
    run = RunRecord(
        job,
        target.addr,
        started,
        (time.perf_counter() - t0) * 1000,
        status,
        result,
        target.broker_name,
        target.cluster,
        details,
    )
    record(client, run, keep=keep(run))
    return run


# -- the delay-scan chain -------------------------------------------------------------------


def claim_chain(addr: str) -> str | None:
    """Start owning ``addr``'s delay-scan chain; None when a live chain already has it."""
    token = uuid.uuid4().hex
    if redis_client().set(CHAIN_KEY.format(addr=addr), token, nx=True, px=CHAIN_GRACE_MS):
        return token
    return None


def chain_is_ours(addr: str, token: str) -> bool:
    value = redis_client().get(CHAIN_KEY.format(addr=addr))
    return value is not None and as_text(value) == token


def _extend_chain(addr: str, token: str, ttl_ms: int) -> bool:
    return bool(redis_client().eval(_EXTEND_IF_OURS, 1, CHAIN_KEY.format(addr=addr), token, ttl_ms))


def end_chain(addr: str, token: str) -> None:
    redis_client().eval(_DROP_IF_OURS, 1, CHAIN_KEY.format(addr=addr), token)


def next_pass_in_ms(run: RunRecord, max_sleep_ms: int) -> float:
    """How long after ``run`` the next delay-scan pass is due, in the broker's own clock.

    The broker reports when the earliest pending message falls due and when its pass
    started and took, so a clock difference between worker and broker does not matter.
    """
    next_due = run.details.get("nextDueMs")
    if run.status != OK or next_due is None:
        return float(max_sleep_ms)
    broker_now = run.details.get("brokerStartedMs", run.started_ms) + run.details.get("brokerDurationMs", 0.0)
    return max(0.0, min(float(max_sleep_ms), next_due - broker_now))


def delay_scan_pass(
    target: BrokerTarget, token: str, reschedule: Callable[[float], None]
) -> RunRecord | None:
    """One pass of ``target``'s delay-scan chain; schedules the next via ``reschedule(seconds)``.

    Returns None when the chain was superseded.  A broker that fails or does not answer
    ends the chain (recorded as such); beat's safety net starts a new one next second.
    """
    if not chain_is_ours(target.addr, token):
        return None
    busy = lambda run: run.status != OK or bool(run.details.get("delivered"))  # noqa: E731
    run = run_on_broker(DELAY_SCAN, target, keep=busy)
    if run.status in (FAILED, UNREACHABLE):
        end_chain(target.addr, token)
        return run
    sleep_ms = next_pass_in_ms(run, platform_settings()["DELAY_SCAN_MAX_SLEEP_MS"])
    if _extend_chain(target.addr, token, int(sleep_ms) + CHAIN_GRACE_MS):
        reschedule(sleep_ms / 1000)
    return run


# -- the platform's own job ----------------------------------------------------------------


def prune_history() -> RunRecord:
    """Delete offset-history partitions past the retention (``QUIVER_HISTORY_RETENTION_DAYS``)."""
    started, t0 = now_ms(), time.perf_counter()
    days = platform_settings()["HISTORY_RETENTION_DAYS"]
    try:
        removed = history.prune(platform_settings()["HISTORY_DIR"], days)
        status, result = OK, f"{len(removed)} partition(s) older than {days} day(s) removed"
    except OSError as exc:
        removed, status, result = [], FAILED, f"could not prune: {exc}"
    run = RunRecord(
        HISTORY_RETENTION,
        PLATFORM,
        started,
        (time.perf_counter() - t0) * 1000,
        status,
        result,
        details={"removed": removed},
    )
    client = redis_client()
    note_fanout(client, HISTORY_RETENTION, [PLATFORM])
    record(client, run)
    return run


# -- who drives the jobs: the brokers' own view ---------------------------------------------


async def _statuses(admin: AdminClient, addrs: list[str]) -> list[Any]:
    calls = [admin.maintenance_status(addr) for addr in addrs]
    return list(await asyncio.gather(*calls, return_exceptions=True))


def broker_drivers() -> list[BrokerDriver]:
    """Each broker seen lately, as it reports its maintenance: its ``standaloneMaintenance``
    mode, who drives each job (the platform, or the broker itself on fallback because our
    passes stopped reaching it) and who ran each job last.

    The brokers' own runs never reach Redis: only the broker knows them, so this asks each
    one (all at once per cluster).  A broker that does not answer is listed as such.
    """
    known = known_brokers(redis_client())
    by_namesrv: dict[str, list[str]] = {}
    for addr, entry in sorted(known.items()):
        by_namesrv.setdefault(entry["namesrv"], []).append(addr)
    states: dict[str, Any] = {}
    for namesrv, addrs in by_namesrv.items():
        try:
            answers: list[Any] = admin_call(namesrv, partial(_statuses, addrs=addrs))
        except (AdminError, TimeoutError) as exc:
            answers = [exc] * len(addrs)
        states.update(zip(addrs, answers, strict=True))
    rows: list[BrokerDriver] = []
    for addr, state in states.items():
        entry = known[addr]
        broker: BrokerRef = {"brokerAddr": addr, "brokerName": entry["name"], "cluster": entry["cluster"]}
        if isinstance(state, BaseException):
            rows.append(
                {
                    **broker,
                    "master": entry["master"],
                    "reachable": False,
                    "error": str(state) or type(state).__name__,
                    "mode": "",
                    "jobs": {},
                    "fallback": [],
                    "deletions": [],
                    "damaged": [],
                    "diskFull": None,
                }
            )
            continue
        jobs = {job: job_state.to_json() for job, job_state in state.jobs.items()}
        # The platform drives only file expiry on a slave: the rest is no fallback there.
        driven = set(jobs) if entry["master"] else {FILE_EXPIRY}
        rows.append(
            {
                **broker,
                "master": entry["master"],
                "reachable": True,
                "error": "",
                "mode": state.mode,
                "jobs": jobs,
                "fallback": [job for job in state.fallback_jobs if job in driven],
                "deletions": [
                    deletion_row(broker, run.started_ms, run.runner, run.details) for run in state.deletions
                ],
                "damaged": [dict(r) for r in state.damaged_ranges],
                "diskFull": state.disk_full,
            }
        )
    return sorted(rows, key=lambda row: (row["cluster"], row["brokerName"], row["brokerAddr"]))


# -- what expiry deleted ----------------------------------------------------------------------


def deletion_row(broker: BrokerRef, started_ms: int, runner: str, details: dict[str, Any]) -> DeletionRow:
    """One expiry run that deleted something, as the page and the API show it.

    ``broker`` has the broker's ``brokerAddr``, ``brokerName`` and ``cluster``;
    ``details`` is the run's ExpiryReport as the broker sent it.
    """
    by_topic = {str(t): int(n) for t, n in (details.get("messages_deleted") or {}).items()}
    unconsumed: list[UnconsumedLoss] = [
        {
            "group": str(u.get("group", "")),
            "topic": str(u.get("topic", "")),
            "messages": int(u.get("messages") or 0),
            "queues": int(u.get("queues") or 0),
        }
        for u in details.get("unconsumed") or []
    ]
    return {
        "brokerAddr": broker["brokerAddr"],
        "brokerName": broker.get("brokerName", ""),
        "cluster": broker.get("cluster", ""),
        "startedMs": started_ms,
        "runner": runner,
        "reason": str(details.get("reason", "")),
        "segments": [str(name) for name in details.get("segments_deleted") or []],
        "commitLogFilesDeleted": int(details.get("commit_log_files_deleted") or 0),
        "fromOffset": int(details.get("deleted_from_offset") or 0),
        "toOffset": int(details.get("deleted_to_offset") or 0),
        "messages": sum(by_topic.values()),
        "messagesByTopic": dict(sorted(by_topic.items())),
        "unconsumed": unconsumed,
        "unconsumedMessages": sum(u["messages"] for u in unconsumed),
    }


def _deleted_anything(details: dict[str, Any]) -> bool:
    return bool(
        details.get("commit_log_files_deleted")
        or details.get("consume_queue_files_deleted")
        or details.get("index_files_deleted")
        or details.get("messages_deleted")
    )


def expiry_deletions(drivers: list[BrokerDriver], recorded: list[RunRecord]) -> list[DeletionRow]:
    """Every expiry run known to have deleted something, newest first: what each broker
    keeps (its own runs and the platform's alike, since it started) and the platform's
    recorded runs (which outlive a broker's restart), each run once."""
    rows: dict[tuple[str, int], DeletionRow] = {}
    for broker in drivers:
        for row in broker.get("deletions") or []:
            rows[(row["brokerAddr"], row["startedMs"])] = row
    for run in recorded:
        if run.job != FILE_EXPIRY or run.status != OK or not _deleted_anything(run.details):
            continue
        started = int(run.details.get("brokerStartedMs") or run.started_ms)
        ref: BrokerRef = {
            "brokerAddr": run.broker_addr,
            "brokerName": run.broker_name,
            "cluster": run.cluster,
        }
        rows.setdefault((run.broker_addr, started), deletion_row(ref, started, PLATFORM, run.details))
    return sorted(rows.values(), key=lambda row: (-row["startedMs"], row["brokerAddr"]))


def job_overview(limit: int = 20) -> JobOverview:
    """What the console shows: each job's status (overdue, failing brokers), who drives it on
    each broker (the platform, or the broker on fallback), the recent runs, and what expiry
    deleted lately (``deletions``: segments, messages per topic, groups that had not
    consumed them)."""
    client = redis_client()
    specs = job_specs()
    drivers = broker_drivers()
    live = {row["brokerAddr"]: row["jobs"] for row in drivers}
    jobs = []
    for status in runs.job_statuses(client, specs):
        entry = status.to_json()
        for run in entry["brokers"]:
            state = live.get(run["broker_addr"], {}).get(status.job)
            last = state["lastRun"] if state else None
            run["driver"] = state["driver"] if state else None
            run["fallback"] = bool(state and state["fallback"])
            run["lastRunBy"] = last["runner"] if last else None
            run["lastRunByBrokerMs"] = last["startedMs"] if last else None
        jobs.append(entry)
    return {
        "jobs": jobs,
        "brokers": drivers,
        "fallbackBrokers": [row["brokerAddr"] for row in drivers if row["fallback"]],
        "recent": [run.to_json() for run in runs.recent_runs(client, max(1, min(limit, runs.RECENT_KEPT)))],
        "deletions": expiry_deletions(drivers, runs.recent_runs(client, runs.RECENT_KEPT, FILE_EXPIRY)),
    }
