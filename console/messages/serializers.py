"""Validate the query parameters the message endpoints take."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from broker_core.errors import AdminError
from console.messages.times import parse_time

MAX_PAGE = 500
TOPIC_NAME = r"^[%|a-zA-Z0-9_-]{1,127}$"


@extend_schema_field(OpenApiTypes.STR)
class TimeParam(serializers.Field):
    """A time as epoch milliseconds or an ISO 8601 date-time (UTC unless it says otherwise)."""

    def to_internal_value(self, data: Any) -> int | None:
        if not str(data).strip():
            return None  # blank: the view's default
        try:
            return parse_time(str(data), self.field_name)
        except AdminError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def to_representation(self, value: int) -> int:
        return value


class BrowseQuery(serializers.Serializer):
    """A topic's browse: ``begin``/``end`` (default the last hour), ``tags`` (``A || B``),
    ``limit`` (1 to 500, brought within), or ``cursor`` for the next page."""

    begin = TimeParam(required=False, default=None)
    end = TimeParam(required=False, default=None)
    tags = serializers.CharField(required=False, allow_blank=True, default="", max_length=1024)
    limit = serializers.IntegerField(required=False, default=50)
    cursor = serializers.CharField(required=False, allow_blank=True, default="", max_length=64 * 1024)

    def validate_limit(self, value: int) -> int:
        return max(1, min(MAX_PAGE, value))


class ByKeyQuery(serializers.Serializer):
    """``topic`` and ``key`` (both needed), within ``begin``/``end`` (epoch ms, default all time)."""

    topic = serializers.RegexField(TOPIC_NAME, error_messages={"required": "give topic and key"})
    key = serializers.CharField(max_length=1024, error_messages={"required": "give topic and key"})
    begin = serializers.IntegerField(required=False, default=0)
    end = serializers.IntegerField(required=False, default=2**63 - 1)


class DetailQuery(serializers.Serializer):
    """``topic`` narrows the search of a client msgId; ``charset`` reads the body."""

    topic = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    charset = serializers.CharField(required=False, default="utf-8", max_length=40)


class TraceQuery(serializers.Serializer):
    """``traceTopic``: where the clients record traces (default RMQ_SYS_TRACE_TOPIC)."""

    traceTopic = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)  # noqa: N815
