"""Message pages: browse a topic by time (cursor pages, progress, truncation said) and one
message with its properties, body views and consumption by group."""

from __future__ import annotations

import time
from typing import Any

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from broker_core.client.admin import DEFAULT_QUERY_MAX_NUM
from console.audit.services import audited
from console.core.pages import ask, cluster_for, context
from console.messages import services, trace


def _ms(request: HttpRequest, name: str, default: int) -> int:
    try:
        return int(request.GET.get(name, default))
    except ValueError:
        return default


@login_required
@require_GET
def browse(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    now = int(time.time() * 1000)
    begin, end = _ms(request, "begin", now - 3_600_000), _ms(request, "end", now)
    cursor = request.GET.get("cursor") or None
    page, error = ask(ref, lambda admin: services.browse(admin, topic, begin, end, 50, cursor))
    return render(
        request,
        "messages/browse.html",
        context(request, ref, topic=topic, page=page, errors=[error] if error else []),
    )


@login_required
@require_GET
def detail(request: HttpRequest, cluster: str, msg_id: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    topic = request.GET.get("topic") or None
    charset = request.GET.get("charset", "utf-8")

    async def look(admin):  # type: ignore[no-untyped-def]
        msg = await services.find(admin, msg_id, topic)
        return services.detail(msg, charset), [t.to_json() for t in await admin.message_track(msg.msg_id)]

    answer = ask(ref, look)
    found, error = answer
    shown, track = found if found is not None else (None, [])
    traced = None
    if shown is not None and shown.get("uniqKey"):
        bodies, _no_trace = ask(ref, lambda admin: _trace_bodies(admin, shown["uniqKey"]))
        traced = trace.trace_of(shown["uniqKey"], bodies) if bodies else None
    return render(
        request,
        "messages/detail.html",
        context(request, ref, msg=shown, track=track, trace=traced, errors=[error] if error else []),
        status=answer.status,
    )


async def _trace_bodies(admin: Any, uniq_key: str) -> list[str]:
    """The trace records' bodies for a message (none when there is no trace topic)."""
    found = await admin.query_by_key(trace.DEFAULT_TRACE_TOPIC, uniq_key)
    return [m.body.decode("utf-8", errors="replace") for m in found]


@login_required
@require_GET
def by_key(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """Messages of ``topic`` whose keys hold ``?key=`` (the broker's index)."""
    ref = cluster_for(request, cluster)
    key = request.GET.get("key", "").strip()
    rows: list[dict[str, Any]] = []
    error = ""
    if key:
        found, error = ask(ref, lambda admin: admin.query_by_key(topic, key))
        rows = [services.summary(m) for m in found or []]
    return render(
        request,
        "messages/by_key.html",
        context(
            request,
            ref,
            topic=topic,
            key=key,
            rows=rows,
            truncated=len(rows) >= DEFAULT_QUERY_MAX_NUM,
            errors=[error] if error else [],
        ),
    )


@login_required
@require_POST
def resend(request: HttpRequest, cluster: str, msg_id: str) -> HttpResponse:
    """Have one online consumer of a group consume the message now (operators), audited."""
    ref = cluster_for(request, cluster, "operate")
    group, client_id = request.POST.get("group", "").strip(), request.POST.get("clientId", "").strip()
    if not group or not client_id:
        flash.error(request, "give the group and one of its online clients")
        return redirect("messages:detail", cluster=cluster, msg_id=msg_id)
    try:
        with audited(request, "message.resend", ref.name, f"{msg_id} -> {group}") as audit:
            result, error = ask(ref, lambda admin: admin.consume_message_directly(group, client_id, msg_id))
            audit.after = result
            if error:
                raise ResendFailed(error)
    except ResendFailed as exc:
        flash.error(request, f"not resent: {exc}")
    else:
        flash.success(request, f"{client_id} consumed it: {result}")
    return redirect("messages:detail", cluster=cluster, msg_id=msg_id)


class ResendFailed(Exception):
    """The consumer did not take the message (the broker's or client's words)."""
