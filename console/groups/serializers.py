"""Validate what the group endpoints accept."""

from __future__ import annotations

from rest_framework import serializers

GROUP_NAME = r"^[%|a-zA-Z0-9_-]{1,255}$"


class GroupConfigWrite(serializers.Serializer):
    """A subscription-group config (RocketMQ's names), stored on every master or one broker cluster."""

    name = serializers.RegexField(GROUP_NAME, required=False)
    consumeEnable = serializers.BooleanField(default=True)  # noqa: N815
    consumeBroadcastEnable = serializers.BooleanField(default=True)  # noqa: N815
    consumeFromMinEnable = serializers.BooleanField(  # noqa: N815
        default=True,
        help_text="stored for RocketMQ's tools; no broker acts on it (RocketMQ 4.9's does not either)",
    )
    retryQueueNums = serializers.IntegerField(min_value=0, max_value=64, default=1)  # noqa: N815
    retryMaxTimes = serializers.IntegerField(min_value=-1, max_value=10_000, default=16)  # noqa: N815
    brokerCluster = serializers.CharField(required=False, allow_blank=True, max_length=127)  # noqa: N815


class QueueOffset(serializers.Serializer):
    brokerName = serializers.CharField(max_length=127)  # noqa: N815
    queueId = serializers.IntegerField(min_value=0, max_value=65535)  # noqa: N815
    offset = serializers.IntegerField(min_value=0)


class OffsetReset(serializers.Serializer):
    """How to move a group on a topic: by time, to the ends, or to exact per-queue offsets."""

    topic = serializers.RegexField(r"^[%|a-zA-Z0-9_-]{1,127}$")
    mode = serializers.ChoiceField(choices=["timestamp", "earliest", "latest", "exact"])
    timestamp = serializers.IntegerField(min_value=0, required=False)
    offsets = QueueOffset(many=True, required=False)

    def validate(self, data: dict) -> dict:
        if data["mode"] == "timestamp" and "timestamp" not in data:
            raise serializers.ValidationError({"timestamp": "give the time (epoch ms) to reset to"})
        if data["mode"] == "exact" and not data.get("offsets"):
            raise serializers.ValidationError({"offsets": "give at least one queue's offset"})
        return data


class MonitorWrite(serializers.Serializer):
    """A group's thresholds, each an alert kind: fewest clients online (0: off), most
    messages behind, most seconds behind, minutes of growing lag (null: off), and the
    webhook alerts of this group go to (blank: the platform's)."""

    minClients = serializers.IntegerField(min_value=0, max_value=100_000, default=0)  # noqa: N815
    maxLag = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None)  # noqa: N815
    maxSecondsBehind = serializers.IntegerField(  # noqa: N815
        min_value=0, max_value=30 * 24 * 3600, required=False, allow_null=True, default=None
    )
    growingMinutes = serializers.IntegerField(  # noqa: N815
        min_value=1, max_value=24 * 60, required=False, allow_null=True, default=None
    )
    webhookUrl = serializers.URLField(  # noqa: N815
        max_length=500, required=False, allow_blank=True, default=""
    )

    def validate_webhookUrl(self, value: str) -> str:  # noqa: N802 (DRF names it after the field)
        if value and not value.lower().startswith(("http://", "https://")):
            raise serializers.ValidationError("the webhook must be an http:// or https:// URL")
        return value
