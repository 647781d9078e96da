"""Serve the console's home page and its health check."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

import broker_core


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Render the landing page."""
    return render(request, "core/home.html", {"version": broker_core.__version__})


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
