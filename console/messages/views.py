"""Message pages: find a message from any id or key (one box on every cluster page),
browse a topic by time and tag (newest first across queues, cursor pages, progress and
truncation said), and one message with its properties, body views and consumption by group."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from broker_core.client.admin import DEFAULT_QUERY_MAX_NUM, AdminClient
from broker_core.errors import AdminError, AdminUnreachableError
from console.core.actions import attempt
from console.core.pages import ask, cluster_for, context
from console.messages import search, services, trace
from console.messages.times import parse_time, picker_value

PAGE_SIZE = 50
HOUR_MS = 3_600_000


def _picked(request: HttpRequest, picker: str, legacy: str, default: int) -> int:
    """A time from the page's date-time picker (UTC), or from ``legacy`` epoch ms links.

    A picker's 'to' names a whole second (or minute): it reaches to that second's end."""
    raw = request.GET.get(picker, "").strip()
    if raw:
        ms = parse_time(raw, f"the '{picker}' time")
        whole = len(raw) <= len("2026-11-26T03:20:00") and not raw.lstrip("-").isdigit()
        if picker == "to" and whole:
            ms += 999 if raw.count(":") == 2 else 59_999
        return ms
    raw = request.GET.get(legacy, "").strip()
    return parse_time(raw, legacy) if raw else default


@login_required
@require_GET
def browse(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """A topic's messages stored between two times (UTC pickers, the last hour by default),
    optionally of some tags, newest first across all its queues."""
    ref = cluster_for(request, cluster)
    now = int(time.time() * 1000)
    cursor = request.GET.get("cursor") or None
    tags = request.GET.get("tags", "").strip()
    page: dict[str, Any] | None = None
    errors: list[str] = []
    status = 200
    try:
        begin = _picked(request, "from", "begin", now - HOUR_MS)
        end = _picked(request, "to", "end", now)
    except AdminError as exc:
        begin, end, status = now - HOUR_MS, now, 400
        errors.append(str(exc))
    if not errors:
        answer = ask(
            ref, lambda admin: services.browse(admin, topic, begin, end, PAGE_SIZE, cursor, tags=tags or None)
        )
        page, status = answer[0], answer.status
        if answer[1]:
            errors.append(answer[1])
    if page is not None:
        begin, end, tags = page["begin"], page["end"], page["tags"] or ""
    return render(
        request,
        "messages/browse.html",
        context(
            request,
            ref,
            topic=topic,
            page=page,
            picked_from=picker_value(begin),
            picked_to=picker_value(end),
            tags=tags,
            later_page=cursor is not None,
            errors=errors,
        ),
        status=status,
    )


@login_required
@require_GET
def search_page(request: HttpRequest, cluster: str) -> HttpResponse:
    """The message search: any id or key, optionally in one topic.  One message found opens
    its page; several are listed; none says what was searched and what to try."""
    ref = cluster_for(request, cluster)
    text = request.GET.get("q", "").strip()
    topic = request.GET.get("topic", "").strip()
    result: dict[str, Any] | None = None
    errors: list[str] = []
    status = 200
    if text or "q" in request.GET:
        answer = ask(ref, lambda admin: search.run(admin, text, topic or None))
        found, error = answer
        if error:
            errors, status = [error], answer.status
        else:
            result = search.as_json(found)
            if len(result["messages"]) == 1 and not result["unanswered"]:
                return redirect("messages:detail", cluster=cluster, msg_id=result["messages"][0]["msgId"])
    return render(
        request,
        "messages/search.html",
        context(request, ref, q=text, topic=topic, result=result, errors=errors),
        status=status,
    )


@login_required
@require_GET
def detail(request: HttpRequest, cluster: str, msg_id: str) -> HttpResponse:
    """One message by its offset id; any other id (a client id, UNIQ_KEY) goes through the
    search, which opens the message when it finds exactly one."""
    ref = cluster_for(request, cluster)
    topic = request.GET.get("topic") or None
    charset = request.GET.get("charset", "utf-8")

    async def look(admin: AdminClient) -> tuple[services.MessageDetail, list[dict[str, str]]] | None:
        try:
            msg = await admin.view_message(msg_id)
        except AdminUnreachableError:
            raise
        except AdminError:
            if search.HEX_ID.fullmatch(msg_id.strip()):
                return None  # no offset id of a broker: the search tries it as a client id
            raise
        return services.detail(msg, charset), [t.to_json() for t in await admin.message_track(msg.msg_id)]

    answer = ask(ref, look)
    found, error = answer
    if found is None and not error:
        query = urlencode({"q": msg_id.strip(), **({"topic": topic} if topic else {})})
        return redirect(reverse("messages:search", kwargs={"cluster": cluster}) + "?" + query)
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


async def _trace_bodies(admin: AdminClient, uniq_key: str) -> list[str]:
    """The trace records' bodies for a message (none when there is no trace topic)."""
    found = await admin.query_by_key(trace.DEFAULT_TRACE_TOPIC, uniq_key)
    return [m.body.decode("utf-8", errors="replace") for m in found]


@login_required
@require_GET
def by_key(request: HttpRequest, cluster: str, topic: str) -> HttpResponse:
    """Messages of ``topic`` whose keys hold ``?key=`` (the broker's index)."""
    ref = cluster_for(request, cluster)
    key = request.GET.get("key", "").strip()
    rows: list[services.MessageSummary] = []
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
    result = attempt(
        request, "resent", lambda: services.resend_to_client(request, ref, msg_id, group, client_id)
    )
    if result is not None:
        flash.success(request, f"{client_id} consumed it: {result}")
    return redirect("messages:detail", cluster=cluster, msg_id=msg_id)
