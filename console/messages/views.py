"""Message pages: browse a topic by time (cursor pages, progress, truncation said) and one
message with its properties, body views and consumption by group."""

from __future__ import annotations

import time

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.core.pages import ask, cluster_for, context
from console.messages import services


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
    return render(
        request,
        "messages/detail.html",
        context(request, ref, msg=shown, track=track, errors=[error] if error else []),
        status=answer.status,
    )
