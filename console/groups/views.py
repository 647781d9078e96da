"""Consumer-group pages: the list with lag, and one group with its queues, clients, its pop
consumption (RocketMQ 5 clients; a section the page refreshes), and the offset reset
(preview first, then apply, with the per-queue result).  What a form changes,
``console.groups.services`` changes (checked and audited there, as for the API)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker_core.errors import AdminError
from console.core.actions import attempt, confirmed_delete_page, form_problems
from console.core.api_errors import failure_words
from console.core.pages import ask, cluster_for, context
from console.groups import pop, services
from console.groups.models import GroupMonitor
from console.groups.running_info import running_info
from console.groups.serializers import GROUP_NAME, GroupConfigWrite, MonitorWrite, group_config
from console.quiver import platform_settings


@login_required
@require_GET
def group_list(request: HttpRequest, cluster: str) -> HttpResponse:
    """Every group with its lag, most behind first unless ``sort`` says otherwise; a broker
    that does not answer leaves the lag unknown and is named."""
    ref = cluster_for(request, cluster)
    sort = request.GET.get("sort", "-lag")
    found, error = ask(ref, services.group_rows)
    rows, unreadable = found if found is not None else ([], [])
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
    return _save_group(request, cluster, name, created=True)


@login_required
@require_GET
def group_detail(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """One group: per-queue progress, clients, config, lag trend, thresholds and the forms
    (a group the cluster does not know is a 404 without forms)."""
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
    trend = services.lag_trend(platform_settings()["HISTORY_DIR"], ref.name, group, hours, now)
    popped, pop_error = ask(ref, lambda admin: pop.group_pop(admin, group)) if detail else (None, "")
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
            pop=popped,
            pop_error=pop_error,
            fifo=any(c.get("consumeMessageOrderly") for c in detail["configs"].values()) if detail else False,
            errors=[error] if error else [],
        ),
        status=status,
    )


@login_required
@require_GET
def pop_section(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """The group page's pop consumption section alone (an htmx partial the page refreshes)."""
    ref = cluster_for(request, cluster)
    popped, pop_error = ask(ref, lambda admin: pop.group_pop(admin, group))
    section = {"pop": popped, "pop_error": pop_error, "cluster": ref, "group": group}
    return render(request, "groups/pop.html", section)


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
        flash.error(request, f"thresholds not saved: {form_problems(form)}")
    else:
        services.save_thresholds(request, ref, group, form.validated_data)
        flash.success(request, "saved the group's alert thresholds")
    return redirect("groups:detail", cluster=cluster, group=group)


def _reset_request(request: HttpRequest) -> tuple[services.ResetSpec | None, str]:
    """(the reset the form asks for, '') or (None, what is wrong with the form)."""
    topic, mode = request.POST.get("topic", ""), request.POST.get("mode", "")
    if mode == "timestamp":
        try:
            moment = datetime.fromisoformat(request.POST.get("timestamp", ""))
        except ValueError:
            return None, "give the time to reset to (YYYY-MM-DDTHH:MM, UTC)"
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return services.ResetSpec(topic, mode, timestamp=int(moment.timestamp() * 1000)), ""
    if mode == "exact":
        offsets = {}
        for name, value in request.POST.items():
            if name.startswith("offset:") and value.strip():
                _, broker, queue_id = name.split(":", 2)
                try:
                    offsets[(broker, int(queue_id))] = int(value)
                except ValueError:
                    return None, f"offset of {broker}:{queue_id} is not a number"
        if not offsets:
            return None, "give at least one queue's offset"
        return services.ResetSpec(topic, mode, offsets=offsets), ""
    if mode not in ("earliest", "latest"):
        return None, "choose how to reset"
    return services.ResetSpec(topic, mode), ""


@login_required
@require_POST
def reset_preview(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """The per-queue change (an htmx partial); changes nothing."""
    ref = cluster_for(request, cluster)
    spec, error = _reset_request(request)
    plan = summary = None
    if spec is not None:
        try:
            plan = services.preview_reset(request, ref, group, spec)
        except (AdminError, TimeoutError) as exc:
            error = failure_words(exc)
        else:
            now = int(time.time() * 1000)
            summary = services.plan_summary(plan, spec.mode, spec.how, now) if plan else None
    context = {"plan": plan, "summary": summary, "error": error, "applied": False}
    return render(request, "groups/reset_plan.html", context)


@login_required
@require_POST
def reset_apply(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """Apply the reset and show the per-queue result (an htmx partial); audited."""
    ref = cluster_for(request, cluster, "operate")
    spec, error = _reset_request(request)
    result = None
    if spec is not None:
        try:
            result = services.reset_offsets(request, ref, group, spec)
        except (AdminError, TimeoutError) as exc:
            error = failure_words(exc)  # the audit row says so too
    return render(request, "groups/reset_plan.html", {"plan": result, "error": error, "applied": True})


def _save_group(request: HttpRequest, cluster: str, group: str, created: bool) -> HttpResponse:
    """Store the subscription config the form gives on every master (operators), audited."""
    ref = cluster_for(request, cluster, "operate")
    form = GroupConfigWrite(
        data={
            "consumeEnable": request.POST.get("consumeEnable") == "on",
            "consumeBroadcastEnable": request.POST.get("consumeBroadcastEnable") == "on",
            "consumeFromMinEnable": True,
            "retryQueueNums": request.POST.get("retryQueueNums") or 1,
            "retryMaxTimes": request.POST.get("retryMaxTimes") or 16,
            "consumeMessageOrderly": request.POST.get("consumeMessageOrderly") == "on",
        }
    )
    if not form.is_valid():
        flash.error(request, f"not saved: {form.errors}")
        return redirect("groups:detail", cluster=cluster, group=group)
    save = services.create_group if created else services.update_group
    if (
        attempt(request, "saved", lambda: save(request, ref, group_config(group, form.validated_data)))
        is not None
    ):
        flash.success(request, "saved the group's config on every master")
    return redirect("groups:detail", cluster=cluster, group=group)


@login_required
@require_POST
def save_config(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    """The group page's config form (operators)."""
    return _save_group(request, cluster, group, created=False)


delete_group = confirmed_delete_page("group", services.delete_group)


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
