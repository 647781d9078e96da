"""Validate what the DLQ endpoints accept."""

from __future__ import annotations

from rest_framework import serializers

MAX_RESEND = 10_000


class GroupResendRequest(serializers.Serializer):
    """Dead letters (offset msgIds) to re-publish, to their original topic or ``targetTopic``."""

    targetTopic = serializers.RegexField(r"^[a-zA-Z0-9_-]{1,127}$", required=False)  # noqa: N815
    msgIds = serializers.ListField(  # noqa: N815 (the API's field name)
        child=serializers.RegexField(
            r"^[0-9A-Fa-f]{32}$", error_messages={"invalid": "not a 32-hex-digit msgId"}
        ),
        min_length=1,
        max_length=MAX_RESEND,
    )


class ResendRequest(GroupResendRequest):
    """A bulk resend naming its group and (optionally) its cluster."""

    cluster = serializers.CharField(required=False, allow_blank=True, default="")
    group = serializers.RegexField(r"^[%|a-zA-Z0-9_-]{1,255}$", max_length=255)
