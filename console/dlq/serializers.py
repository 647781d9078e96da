"""Validate what the DLQ endpoints accept."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

MAX_RESEND = 10_000


class GroupResendRequest(serializers.Serializer):
    """Dead letters to re-publish, to their original topic or ``targetTopic``: the offset
    ``msgIds`` named, or with ``all`` every one the DLQ stores now (at most MAX_RESEND, the
    oldest first)."""

    targetTopic = serializers.RegexField(r"^[a-zA-Z0-9_-]{1,127}$", required=False)  # noqa: N815
    msgIds = serializers.ListField(  # noqa: N815 (the API's field name)
        child=serializers.RegexField(
            r"^[0-9A-Fa-f]{32}$", error_messages={"invalid": "not a 32-hex-digit msgId"}
        ),
        required=False,
        max_length=MAX_RESEND,
    )
    all = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["all"] and attrs.get("msgIds"):
            raise serializers.ValidationError("name msgIds or set all, not both")
        if not attrs["all"] and not attrs.get("msgIds"):
            raise serializers.ValidationError(
                {"msgIds": "name at least one message (or set all to resend every stored one)"}
            )
        return attrs


class ResendRequest(GroupResendRequest):
    """A bulk resend naming its group and (optionally) its cluster."""

    cluster = serializers.CharField(required=False, allow_blank=True, default="")
    group = serializers.RegexField(r"^[%|a-zA-Z0-9_-]{1,255}$", max_length=255)


class DlqBrowseQuery(serializers.Serializer):
    """A group's dead letters (``kind=retry``: its retry queue), narrowed by ``tag`` and
    ``key``: with ``page`` (from 1, ``size`` a page, 1 to 500) the Nth page of everything
    stored; otherwise by time, ``begin``/``end`` (epoch ms), ``cursor``, ``limit`` (1 to 500)."""

    kind = serializers.ChoiceField(choices=["dlq", "retry"], required=False, default="dlq")
    tag = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    key = serializers.CharField(required=False, allow_blank=True, default="", max_length=1024)
    page = serializers.IntegerField(required=False, allow_null=True, default=None)
    size = serializers.IntegerField(required=False, allow_null=True, default=None)
    begin = serializers.IntegerField(required=False, allow_null=True, default=None)
    end = serializers.IntegerField(required=False, allow_null=True, default=None)
    limit = serializers.IntegerField(required=False, default=50)
    cursor = serializers.CharField(required=False, allow_blank=True, default="", max_length=64 * 1024)

    def validate_limit(self, value: int) -> int:
        return max(1, min(500, value))


class DlqExportQuery(serializers.Serializer):
    """An export: ``format`` (csv or jsonl), ``kind`` (dlq or retry), ``begin``/``end`` (epoch ms)."""

    format = serializers.ChoiceField(choices=["csv", "jsonl"], required=False, default="jsonl")
    kind = serializers.ChoiceField(choices=["dlq", "retry"], required=False, default="dlq")
    begin = serializers.IntegerField(required=False, default=0)
    end = serializers.IntegerField(required=False, allow_null=True, default=None)
