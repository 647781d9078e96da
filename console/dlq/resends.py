"""Queue a DLQ resend (chosen messages, or every stored one) as the long task, audited: the
one way the page and the API start it, the target topic checked first."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from console.audit.services import audited
from console.core.brokers import admin_call
from console.core.longtasks import launch
from console.core.models import LongTask
from console.dlq.services import span_count
from console.dlq.tasks import long_resend_dlq
from nameserver.clusters import ClusterRef


def title(cluster: ClusterRef, group: str, count: int, every: bool, target: str) -> str:
    """The task's name on its page: what is resent, where to."""
    what = f"all {count:,} dead letters" if every else f"{count:,} dead letter(s)"
    return f"Resend {what} of {group} to {target or 'their original topic'} ({cluster.name})"


def queue_resend(
    request: HttpRequest | Any,
    cluster: ClusterRef,
    group: str,
    target: str,
    ids: list[str] | None = None,
    topic: str = "",
    spans: list[list[Any]] | None = None,
) -> LongTask:
    """Queue the resend of ``ids``, or of the messages stored in ``spans`` of ``topic``, to
    their original topic or to ``target``; the task's row.  A ``target`` the nameservers do
    not route is an AdminError (404) before anything is queued or audited; what queueing
    raises (Redis down) is recorded as an audit error and raised."""
    if target:
        admin_call(cluster.namesrv_addr, lambda admin: admin.topic_route(target))
    ids = list(dict.fromkeys(ids or []))  # each message once, in the order given
    count = span_count(spans) if spans else len(ids)
    params: dict[str, Any] = {
        "namesrv_addr": cluster.namesrv_addr,
        "group": group,
        "msg_ids": ids,
        "target_topic": target,
    }
    if spans:
        params |= {"topic": topic, "spans": spans}
    with audited(request, "dlq.resend", cluster.name, group) as audit:
        row = launch(
            long_resend_dlq,
            "dlq_resend",
            title(cluster, group, count, bool(spans), target),
            request.user,
            params,
        )
        audit.after = {
            "task": str(row.id),
            "messages": count,
            "target": target or "original",
            **({"all": topic} if spans else {}),
        }
    return row
