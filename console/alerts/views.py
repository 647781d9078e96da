"""The alerts page of a cluster: open alerts, then the resolved ones (paged)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.alerts.models import Alert
from console.alerts.services import last_check
from console.core.pages import cluster_for, context


@login_required
@require_GET
def alert_list(request: HttpRequest, cluster: str) -> HttpResponse:
    ref = cluster_for(request, cluster)
    rows = Alert.objects.filter(cluster=ref.name)
    group = request.GET.get("group", "").strip()
    if group:
        rows = rows.filter(group=group)
    open_alerts = list(rows.filter(resolved_at__isnull=True))
    resolved = Paginator(rows.filter(resolved_at__isnull=False), 50).get_page(request.GET.get("page"))
    return render(
        request,
        "alerts/list.html",
        context(request, ref, open_alerts=open_alerts, resolved=resolved, group=group, last=last_check()),
    )
