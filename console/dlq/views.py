"""The DLQ page of a group: its dead letters, select and resend them (a long task whose
progress and per-message outcome the task page shows)."""

from __future__ import annotations

import time

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from redis.exceptions import RedisError

from console.audit.services import audited
from console.core.longtasks import launch
from console.core.pages import ask, cluster_for, context
from console.dlq import services
from console.dlq.tasks import long_resend_dlq


@login_required
@require_GET
def group_dlq(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    kind = request.GET.get("kind", "dlq") if request.GET.get("kind") in ("dlq", "retry") else "dlq"
    now = int(time.time() * 1000)
    cursor = request.GET.get("cursor") or None
    tag, key = request.GET.get("tag", ""), request.GET.get("key", "")
    page, error = ask(
        ref,
        lambda admin: services.browse(admin, group, kind, now - 3 * 86_400_000, now, 100, cursor, tag, key),
    )
    return render(
        request,
        "dlq/group.html",
        context(
            request, ref, group=group, kind=kind, page=page, tag=tag, key=key, errors=[error] if error else []
        ),
    )


@login_required
@require_POST
def resend(request: HttpRequest, cluster: str, group: str) -> HttpResponse:
    ref = cluster_for(request, cluster, "operate")
    ids = [i for i in request.POST.getlist("msgId") if len(i) == 32]
    target = request.POST.get("targetTopic", "").strip()
    if not ids:
        return render(
            request,
            "dlq/group.html",
            context(request, ref, group=group, kind="dlq", page=None, errors=["select at least one message"]),
            status=400,
        )
    if target:
        _route, error = ask(ref, lambda admin: admin.topic_route(target))
        if error:
            return render(
                request,
                "dlq/group.html",
                context(request, ref, group=group, kind="dlq", page=None, errors=[f"target topic: {error}"]),
                status=400,
            )
    params = {"namesrv_addr": ref.namesrv_addr, "group": group, "msg_ids": ids, "target_topic": target}
    title = f"Resend {len(ids)} dead letter(s) of {group} to {target or 'their original topic'} ({ref.name})"
    with audited(request, "dlq.resend", ref.name, group) as audit:
        try:
            row = launch(long_resend_dlq, "dlq_resend", title, request.user, params)
        except (RedisError, OSError) as exc:
            audit.after = {"queued": False}
            errors = [f"the task could not be queued: {exc}"]
            return render(
                request,
                "dlq/group.html",
                context(request, ref, group=group, kind="dlq", page=None, errors=errors),
                status=503,
            )
        audit.after = {"task": str(row.id), "messages": len(ids)}
    return redirect("core:task", task_id=row.id)
