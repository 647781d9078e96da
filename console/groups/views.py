"""Consumer-group pages: the list with lag, and one group with its queues, clients, and the
offset reset (preview first, then apply, with the per-queue result)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET, require_POST

from console.audit.services import audited
from console.core.pages import ask, cluster_for, context
from console.groups import services


def by_queue(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """``{"broker:queue": row[key]}`` for an audit row."""
    return {f"{p['brokerName']}:{p['queueId']}": p[key] for p in rows}


class ResetFailed(Exception):
    """The reset did not happen (the broker's words are the message)."""


@login_required
@require_GET
def group_list(request: HttpRequest, cluster: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    found, error = ask(ref, services.group_rows)
    rows, unreadable = found if found is not None else ([], [])
    sort = request.GET.get("sort", "-lag")
    try:
        shown = services.filter_groups(
            rows, request.GET.get("search", ""), request.GET.get("system") == "1", sort
        )
    except Exception as exc:  # a bad sort key from the query string
        shown, error = rows, str(exc)
    page = Paginator(shown, 50).get_page(request.GET.get("page"))
    errors = [e for e in [error, *(f"lag unknown, not answering: {u}" for u in unreadable)] if e]
    return render(
        request,
        "groups/list.html",
        context(request, ref, page=page, search=request.GET.get("search", ""), sort=sort, errors=errors),
    )


@login_required
@require_GET
def group_detail(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    answer = ask(ref, lambda admin: services.group_detail(admin, group))
    detail, error = answer
    topics = sorted({q["topic"] for q in detail["queues"]}) if detail else []
    return render(
        request,
        "groups/detail.html",
        context(request, ref, group=group, detail=detail, topics=topics, errors=[error] if error else []),
        status=answer.status,
    )


def _reset_request(request: HttpRequest) -> tuple[str, str, dict[str, Any], str]:
    """(topic, mode, how, error) from the reset form."""
    topic, mode = request.POST.get("topic", ""), request.POST.get("mode", "")
    how: dict[str, Any] = {}
    if mode == "timestamp":
        try:
            moment = datetime.fromisoformat(request.POST.get("timestamp", ""))
        except ValueError:
            return topic, mode, how, "give the time to reset to (YYYY-MM-DDTHH:MM, UTC)"
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        how["timestamp"] = int(moment.timestamp() * 1000)
    elif mode == "exact":
        offsets = {}
        for name, value in request.POST.items():
            if name.startswith("offset:") and value.strip():
                _, broker, queue_id = name.split(":", 2)
                try:
                    offsets[(broker, int(queue_id))] = int(value)
                except ValueError:
                    return topic, mode, how, f"offset of {broker}:{queue_id} is not a number"
        if not offsets:
            return topic, mode, how, "give at least one queue's offset"
        how["offsets"] = offsets
    elif mode not in ("earliest", "latest"):
        return topic, mode, how, "choose how to reset"
    return topic, mode, how, ""


@login_required
@require_POST
def reset_preview(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """The per-queue change (an htmx partial); changes nothing."""
    ref = cluster_for(request, cluster)
    topic, mode, how, error = _reset_request(request)
    plan = None
    if not error:
        plan, error = ask(ref, lambda admin: services.plan_reset(admin, group, topic, mode, **how))
    return render(request, "groups/reset_plan.html", {"plan": plan, "error": error, "applied": False})


@login_required
@require_POST
def reset_apply(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """Apply the reset and show the per-queue result (an htmx partial); audited."""
    ref = cluster_for(request, cluster, "operate")
    topic, mode, how, error = _reset_request(request)
    result = None
    if not error:
        try:
            with audited(request, "group.offsets.reset", ref.name, f"{group}@{topic}") as audit:
                plan, error = ask(ref, lambda admin: services.plan_reset(admin, group, topic, mode, **how))
                if plan is not None:
                    audit.before = by_queue(plan, "currentOffset")
                    result, error = ask(ref, lambda admin: services.apply_reset(admin, group, topic, plan))
                    audit.after = by_queue(result or [], "resultOffset")
                if error:
                    raise ResetFailed(error)  # the audit row says so
        except ResetFailed:
            pass
    return render(request, "groups/reset_plan.html", {"plan": result, "error": error, "applied": True})
