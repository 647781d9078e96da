"""Topic pages: the list (search, type filter, paging) and one topic with its queues,
consumers and a form to send a test message."""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.audit.services import audited
from console.core.pages import ask, cluster_for, context
from console.topics import services
from console.topics.serializers import TestMessage


@login_required
@require_GET
def topic_list(request: HttpRequest, cluster: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    found, error = ask(ref, services.topic_rows)
    rows, unreadable = found if found is not None else ([], [])
    chosen = request.GET.get("type", "")
    types = (
        services.TYPES
        if chosen == "all"
        else ((chosen,) if chosen in services.TYPES else services.DEFAULT_TYPES)
    )
    shown = services.filter_topics(rows, request.GET.get("search", ""), types)
    page = Paginator(shown, 50).get_page(request.GET.get("page"))
    errors = [e for e in [error, *(f"not counted: {u}" for u in unreadable)] if e]
    return render(
        request,
        "topics/list.html",
        context(
            request,
            ref,
            page=page,
            search=request.GET.get("search", ""),
            chosen=chosen,
            types=services.TYPES,
            errors=errors,
        ),
    )


@login_required
@require_GET
def topic_detail(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    answer = ask(ref, lambda admin: services.topic_detail(admin, topic))
    detail, error = answer
    return render(
        request,
        "topics/detail.html",
        context(request, ref, topic=topic, detail=detail, errors=[error] if error else []),
        status=answer.status,
    )


@login_required
@require_POST
def send_message(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    ref = cluster_for(request, cluster, "operate")
    props = {}
    for line in request.POST.get("properties", "").splitlines():
        if "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    form = TestMessage(
        data={
            "body": request.POST.get("body", ""),
            "tags": request.POST.get("tags", ""),
            "keys": request.POST.get("keys", ""),
            "properties": props,
            "delayLevel": request.POST.get("delayLevel") or 0,
        }
    )
    if not form.is_valid():
        flash.error(request, f"not sent: {form.errors}")
        return redirect("topics:detail", cluster=cluster, topic=topic)
    data = form.validated_data
    with audited(request, "topic.send", ref.name, topic) as audit:
        sent, error = ask(
            ref,
            lambda admin: admin.send_message(
                topic,
                data["bytes"],
                tags=data["tags"],
                keys=data["keys"],
                properties=data["properties"],
                delay_level=data["delayLevel"],
            ),
        )
        audit.after = sent or {"error": error}
    if sent is None:
        flash.error(request, f"not sent: {error}")
    else:
        flash.success(
            request, f"sent as {sent['msgId']} to queue {sent['queueId']} at offset {sent['queueOffset']}"
        )
    return redirect("topics:detail", cluster=cluster, topic=topic)
