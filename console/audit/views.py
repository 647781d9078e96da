"""The audit page: every change made through the console, searchable."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.audit.diffs import field_changes
from console.audit.models import AuditEntry
from console.core.access import allowed


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    """Newest first, filtered by the form's fields; rows of clusters the user may view, each
    with its fields before → after."""
    rows = AuditEntry.objects.all()
    query = {k: request.GET.get(k, "").strip() for k in ("user", "action", "target", "result")}
    if query["user"]:
        rows = rows.filter(username=query["user"])
    if query["action"]:
        rows = rows.filter(action__startswith=query["action"])
    if query["target"]:
        rows = rows.filter(target__icontains=query["target"])
    if query["result"]:
        rows = rows.filter(result=query["result"])
    shown = [
        r
        for r in rows[:500]
        if request.user.is_superuser or (r.cluster and allowed(request.user, r.cluster, "view"))
    ][:200]
    entries = [{"row": r, "changes": field_changes(r.before, r.after)} for r in shown]
    return render(request, "audit/list.html", {"entries": entries, "query": query})
