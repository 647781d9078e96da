"""Run records of the maintenance jobs, kept in Redis where every worker and the console meet.

Each run of a job on a broker leaves a ``RunRecord``: the last one per (job, broker)
replaces the one before (``quiver:maint:last``), and the runs worth reading later — all
but the delay scan's idle passes, which come ten times a second — go on a capped list
(``quiver:maint:recent``).  Each fan-out over the brokers (one beat tick) is noted per job
(``quiver:maint:fanout``), which is how a job whose beat stopped is found overdue even
when it has no broker to run on.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import redis

from console.core.redis import as_text
from console.maintenance.jobs import JobSpec

LAST_KEY = "quiver:maint:last"
RECENT_KEY = "quiver:maint:recent"
FANOUT_KEY = "quiver:maint:fanout"
RECENT_KEPT = 500

OK = "ok"
FAILED = "failed"
UNREACHABLE = "unreachable"
SKIPPED = "skipped"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class RunRecord:
    """One run of ``job`` on ``broker_addr`` (or on the platform): when, how long, outcome.

    ``status`` is ok, failed (the broker answered with an error), unreachable (it did not
    answer: reported, and retried at the next period) or skipped (another run held the
    overlap lock).
    """

    job: str
    broker_addr: str
    started_ms: int
    duration_ms: float
    status: str
    result: str
    broker_name: str = ""
    cluster: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status in (OK, SKIPPED)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunRecord:
        data = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**data)


def _field(job: str, broker_addr: str) -> str:
    return f"{job}|{broker_addr}"


def record(client: redis.Redis, run: RunRecord, *, keep: bool = True) -> None:
    """Store ``run`` as its job's last on its broker; ``keep`` also lists it among recent runs.

    A skipped run is only listed: the last real run stays what the overdue check reads.
    """
    payload = orjson.dumps(run.to_json())
    pipe = client.pipeline(transaction=False)
    if run.status != SKIPPED:
        pipe.hset(LAST_KEY, _field(run.job, run.broker_addr), payload)
    if keep:
        pipe.lpush(RECENT_KEY, payload)
        pipe.ltrim(RECENT_KEY, 0, RECENT_KEPT - 1)
    pipe.execute()


def note_fanout(
    client: redis.Redis, job: str, brokers: list[str], error: str = "", at_ms: int | None = None
) -> None:
    """Record that ``job`` went out to ``brokers`` now (or at ``at_ms``), or could not (``error``)."""
    entry = {"atMs": now_ms() if at_ms is None else at_ms, "brokers": brokers, "error": error}
    client.hset(FANOUT_KEY, job, orjson.dumps(entry))


def last_runs(client: redis.Redis) -> list[RunRecord]:
    """The last run of every (job, broker) pair that ever ran."""
    return [RunRecord.from_json(orjson.loads(raw)) for raw in client.hvals(LAST_KEY)]


def recent_runs(client: redis.Redis, limit: int = 50, job: str | None = None) -> list[RunRecord]:
    """The latest listed runs, newest first (of one job when ``job`` is given)."""
    runs = [RunRecord.from_json(orjson.loads(raw)) for raw in client.lrange(RECENT_KEY, 0, RECENT_KEPT - 1)]
    if job is not None:
        runs = [r for r in runs if r.job == job]
    return runs[:limit]


@dataclass
class JobStatus:
    """What the console shows of one job: its schedule, its last runs per broker, overdue or not."""

    job: str
    title: str
    every_seconds: float
    last_fanout_ms: int | None
    fanout_error: str
    overdue: bool
    overdue_reason: str
    failing: list[str]
    runs: list[RunRecord]

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "title": self.title,
            "everySeconds": self.every_seconds,
            "lastFanoutMs": self.last_fanout_ms,
            "fanoutError": self.fanout_error,
            "overdue": self.overdue,
            "overdueReason": self.overdue_reason,
            "failing": self.failing,
            "brokers": [run.to_json() for run in self.runs],
        }


def job_statuses(client: redis.Redis, specs: dict[str, JobSpec], at_ms: int | None = None) -> list[JobStatus]:
    """Each job's status at ``at_ms``: overdue when its beat or any broker's run is late,
    failing on the brokers whose last run did not succeed (down, or the job failed there).

    A broker counts while the last fan-out listed it; one dropped from the nameservers
    stops counting.
    """
    at_ms = now_ms() if at_ms is None else at_ms
    by_job: dict[str, list[RunRecord]] = {name: [] for name in specs}
    for run in last_runs(client):
        by_job.setdefault(run.job, []).append(run)
    fanouts = {as_text(k): orjson.loads(v) for k, v in client.hgetall(FANOUT_KEY).items()}
    statuses = []
    for name, spec in specs.items():
        limit_ms = spec.overdue_after_seconds * 1000
        fanout = fanouts.get(name)
        runs = sorted(by_job.get(name, []), key=lambda r: r.broker_addr)
        reason = ""
        failing = [run.broker_addr for run in runs if run.status != OK]
        if fanout is None:
            reason = "never scheduled (is Celery beat running?)"
        elif at_ms - fanout["atMs"] > limit_ms:
            reason = f"not scheduled for {(at_ms - fanout['atMs']) / 1000:.0f} s (is Celery beat running?)"
        else:
            latest = {run.broker_addr: run for run in runs}
            for addr in fanout["brokers"]:
                last = latest.get(addr)
                if last is None:
                    reason = f"no run yet on {addr}"
                elif at_ms - (last.started_ms + last.duration_ms) > limit_ms:
                    reason = f"no run on {addr} for {(at_ms - last.started_ms) / 1000:.0f} s"
                if reason:
                    break
        statuses.append(
            JobStatus(
                name,
                spec.title,
                spec.every_seconds,
                fanout["atMs"] if fanout else None,
                fanout.get("error", "") if fanout else "",
                bool(reason),
                reason,
                failing,
                runs,
            )
        )
    return statuses
