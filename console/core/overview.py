"""The home page's figures: per cluster the user may view, its brokers up of all, topics,
groups (and how many lag), open alerts and messages stored today.

Each figure comes from the same function the cluster's own pages use (broker rows, the
topic list, the group list, the dashboard's live totals), so the home page and the
cluster's pages agree.  A figure that could not be read is None with a sentence saying
why; the clusters are asked at the same time, so one slow cluster does not add up.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError, AdminUnreachableError
from console.alerts.models import Alert
from console.core.brokers import admin_call
from console.groups.services import filter_groups, group_rows
from console.topics.services import filter_topics, topic_rows
from nameserver.clusters import ClusterRef
from nameserver.topology import broker_rows, totals


@dataclass
class ClusterFigures:
    """One card of the home page; a figure is None when it could not be read (``problems``
    then says why, in sentences)."""

    cluster: ClusterRef
    brokers_up: int | None = None
    brokers_total: int | None = None
    topics: int | None = None
    groups: int | None = None
    groups_lagging: int | None = None
    open_alerts: int | None = None
    messages_today: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.problems and self.brokers_up == self.brokers_total and bool(self.brokers_total)


async def _ask_all(admin: AdminClient) -> tuple[Any, Any, Any]:
    """Broker rows, topic rows and group rows, each its value or the exception it raised."""
    brokers, topics, groups = await asyncio.gather(
        broker_rows(admin), topic_rows(admin), group_rows(admin), return_exceptions=True
    )
    return brokers, topics, groups


def _why(cluster: ClusterRef, what: str, exc: BaseException) -> str:
    """An exception of a broker call as a sentence with the next step."""
    if isinstance(exc, AdminUnreachableError | TimeoutError | OSError):
        return (
            f"The nameserver at {cluster.namesrv_addr} did not answer, so its {what} are unknown: "
            "check that it runs (manage.py up starts one) or correct the cluster's address in Admin."
        )
    if isinstance(exc, AdminError):
        return f"Its {what} could not be read: {str(exc).rstrip('.')}."
    return f"Its {what} could not be read ({type(exc).__name__}: {exc})."


def cluster_figures(cluster: ClusterRef) -> ClusterFigures:
    """The figures of one cluster (broker calls only; the alert count is added by the caller)."""
    found = ClusterFigures(cluster)
    try:
        brokers, topics, groups = admin_call(cluster.namesrv_addr, _ask_all)
    except (AdminError, TimeoutError, OSError) as exc:
        found.problems.append(_why(cluster, "figures", exc))
        return found
    unreachable = [r for r in (brokers, topics, groups) if isinstance(r, AdminUnreachableError | OSError)]
    if len(unreachable) == 3:
        found.problems.append(_why(cluster, "figures", unreachable[0]))
        return found
    if isinstance(brokers, BaseException):
        found.problems.append(_why(cluster, "brokers", brokers))
    else:
        found.brokers_total = len(brokers)
        found.brokers_up = sum(1 for r in brokers if not r["error"])
        today = totals(brokers)["putToday"]
        found.messages_today = None if today is None else int(today)
        down = [r["addr"] for r in brokers if r["error"]]
        if down:
            found.problems.append(f"Broker(s) {', '.join(down)} did not answer; their figures are left out.")
        if not brokers:
            found.problems.append("No broker is registered with its nameserver yet.")
    if isinstance(topics, BaseException):
        found.problems.append(_why(cluster, "topics", topics))
    else:
        found.topics = len(filter_topics(topics[0]))
    if isinstance(groups, BaseException):
        found.problems.append(_why(cluster, "groups", groups))
    else:
        rows, unreadable = groups
        shown = filter_groups(rows)
        found.groups = len(shown)
        if unreadable:
            found.problems.append(
                "Lag is unknown: the offsets of " + ", ".join(unreadable) + " could not be read."
            )
        else:
            found.groups_lagging = sum(1 for r in shown if r["lag"])
    return found


def overview(clusters: list[ClusterRef]) -> list[ClusterFigures]:
    """The figures of every cluster in ``clusters`` (asked at the same time), with open alerts."""
    if not clusters:
        return []
    with ThreadPoolExecutor(max_workers=min(8, len(clusters))) as pool:
        cards = list(pool.map(cluster_figures, clusters))
    for card in cards:
        card.open_alerts = Alert.objects.filter(cluster=card.cluster.name, resolved_at__isnull=True).count()
    return cards
