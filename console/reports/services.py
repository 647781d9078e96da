"""Report runs: asking for one (validated), queueing it, the schedule, and where outputs go.

Views, the API and beat all go through here; the task (tasks.py) only calls ``execute``
(runner.py).  A run's outputs live in ``<REPORTS_DIR>/<run id>/`` as spark_reports/outputs.py
lays them out; the run's row keeps its parameters, progress and summary.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from kombu.exceptions import OperationalError as KombuOperationalError
from redis.exceptions import RedisError

from console.audit.services import audited
from console.maintenance import history
from console.quiver import platform_settings
from console.reports.models import ReportRun
from nameserver.clusters import ClusterRef, managed_clusters

KINDS = (ReportRun.TRAFFIC, ReportRun.LAG)
# The longest period one run may cover (the offset history is kept 30 days by default).
MAX_RANGE_MS = 31 * 86_400_000
# Choices of the page's "run now" form: the last N minutes.
PERIODS = {"15m": 15, "1h": 60, "6h": 360, "24h": 1440, "7d": 10_080}


class BadRequest(ValueError):
    """The request cannot make a run (the message says why, for a 400)."""


@dataclass(frozen=True)
class RunRequest:
    """A validated request: kind, period in epoch ms and topics (empty: all)."""

    kind: str
    since: int
    until: int
    topics: tuple[str, ...] = ()


def now_ms() -> int:
    return int(time.time() * 1000)


def check_request(kind: str, since: int, until: int, topics: list[str] | tuple[str, ...] = ()) -> RunRequest:
    """Validate what a run is asked for; raise BadRequest with a sentence otherwise."""
    if kind not in KINDS:
        raise BadRequest(f"kind is one of {', '.join(KINDS)}, not {kind!r}")
    if since < 0 or until < 0:
        raise BadRequest("since and until are epoch milliseconds (not negative)")
    if since >= until:
        raise BadRequest("since must come before until")
    if until - since > MAX_RANGE_MS:
        raise BadRequest(f"a report covers at most {MAX_RANGE_MS // 86_400_000} days")
    if until > now_ms() + 86_400_000:
        raise BadRequest("until is more than a day in the future")
    names = tuple(dict.fromkeys(t.strip() for t in topics if t.strip()))
    return RunRequest(kind, since, until, names)


def missing_topics(wanted: tuple[str, ...], known: list[str]) -> list[str]:
    """The topics of ``wanted`` the cluster does not have."""
    have = set(known)
    return [t for t in wanted if t not in have]


def run_dir(run_id: str) -> str:
    """Where a run writes: ``<REPORTS_DIR>/<run id>`` (a local path or a Hadoop URI)."""
    return f"{str(platform_settings()['REPORTS_DIR']).rstrip('/')}/{run_id}"


def run_log(run_id: str) -> Path:
    """The run's log on this machine: the report process's own output (Spark's, and a
    failure's whole traceback), whatever the output directory is.  Under
    ``<DATA_DIR>/report-logs/``; the run page links to it."""
    return Path(platform_settings()["DATA_DIR"]) / "report-logs" / f"{run_id}.log"


def create_run(
    cluster: ClusterRef,
    request: RunRequest,
    user: AbstractBaseUser | AnonymousUser | None = None,
    schedule_key: str | None = None,
) -> ReportRun:
    """The run's row (queued), its output directory chosen from its id."""
    run = ReportRun(
        kind=request.kind,
        cluster=cluster.name,
        params={"since": request.since, "until": request.until, "topics": list(request.topics)},
        requested_by=user if user is not None and user.is_authenticated else None,
        scheduled=schedule_key is not None,
        schedule_key=schedule_key,
    )
    run.output = run_dir(str(run.id))
    run.save()
    return run


def queue_run(run: ReportRun) -> None:
    """Send the run to the reports worker (the run id as task id).

    Raises whatever queueing raises (Redis down); the run is then marked failed, so no
    run stays queued that no worker will ever see.
    """
    from console.reports.tasks import spark_run_report

    try:
        spark_run_report.apply_async(args=[str(run.id)], task_id=str(run.id))
    except Exception as exc:
        finish(run, ReportRun.FAILED, error=f"the run could not be queued: {exc}")
        raise


# What queueing can raise when Redis is away: redis-py's errors, kombu's, the socket's.
QUEUE_ERRORS: tuple[type[BaseException], ...] = (RedisError, KombuOperationalError, OSError)


def do_run_report(
    request: HttpRequest, cluster: ClusterRef, wanted: RunRequest
) -> tuple[ReportRun, str | None]:
    """Create the run asked for, audit it (``report.run``) and queue it for the worker.

    Returns the run and, when it could not be queued (Redis down), why: the run is then
    recorded as failed with that reason, and the audit row says it was not queued.
    """
    with audited(request, "report.run", cluster.name, f"{wanted.kind} report") as audit:
        audit.after = {"kind": wanted.kind, "since": wanted.since, "until": wanted.until}
        audit.after["topics"] = list(wanted.topics)
        run = create_run(cluster, wanted, request.user)
        audit.after["run"] = str(run.id)
        try:
            queue_run(run)
        except QUEUE_ERRORS as exc:
            audit.after["queued"] = False
            return run, f"the report could not be queued: {exc}"
    return run, None


def finish(run: ReportRun, status: str, *, summary: dict[str, Any] | None = None, error: str = "") -> None:
    """Record the run's outcome (and its figures, from the summary when it succeeded)."""
    run.status, run.error, run.finished = status, error[:20_000], timezone.now()
    if run.started:
        run.duration_seconds = round((run.finished - run.started).total_seconds(), 3)
    if summary is not None:
        run.summary = summary
        run.input_rows = summary.get("inputRows")
        run.input_bytes = summary.get("inputBytes")
    run.save()


def runs_of(cluster: str, kind: str = "", status: str = "") -> QuerySet[ReportRun]:
    """The cluster's runs, newest first, filtered by kind and status (validated)."""
    if kind and kind not in KINDS:
        raise BadRequest(f"kind is one of {', '.join(KINDS)}")
    if status and status not in dict(ReportRun.STATUSES):
        raise BadRequest(f"status is one of {', '.join(dict(ReportRun.STATUSES))}")
    runs = ReportRun.objects.filter(cluster=cluster).select_related("requested_by")
    if kind:
        runs = runs.filter(kind=kind)
    if status:
        runs = runs.filter(status=status)
    return runs


def run_of(cluster: str, run_id: str) -> ReportRun | None:
    """The run ``run_id`` of ``cluster`` (None when there is none, or it is another cluster's)."""
    try:
        return ReportRun.objects.select_related("requested_by").filter(cluster=cluster, id=run_id).first()
    except (ValueError, TypeError, ValidationError):  # not a uuid
        return None


# --- the schedule ----------------------------------------------------------------------------


def schedule_window(at_ms: int) -> tuple[int, int] | None:
    """The window a scheduled run covers at ``at_ms``: the last whole schedule period
    (aligned to the epoch, so every beat computes the same one); None when the schedule is off."""
    quiver = platform_settings()
    period = quiver["REPORT_SCHEDULE_MINUTES"] * 60_000
    if period <= 0:
        return None
    until = at_ms // period * period
    window = (quiver.get("REPORT_WINDOW_MINUTES") or quiver["REPORT_SCHEDULE_MINUTES"]) * 60_000
    return until - min(window, MAX_RANGE_MS), until


def plan_scheduled(at_ms: int | None = None) -> list[ReportRun]:
    """Create this window's traffic and lag runs for each cluster, once: a window that
    already has its run (an earlier beat, a second beat) is skipped, and so is a window the
    platform did not watch (no offset history of the cluster in it: before the platform
    first ran, or a cluster silent all along), which would only make empty reports.
    Returns the new runs."""
    window = schedule_window(now_ms() if at_ms is None else at_ms)
    if window is None:
        return []
    since, until = window
    history_dir = Path(platform_settings()["HISTORY_DIR"])
    created = []
    for cluster in managed_clusters():
        if not history.recorded_between(history_dir, since, until, cluster.name):
            continue
        for kind in KINDS:
            key = f"{cluster.name}:{kind}:{until}"
            if ReportRun.objects.filter(schedule_key=key).exists():
                continue
            try:
                with transaction.atomic():
                    created.append(create_run(cluster, RunRequest(kind, since, until), schedule_key=key))
            except IntegrityError:  # another beat made it first
                continue
    return created


def fail_abandoned(at: dt.datetime | None = None) -> int:
    """Mark failed the runs left running well past the timeout (their worker died)."""
    limit = platform_settings()["REPORT_TIMEOUT_SECONDS"] * 2 + 300
    cutoff = (at or timezone.now()) - dt.timedelta(seconds=limit)
    stale = ReportRun.objects.filter(status=ReportRun.RUNNING, started__lt=cutoff)
    count = 0
    for run in stale:
        finish(run, ReportRun.FAILED, error="the worker running this report stopped without an outcome")
        count += 1
    return count
