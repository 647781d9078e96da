"""Validate what the report endpoints accept."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from console.reports.services import KINDS, MAX_RANGE_MS, now_ms

TOPIC = r"^[%|a-zA-Z0-9_-]{1,127}$"


class RunCreate(serializers.Serializer):
    """A report to run now: its kind and period (``since``/``until`` epoch ms, or the last
    ``lastMinutes`` minutes), and optionally the topics it covers (default: all)."""

    kind = serializers.ChoiceField(choices=KINDS)
    since = serializers.IntegerField(required=False, min_value=0)
    until = serializers.IntegerField(required=False, min_value=0)
    lastMinutes = serializers.IntegerField(  # noqa: N815 (the API's field name)
        required=False, min_value=1, max_value=MAX_RANGE_MS // 60_000
    )
    topics = serializers.ListField(
        child=serializers.RegexField(TOPIC, error_messages={"invalid": "not a topic name"}),
        required=False,
        default=list,
        max_length=500,
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "lastMinutes" in attrs:
            if "since" in attrs:
                raise serializers.ValidationError("give since/until or lastMinutes, not both")
            attrs["until"] = attrs.get("until", now_ms())
            attrs["since"] = attrs["until"] - attrs.pop("lastMinutes") * 60_000
        elif "since" not in attrs:
            raise serializers.ValidationError(
                "give the period: since (and until, default now) or lastMinutes"
            )
        attrs.setdefault("until", now_ms())
        return attrs
