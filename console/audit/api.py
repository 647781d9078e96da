"""REST endpoint of the audit log: search it by user, action, cluster, target, result and time."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from broker_core.errors import AdminError
from console.audit import serializers as out
from console.audit.models import AuditEntry
from console.core.access import allowed
from console.core.apiviews import documented

PAGE_MAX = 200


def search(request: Request) -> QuerySet[AuditEntry]:
    """The rows the filters in the query string select (``q`` searches target and detail)."""
    rows = AuditEntry.objects.all()
    params = request.query_params
    for name, field in (
        ("user", "username"),
        ("action", "action"),
        ("cluster", "cluster"),
        ("result", "result"),
    ):
        if params.get(name):
            rows = rows.filter(**{field: params[name]})
    if params.get("target"):
        rows = rows.filter(target__icontains=params["target"])
    for name, lookup in (("since", "at__gte"), ("until", "at__lte")):
        if params.get(name):
            try:
                rows = rows.filter(**{lookup: datetime.fromisoformat(params[name])})
            except ValueError:
                raise AdminError(f"{name} must be an ISO date-time, not {params[name]!r}") from None
    return rows


class AuditList(APIView):
    """GET: audit rows, newest first, of the clusters you may see (superusers: all); filters
    ``user``, ``action``, ``cluster``, ``result``, ``target`` (contains), ``since``, ``until``;
    paged by ``page`` and ``page_size`` (up to 200)."""

    @documented("Search the audit log", responses=out.AuditPageOut)
    def get(self, request: Request) -> Response:
        rows = search(request)
        try:
            page = max(1, int(request.query_params.get("page", 1)))
            size = max(1, min(PAGE_MAX, int(request.query_params.get("page_size", 50))))
        except ValueError:
            raise AdminError("page and page_size must be integers") from None
        if not request.user.is_superuser:
            # Only rows of clusters the user may view (cluster-less rows are for superusers).
            visible = {
                c
                for c in rows.values_list("cluster", flat=True).distinct()
                if c and allowed(request.user, c, "view")
            }
            rows = rows.filter(cluster__in=visible)
        total = rows.count()
        chosen = rows[(page - 1) * size : page * size]
        return Response(
            {"count": total, "page": page, "pageSize": size, "results": [r.to_json() for r in chosen]}
        )
