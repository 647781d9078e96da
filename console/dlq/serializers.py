"""Validate what the DLQ endpoints accept."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from console.messages.serializers import MessageSummaryOut

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


# What the DLQ endpoints answer (declared for the OpenAPI document; the services build it).


class DlqGroupOut(serializers.Serializer):
    """A group with a dead-letter topic: the dead letters it keeps (the broker's offsets),
    when the oldest and newest were stored (null: none stored) and its queue count."""

    group = serializers.CharField()
    topic = serializers.CharField()
    deadLetters = serializers.IntegerField()  # noqa: N815
    oldestStoreTimestamp = serializers.IntegerField(allow_null=True)  # noqa: N815
    newestStoreTimestamp = serializers.IntegerField(allow_null=True)  # noqa: N815
    queues = serializers.IntegerField()


class DlqOverviewOut(serializers.Serializer):
    """Every group with a dead-letter topic, most dead letters first, and the sums."""

    groups = DlqGroupOut(many=True)
    total = serializers.IntegerField()
    groupsWithDeadLetters = serializers.IntegerField()  # noqa: N815


class DlqPageOut(serializers.Serializer):
    """A page of a group's dead letters (or retries); ``never`` when the group has no such
    topic.  With ``?page``: ``pageSize``, ``tag``, ``key``, ``total``, ``page``, ``pages``,
    the positions shown (``first``/``last``), the ``spans`` of "select all"
    (``[broker, queueId, first, stop]``) and how many they hold.  By time: the browse's
    range, scan progress, ``truncated`` and ``cursor``."""

    group = serializers.CharField()
    kind = serializers.ChoiceField(choices=["dlq", "retry"])
    topic = serializers.CharField()
    never = serializers.BooleanField()
    messages = MessageSummaryOut(many=True)
    # By page.
    pageSize = serializers.IntegerField(required=False)  # noqa: N815
    tag = serializers.CharField(required=False, allow_blank=True)
    key = serializers.CharField(required=False, allow_blank=True)
    total = serializers.IntegerField(required=False)
    page = serializers.IntegerField(required=False)
    pages = serializers.IntegerField(required=False)
    first = serializers.IntegerField(required=False)
    last = serializers.IntegerField(required=False)
    spans = serializers.ListField(child=serializers.ListField(), required=False)
    selectable = serializers.IntegerField(required=False)
    # By time (see BrowsePageOut).
    begin = serializers.IntegerField(required=False)
    end = serializers.IntegerField(required=False)
    tags = serializers.CharField(required=False, allow_null=True)
    order = serializers.CharField(required=False)
    scanned = serializers.IntegerField(required=False)
    progress = serializers.FloatField(required=False)
    truncated = serializers.BooleanField(required=False)
    cursor = serializers.CharField(required=False, allow_null=True)


class ResendQueuedOut(serializers.Serializer):
    """A queued resend (202): the task's id, where to follow it, and how many messages."""

    taskId = serializers.CharField()  # noqa: N815
    url = serializers.CharField()
    messages = serializers.IntegerField()


class ResendRefusedOut(serializers.Serializer):
    """A resend not queued: nothing to resend (409) or the task queue unreachable (503)."""

    error = serializers.CharField()
    detail = serializers.CharField()
