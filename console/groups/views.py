"""Consumer-group pages: the list with lag, and one group with its queues, clients, and the
offset reset (preview first, then apply, with the per-queue result)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker_core.broker.groups import SubscriptionGroupConfig
from console.audit.services import audited
from console.core.brokers import on_every_master
from console.core.pages import ask, cluster_for, context
from console.groups import services
from console.groups.models import GroupMonitor
from console.groups.monitors import save_monitor
from console.groups.running_info import running_info
from console.groups.serializers import GROUP_NAME, GroupConfigWrite, MonitorWrite


def by_queue(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """``{"broker:queue": row[key]}`` for an audit row."""
    return {f"{p['brokerName']}:{p['queueId']}": p[key] for p in rows}


class ResetFailed(Exception):
    """A change did not happen (the broker's words are the message; the audit row says so)."""


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
@require_POST
def create_group(request: HttpRequest, cluster: str) -> HttpResponse:
    """The list page's form: a subscription group with the broker's defaults (operators)."""
    cluster_for(request, cluster, "operate")
    name = request.POST.get("name", "").strip()
    if not re.fullmatch(GROUP_NAME, name):
        flash.error(request, f"not created: {name!r} is not a group name (letters, digits, % | _ -)")
        return redirect("groups:list", cluster=cluster)
    return save_config(request, cluster, name)


@login_required
@require_GET
def group_detail(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    answer = ask(ref, lambda admin: services.group_detail(admin, group))
    detail, error = answer
    status = answer.status
    known, _ = ask(ref, lambda admin: services.group_known(admin, group))
    if known is False:  # no forms for a group that is not there: they would act on nothing
        detail, status = None, 404
        error = (
            f"There is no consumer group {group!r} in this cluster. A group appears once a consumer "
            "of it starts, or when an operator creates it on the Groups page."
        )
    topics = sorted({q["topic"] for q in detail["queues"]}) if detail else []
    config = next(iter(detail["configs"].values()), None) if detail else None
    hours = min(168, max(1, int(request.GET["hours"]))) if request.GET.get("hours", "").isdigit() else 6
    now = int(time.time() * 1000)
    trend = services.lag_trend(settings.QUIVER["HISTORY_DIR"], ref.name, group, hours, now)
    return render(
        request,
        "groups/detail.html",
        context(
            request,
            ref,
            group=group,
            detail=detail,
            topics=topics,
            config=config,
            lag_trend=trend,
            trend_hours=hours,
            monitor=GroupMonitor.objects.filter(cluster=ref.name, group=group).first(),
            errors=[error] if error else [],
        ),
        status=status,
    )


@login_required
@require_POST
def save_thresholds(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """The group page's alert thresholds form (operators): blank fields are off; audited."""
    ref = cluster_for(request, cluster, "operate")
    post = request.POST
    form = MonitorWrite(
        data={
            "minClients": post.get("minClients") or 0,
            "maxLag": post.get("maxLag") or None,
            "maxSecondsBehind": post.get("maxSecondsBehind") or None,
            "growingMinutes": post.get("growingMinutes") or None,
            "webhookUrl": post.get("webhookUrl", "").strip(),
        }
    )
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(map(str, errs))}" for field, errs in form.errors.items())
        flash.error(request, f"thresholds not saved: {problems}")
    else:
        save_monitor(request, ref.name, group, form.validated_data)
        flash.success(request, "saved the group's alert thresholds")
    return redirect("groups:detail", cluster=cluster, group=group)


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
    summary = services.plan_summary(plan, mode, how, int(time.time() * 1000)) if plan else None
    context = {"plan": plan, "summary": summary, "error": error, "applied": False}
    return render(request, "groups/reset_plan.html", context)


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


@login_required
@require_POST
def save_config(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """Create or update the group's subscription config on every master (operators), audited."""
    ref = cluster_for(request, cluster, "operate")
    form = GroupConfigWrite(
        data={
            "consumeEnable": request.POST.get("consumeEnable") == "on",
            "consumeBroadcastEnable": request.POST.get("consumeBroadcastEnable") == "on",
            "consumeFromMinEnable": True,
            "retryQueueNums": request.POST.get("retryQueueNums") or 1,
            "retryMaxTimes": request.POST.get("retryMaxTimes") or 16,
        }
    )
    if not form.is_valid():
        flash.error(request, f"not saved: {form.errors}")
        return redirect("groups:detail", cluster=cluster, group=group)
    data = form.validated_data
    config = SubscriptionGroupConfig(
        group,
        consume_enable=data["consumeEnable"],
        consume_broadcast_enable=data["consumeBroadcastEnable"],
        retry_queue_nums=data["retryQueueNums"],
        retry_max_times=data["retryMaxTimes"],
    )

    async def write(admin: Any) -> list[str]:
        return await on_every_master(
            admin, lambda addr: admin.create_or_update_subscription_group(config, broker_addr=addr)
        )

    try:
        with audited(request, "group.update", ref.name, group) as audit:
            audit.after = config.to_json()
            _brokers, error = ask(ref, write)
            if error:
                raise ResetFailed(error)
    except ResetFailed as exc:
        flash.error(request, f"not saved: {exc}")
    else:
        flash.success(request, "saved the group's config on every master")
    return redirect("groups:detail", cluster=cluster, group=group)


@login_required
@require_POST
def delete_group(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """Delete the group (config, offsets, retry topic) after its impact, confirmed (admins)."""
    ref = cluster_for(request, cluster, "admin")
    if request.POST.get("confirm") != group:
        flash.error(request, "not deleted: type the group's name to confirm")
        return redirect("groups:detail", cluster=cluster, group=group)

    async def remove(admin: Any) -> list[str]:
        return await on_every_master(
            admin, lambda addr: admin.delete_subscription_group(group, broker_addr=addr, remove_offset=True)
        )

    try:
        with audited(request, "group.delete", ref.name, group) as audit:
            audit.before, _ = ask(ref, lambda admin: services.impact(admin, group))
            deleted, error = ask(ref, remove)
            if error:
                raise ResetFailed(error)
            audit.after = {"deletedOn": deleted}
    except ResetFailed as exc:
        flash.error(request, f"not deleted: {exc}")
        return redirect("groups:detail", cluster=cluster, group=group)
    flash.success(request, f"deleted {group}")
    return redirect("groups:list", cluster=cluster)


@login_required
@require_GET
def client_info(request: HttpRequest, cluster: str, group: str, client_id: str) -> HttpResponse:
    """What one online client of the group says of itself (its running info), as tables."""
    ref = cluster_for(request, cluster)
    text, error = ask(ref, lambda admin: admin.consumer_running_info(group, client_id))
    info = running_info(text) if text is not None else None
    errors = []
    if error:
        errors.append(
            f"The client {client_id} did not say how it is running ({error}). It may have stopped or "
            "moved to another connection: the group's page lists the clients online now."
        )
    return render(
        request,
        "groups/client.html",
        context(request, ref, group=group, client_id=client_id, info=info, errors=errors),
    )
