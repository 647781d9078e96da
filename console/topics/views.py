"""Topic pages: the list (search, type filter, paging) and one topic with its queues,
consumers and a form to send a test message.  Each form's action is a function of
``console.topics.services``, which the REST API calls too."""

from __future__ import annotations

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.clusters import traffic
from console.core.access import allowed
from console.core.actions import attempt, confirmed_delete_page, form_problems
from console.core.pages import ask, cluster_for, context
from console.quiver import platform_settings
from console.topics import services
from console.topics.serializers import TOPIC_NAME_HTML_PATTERN, TOPIC_NAME_RULE, TestMessage, TopicWrite


@login_required
@require_GET
def topic_list(request: HttpRequest, cluster: str) -> HttpResponse:
    """The cluster's topics of the chosen types (applications' by default), searched and paged."""
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
            message_types=services.SETTABLE_MESSAGE_TYPES,
        ),
    )


@login_required
@require_GET
def topic_detail(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """One topic: route, queues, consumers, today's count, and for admins the impact of
    deleting it."""
    ref = cluster_for(request, cluster)
    answer = ask(ref, lambda admin: services.topic_detail(admin, topic))
    detail, error = answer
    if answer.status == 404:  # the nameserver's TOPIC_NOT_EXIST, said for a person
        error = (
            f"There is no topic {topic!r} in this cluster. The Topics page lists those it has; "
            "an operator can create it there."
        )
    if detail is not None:
        detail["storedToday"] = traffic.topic_today(platform_settings()["HISTORY_DIR"], ref.name, topic)
    impact = None
    if detail is not None and allowed(request.user, cluster, "admin"):
        impact, _ = ask(ref, lambda admin: services.impact(admin, topic))
    return render(
        request,
        "topics/detail.html",
        context(
            request,
            ref,
            topic=topic,
            detail=detail,
            impact=impact,
            errors=[error] if error else [],
            message_types=services.SETTABLE_MESSAGE_TYPES,
        ),
        status=answer.status,
    )


def _topic_form(request: HttpRequest, **fields: object) -> TopicWrite:
    """The create or update form: ``fields`` (name, queue counts) with the permission, order
    flag and message type the page posts (no message type: a new topic is NORMAL, an
    updated one keeps its own)."""
    post = request.POST
    data = {**fields, "perm": post.get("perm") or "RW", "order": post.get("order") == "on"}
    if post.get("messageType"):
        data["messageType"] = post["messageType"]
    return TopicWrite(data=data)


@login_required
@require_POST
def send_message(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """The topic page's test-message form (operators)."""
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
    sent = attempt(
        request, "sent", lambda: services.send_test_message(request, ref, topic, form.validated_data)
    )
    if sent is not None:
        flash.success(
            request, f"sent as {sent['msgId']} to queue {sent['queueId']} at offset {sent['queueOffset']}"
        )
    return redirect("topics:detail", cluster=cluster, topic=topic)


@login_required
@require_POST
def create_topic(request: HttpRequest, cluster: str) -> HttpResponse:
    """The list page's create form (operators)."""
    ref = cluster_for(request, cluster, "operate")
    queues = request.POST.get("queues") or 8
    form = _topic_form(
        request, name=request.POST.get("name", ""), readQueueNums=queues, writeQueueNums=queues
    )
    if not form.is_valid():
        flash.error(request, f"{request.POST.get('name', '')!r} was not created: {form_problems(form)}")
        return redirect("topics:list", cluster=cluster)
    spec = services.TopicSpec.of(form.validated_data["name"], form.validated_data)
    brokers = attempt(request, "created", lambda: services.create_topic(request, ref, spec))
    if brokers is None:
        return redirect("topics:list", cluster=cluster)
    flash.success(request, f"created {spec.name} on {', '.join(brokers)}")
    return redirect("topics:detail", cluster=cluster, topic=spec.name)


delete_topic = confirmed_delete_page("topic", services.delete_topic)


@login_required
@require_POST
def update_topic(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """Change a topic's queue counts, permission, order flag or message type on every master
    (operators)."""
    ref = cluster_for(request, cluster, "operate")
    form = _topic_form(
        request,
        readQueueNums=request.POST.get("readQueueNums") or 8,
        writeQueueNums=request.POST.get("writeQueueNums") or 8,
    )
    if not form.is_valid():
        flash.error(request, f"not updated: {form.errors}")
        return redirect("topics:detail", cluster=cluster, topic=topic)
    spec = services.TopicSpec.of(topic, form.validated_data)
    if attempt(request, "updated", lambda: services.update_topic(request, ref, spec)) is not None:
        flash.success(request, f"updated {topic} on every master")
    return redirect("topics:detail", cluster=cluster, topic=topic)
