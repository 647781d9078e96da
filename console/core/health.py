"""The health page's checks, in words: the console's own parts (database, Redis, the
maintenance schedule) and each cluster the user may view (nameserver, brokers, disks).

Each check is a ``Check``: what was checked, whether it is fine, a sentence saying what was
found, and — when it is not fine — what to do next.  ``/healthz`` stays the machines' check
(JSON, database only); this module is for people.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection
from redis.exceptions import RedisError

from console.clusters.services import health_checks
from console.core.pages import ask
from console.core.redis import redis_client
from nameserver.clusters import ClusterRef


@dataclass(frozen=True)
class Check:
    """One line of the health page."""

    title: str
    ok: bool
    says: str
    next_step: str = ""


@dataclass(frozen=True)
class Section:
    """A heading of the health page and its checks (``cluster`` set for a cluster's section)."""

    title: str
    checks: list[Check]
    cluster: ClusterRef | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def database_check() -> Check:
    """Whether the console's database answers a query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        return Check(
            "Console database",
            False,
            f"The console's database did not answer: {exc}.",
            "Check the database settings and that its disk is not full; pages and the API need it.",
        )
    return Check("Console database", True, "The console's database answers.")


def redis_check() -> Check:
    """Whether the platform's Redis answers (Celery, live pages and alerts go through it)."""
    try:
        redis_client().ping()
    except RedisError as exc:
        return Check(
            "Platform Redis",
            False,
            f"The platform's Redis did not answer: {exc}.",
            "Start Redis (manage.py up starts a private one) or correct REDIS_URL; until then "
            "maintenance jobs, reports, live figures and alerts stop.",
        )
    return Check("Platform Redis", True, "Redis answers: background jobs, live figures and alerts can run.")


def maintenance_check() -> Check:
    """Whether every maintenance job keeps its schedule and no broker runs them on its own."""
    from console.maintenance.services import job_overview

    try:
        overview = job_overview(limit=1)
    except RedisError as exc:
        return Check(
            "Maintenance jobs",
            False,
            f"Their state is unknown: the platform's Redis did not answer ({exc}).",
            "Start Redis first; then this check can tell whether the jobs run.",
        )
    overdue = [j for j in overview["jobs"] if j.get("overdue")]
    fallback = overview.get("fallbackBrokers") or []
    if not overdue and not fallback:
        return Check("Maintenance jobs", True, "Every maintenance job keeps its schedule.")
    parts = []
    if overdue:
        parts.append(
            f"{len(overdue)} job(s) are overdue: "
            + "; ".join(f"{j['title']} ({j.get('overdueReason') or 'late'})" for j in overdue)
            + "."
        )
    if fallback:
        parts.append(f"Broker(s) {', '.join(fallback)} run the jobs on their own timer (fallback).")
    return Check(
        "Maintenance jobs",
        False,
        " ".join(parts),
        "Check that the Celery worker and beat are running (manage.py up starts both); the "
        "Maintenance page shows each job's last runs.",
    )


# What each broker-side check means to a person, and what to do when it fails.
CLUSTER_CHECKS: dict[str, tuple[str, str, str, str]] = {
    "brokers answer": (
        "Brokers",
        "Every registered broker answers.",
        "Not every broker answers: {detail}.",
        "Look at those brokers' processes and logs; the nameserver drops a broker that stopped "
        "after about two minutes.",
    ),
    "every broker has a master": (
        "Masters",
        "Every broker name has a master.",
        "No master is registered for: {detail}.",
        "Start the master (brokerId 0) of that broker name: without it, its queues take no new messages.",
    ),
    "disk below 75%": (
        "Disk",
        "Every broker's commit-log disk is less than 75% full.",
        "Disk more than 75% full on: {detail}.",
        "Free disk space or keep messages for less time (fileReservedTime); at "
        "diskMaxUsedSpaceRatio expiry deletes the oldest files, consumed or not.",
    ),
    "topics on more than one broker": (
        "Topics spread",
        "Every topic has queues on more than one broker.",
        "Some topics live on one broker only ({detail}).",
        "Update those topics on every master, so one broker going down does not stop them.",
    ),
}


def worded(row: dict[str, Any]) -> Check:
    """A broker-side check (``console.clusters.services.health_checks``) as a sentence."""
    known = CLUSTER_CHECKS.get(row["check"])
    detail = row.get("detail") or ""
    if known is None:
        says = f"{row['check']}: " + ("fine." if row["ok"] else (detail or "a problem was found."))
        return Check(row["check"].capitalize(), bool(row["ok"]), says)
    title, good, bad, next_step = known
    if row["ok"]:
        return Check(title, True, good)
    if row["check"] == "brokers answer" and detail == "no broker registered":
        return Check(
            title,
            False,
            "No broker is registered with this cluster's nameserver.",
            "Start a broker with namesrvAddr pointing at this nameserver (manage.py up starts one).",
        )
    return Check(title, False, bad.format(detail=detail.rstrip(".")), next_step)


def cluster_section(cluster: ClusterRef) -> Section:
    """The checks of one cluster; a nameserver that does not answer is one check, in words."""
    rows, error = ask(cluster, health_checks)
    if error:
        return Section(
            f"Cluster {cluster.name}",
            [
                Check(
                    "Nameserver",
                    False,
                    f"The nameserver at {cluster.namesrv_addr} could not be asked: {error.rstrip('.')}.",
                    "Check that the nameserver runs at that address (manage.py up starts one), "
                    "or correct the cluster's address in Admin → Clusters.",
                )
            ],
            cluster,
        )
    checks = [Check("Nameserver", True, f"The nameserver at {cluster.namesrv_addr} answers.")]
    return Section(f"Cluster {cluster.name}", checks + [worded(r) for r in rows or []], cluster)


def health_report(clusters: list[ClusterRef]) -> list[Section]:
    """The console's own checks first, then one section per cluster in ``clusters``."""
    console = Section("Console", [database_check(), redis_check(), maintenance_check()])
    return [console, *(cluster_section(c) for c in clusters)]
