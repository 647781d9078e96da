"""The maintenance page: each job's schedule, last runs per broker, and overdue flags."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from redis.exceptions import RedisError

from console.maintenance.services import job_overview


@login_required
@require_GET
def jobs(request: HttpRequest) -> HttpResponse:
    """Render the jobs' status; a Redis that does not answer is said so, not shown as empty."""
    try:
        overview, error = job_overview(), ""
    except RedisError as exc:
        overview = {"jobs": [], "brokers": [], "fallbackBrokers": [], "recent": [], "deletions": []}
        error = f"the platform's Redis did not answer: {exc}"
    return render(
        request, "maintenance/jobs.html", {**overview, "error": error}, status=503 if error else 200
    )
