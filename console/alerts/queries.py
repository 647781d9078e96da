"""Read the kept alerts: filters and paging shared by the REST API and the alerts page."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import serializers

from console.alerts.models import Alert
from console.groups.serializers import GROUP_NAME

PAGE_SIZE_MAX = 500


class AlertFilter(serializers.Serializer):
    """``group``, ``kind``, ``state`` (open, resolved, all), ``page`` (from 1), ``page_size``."""

    cluster = serializers.SlugField(required=False, max_length=64)
    group = serializers.RegexField(GROUP_NAME, required=False)
    kind = serializers.ChoiceField(choices=[k for k, _ in Alert.KINDS], required=False)
    state = serializers.ChoiceField(choices=["open", "resolved", "all"], default="all")
    page = serializers.IntegerField(min_value=1, default=1)
    page_size = serializers.IntegerField(min_value=1, max_value=PAGE_SIZE_MAX, default=100)


def alerts(clusters: list[str] | None, data: dict[str, Any]) -> QuerySet[Alert]:
    """The alerts of ``clusters`` (None: all) matching validated ``AlertFilter`` data, newest first."""
    rows = Alert.objects.all()
    if clusters is not None:
        rows = rows.filter(cluster__in=clusters)
    if data.get("cluster"):
        rows = rows.filter(cluster=data["cluster"])
    if data.get("group"):
        rows = rows.filter(group=data["group"])
    if data.get("kind"):
        rows = rows.filter(kind=data["kind"])
    if data.get("state") == "open":
        rows = rows.filter(resolved_at__isnull=True)
    elif data.get("state") == "resolved":
        rows = rows.filter(resolved_at__isnull=False)
    return rows


def page(rows: QuerySet[Alert], number: int, size: int) -> dict[str, Any]:
    """One page of ``rows`` as JSON, with the total count (the console's paging shape)."""
    start = (number - 1) * size
    return {
        "count": rows.count(),
        "page": number,
        "pageSize": size,
        "results": [a.to_json() for a in rows[start : start + size]],
    }
