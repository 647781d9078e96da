"""Serve the console's home page and its health check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import DatabaseError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

import broker_core
from console.core.longtasks import status
from console.core.models import LongTask


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Render the landing page: the clusters the user may open."""
    from console.core.access import allowed
    from nameserver.clusters import managed_clusters

    clusters = [c for c in managed_clusters() if allowed(request.user, c.name, "view")]
    return render(request, "core/home.html", {"version": broker_core.__version__, "clusters": clusters})


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
    return render(request, "core/task.html", {"task": state, "error": error})


def visible_task(request: HttpRequest, task_id: str) -> LongTask | None:
    tasks = LongTask.objects.select_related("requested_by")
    if not request.user.is_staff:
        tasks = tasks.filter(requested_by=request.user)
    return tasks.filter(id=task_id).first()
