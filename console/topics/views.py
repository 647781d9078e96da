"""Topic pages: the list (search, type filter, paging) and one topic with its queues,
consumers and a form to send a test message."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker_core.broker.topics import TopicConfig
from console.audit.services import audited
from console.core.access import allowed
from console.core.brokers import on_every_master
from console.core.pages import ask, cluster_for, context
from console.topics import services
from console.topics.api import PERMS
from console.topics.serializers import TOPIC_NAME_HTML_PATTERN, TOPIC_NAME_RULE, TestMessage, TopicWrite
from nameserver import traffic


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
            name_pattern=TOPIC_NAME_HTML_PATTERN,
            name_rule=TOPIC_NAME_RULE,
        ),
    )


@login_required
@require_GET
def topic_detail(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    answer = ask(ref, lambda admin: services.topic_detail(admin, topic))
    detail, error = answer
    if answer.status == 404:  # the nameserver's TOPIC_NOT_EXIST, said for a person
        error = (
            f"There is no topic {topic!r} in this cluster. The Topics page lists those it has; "
            "an operator can create it there."
        )
    if detail is not None:
        detail["storedToday"] = traffic.topic_today(settings.QUIVER["HISTORY_DIR"], ref.name, topic)
    impact = None
    if detail is not None and allowed(request.user, cluster, "admin"):
        impact, _ = ask(ref, lambda admin: services.impact(admin, topic))
    return render(
        request,
        "topics/detail.html",
        context(request, ref, topic=topic, detail=detail, impact=impact, errors=[error] if error else []),
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


@login_required
@require_POST
def create_topic(request: HttpRequest, cluster: str) -> HttpResponse:
    """The list page's create form (operators)."""
    ref = cluster_for(request, cluster, "operate")
    form = TopicWrite(
        data={
            "name": request.POST.get("name", ""),
            "readQueueNums": request.POST.get("queues") or 8,
            "writeQueueNums": request.POST.get("queues") or 8,
            "perm": request.POST.get("perm") or "RW",
            "order": request.POST.get("order") == "on",
        }
    )
    if not form.is_valid():
        problems = "; ".join(f"{field}: {' '.join(map(str, errs))}" for field, errs in form.errors.items())
        flash.error(request, f"{request.POST.get('name', '')!r} was not created: {problems}")
        return redirect("topics:list", cluster=cluster)
    data = form.validated_data
    config = TopicConfig(
        data["name"], data["readQueueNums"], data["writeQueueNums"], PERMS[data["perm"]], order=data["order"]
    )

    async def write(admin: Any) -> list[str]:
        addrs = await on_every_master(
            admin, lambda addr: admin.create_or_update_topic(config, broker_addr=addr)
        )
        await services.until_routed(admin, config.topic_name)  # its page works at once
        return addrs

    try:
        with audited(request, "topic.create", ref.name, data["name"]) as audit:
            audit.after = {k: v for k, v in data.items()}
            brokers, error = ask(ref, write)
            if error:
                raise PageActionFailed(error)
    except PageActionFailed as exc:
        flash.error(request, f"not created: {exc}")
        return redirect("topics:list", cluster=cluster)
    flash.success(request, f"created {data['name']} on {', '.join(brokers or [])}")
    return redirect("topics:detail", cluster=cluster, topic=data["name"])


@login_required
@require_POST
def delete_topic(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """Delete after the impact shown on the page, confirmed by typing the topic's name (admins)."""
    ref = cluster_for(request, cluster, "admin")
    if request.POST.get("confirm") != topic:
        flash.error(request, "not deleted: type the topic's name to confirm")
        return redirect("topics:detail", cluster=cluster, topic=topic)
    try:
        with audited(request, "topic.delete", ref.name, topic) as audit:
            audit.before, _ = ask(ref, lambda admin: services.impact(admin, topic))
            deleted, error = ask(ref, lambda admin: admin.delete_topic(topic))
            if error:
                raise PageActionFailed(error)
            audit.after = {"deletedOn": deleted}
    except PageActionFailed as exc:
        flash.error(request, f"not deleted: {exc}")
        return redirect("topics:detail", cluster=cluster, topic=topic)
    flash.success(request, f"deleted {topic}")
    return redirect("topics:list", cluster=cluster)


class PageActionFailed(Exception):
    """A page's change did not happen (the broker's words are the message; the audit row says so)."""


@login_required
@require_POST
def update_topic(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """Change a topic's queue counts, permission or order flag on every master (operators)."""
    ref = cluster_for(request, cluster, "operate")
    form = TopicWrite(
        data={
            "readQueueNums": request.POST.get("readQueueNums") or 8,
            "writeQueueNums": request.POST.get("writeQueueNums") or 8,
            "perm": request.POST.get("perm") or "RW",
            "order": request.POST.get("order") == "on",
        }
    )
    if not form.is_valid():
        flash.error(request, f"not updated: {form.errors}")
        return redirect("topics:detail", cluster=cluster, topic=topic)
    data = form.validated_data
    config = TopicConfig(
        topic, data["readQueueNums"], data["writeQueueNums"], PERMS[data["perm"]], order=data["order"]
    )

    async def write(admin: Any) -> list[str]:
        return await on_every_master(
            admin, lambda addr: admin.create_or_update_topic(config, broker_addr=addr)
        )

    try:
        with audited(request, "topic.update", ref.name, topic) as audit:
            audit.after = dict(data)
            _brokers, error = ask(ref, write)
            if error:
                raise PageActionFailed(error)
    except PageActionFailed as exc:
        flash.error(request, f"not updated: {exc}")
    else:
        flash.success(request, f"updated {topic} on every master")
    return redirect("topics:detail", cluster=cluster, topic=topic)
