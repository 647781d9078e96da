"""Serve the console's home page (the clusters at a glance), its health page and check, and
a long task's page."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import DatabaseError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

import broker_core
from console.core.access import allowed
from console.core.health import health_report
from console.core.longtasks import status
from console.core.models import LongTask
from console.core.overview import overview
from nameserver.clusters import ClusterRef, managed_clusters


def visible_clusters(request: HttpRequest) -> list[ClusterRef]:
    """The clusters the user may view, in the console's order."""
    return [c for c in managed_clusters() if allowed(request.user, c.name, "view")]


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """The landing page: each cluster the user may view with its figures and a link."""
    cards = overview(visible_clusters(request))
    return render(request, "core/home.html", {"version": broker_core.__version__, "cards": cards})


@login_required
@require_GET
def health(request: HttpRequest) -> HttpResponse:
    """The health page: each check in words, with what to do when one fails (503 then)."""
    sections = health_report(visible_clusters(request))
    healthy = all(s.ok for s in sections)
    return render(
        request,
        "core/health.html",
        {"sections": sections, "healthy": healthy, "version": broker_core.__version__},
        status=200 if healthy else 503,
    )


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Report whether the console can serve requests: 200 when its database answers, else 503."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        database = "ok"
    except DatabaseError as exc:
        database = f"error: {exc}"
    healthy = database == "ok"
    return JsonResponse(
        {"status": "ok" if healthy else "error", "version": broker_core.__version__, "database": database},
        status=200 if healthy else 503,
    )


@login_required
@require_GET
def task(request: HttpRequest, task_id: str) -> HttpResponse:
    """A long task's page: progress while it runs (the page refreshes itself), then each outcome."""
    row = visible_task(request, task_id)
    if row is None:
        raise Http404(f"no task {task_id}")
    try:
        state, error = status(row), ""
    except RedisError as exc:
        state, error = None, f"the platform's Redis did not answer: {exc}"
    return render(request, "core/task.html", {"task": state, "error": error, **task_place(request, row)})


def task_place(request: HttpRequest, row: LongTask) -> dict[str, Any]:
    """Where a task belongs in the navigation: its cluster's menu (``nav_cluster``), the link
    marked current (``nav_current``) and the page it came from (``back``), when known."""
    params = row.params or {}
    cluster = next(
        (c for c in visible_clusters(request) if c.namesrv_addr == params.get("namesrv_addr")), None
    )
    if cluster is None:
        return {}
    place: dict[str, Any] = {"nav_cluster": cluster}
    group = params.get("group")
    if group and row.kind.startswith("dlq"):
        try:
            place["nav_current"] = reverse("dlq:overview", args=[cluster.name])
        except NoReverseMatch:  # a console without the dead-letter overview
            place["nav_current"] = reverse("groups:list", args=[cluster.name])
        place["back"] = (reverse("dlq:group", args=[cluster.name, group]), f"the dead letters of {group}")
    elif group:
        place["nav_current"] = reverse("groups:list", args=[cluster.name])
    return place


def visible_task(request: HttpRequest, task_id: str) -> LongTask | None:
    tasks = LongTask.objects.select_related("requested_by")
    if not request.user.is_staff:
        tasks = tasks.filter(requested_by=request.user)
    return tasks.filter(id=task_id).first()
