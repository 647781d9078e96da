"""Validate what the topic endpoints accept."""

from __future__ import annotations

import base64
import binascii

from rest_framework import serializers

from broker_core.model.messagetype import MESSAGE_TYPES
from console.core.apiviews import PageQuery
from console.topics.services import DEFAULT_TYPES, SETTABLE_MESSAGE_TYPES, TYPES

TOPIC_NAME = r"^[%|a-zA-Z0-9_-]{1,127}$"
# The same rule as a browser form's ``pattern`` (Chromium compiles it with the ``v`` flag,
# where ``|`` and ``-`` must be escaped inside a class), and in words.
TOPIC_NAME_HTML_PATTERN = r"[%\|a-zA-Z0-9_\-]{1,127}"
TOPIC_NAME_RULE = "letters, digits, %, |, _ and -, at most 127 characters (no spaces)"
# The message types a topic may show (one enum in the schema is the settable ones').
MESSAGE_TYPE_OUT = "RocketMQ 5's message.type, one of " + ", ".join(MESSAGE_TYPES)


class TopicWrite(serializers.Serializer):
    """Create or update: queue counts, permission, order flag, message type (omitted: a new
    topic is NORMAL, an updated one keeps its own), and where (a broker cluster name, or
    every master when omitted)."""

    name = serializers.RegexField(
        TOPIC_NAME,
        required=False,
        # Django %-formats validation messages: the rule's "%" is doubled to stay one.
        error_messages={"invalid": "a topic name has " + TOPIC_NAME_RULE.replace("%", "%%")},
    )
    readQueueNums = serializers.IntegerField(min_value=1, max_value=1024, default=8)  # noqa: N815
    writeQueueNums = serializers.IntegerField(min_value=1, max_value=1024, default=8)  # noqa: N815
    perm = serializers.ChoiceField(choices=["RW", "R-", "-W", "--"], default="RW")
    order = serializers.BooleanField(default=False)
    messageType = serializers.ChoiceField(  # noqa: N815
        choices=SETTABLE_MESSAGE_TYPES,
        required=False,
        help_text="RocketMQ 5's message.type: the kind of message the topic takes",
    )
    brokerCluster = serializers.CharField(required=False, allow_blank=True, max_length=127)  # noqa: N815


class TestMessage(serializers.Serializer):
    """A message to send from the console."""

    body = serializers.CharField(allow_blank=True, max_length=6 * 1024 * 1024, trim_whitespace=False)
    # "text" (sent as UTF-8) or "base64" (any bytes, e.g. a binary payload).
    bodyEncoding = serializers.ChoiceField(choices=["text", "base64"], default="text")  # noqa: N815
    tags = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    keys = serializers.CharField(required=False, allow_blank=True, default="", max_length=1024)
    properties = serializers.DictField(
        child=serializers.CharField(max_length=4096), required=False, default=dict
    )
    delayLevel = serializers.IntegerField(min_value=0, max_value=18, default=0)  # noqa: N815

    def validate(self, data: dict) -> dict:
        if data["bodyEncoding"] == "base64":
            try:
                data["bytes"] = base64.b64decode(data["body"], validate=True)
            except (binascii.Error, ValueError):
                raise serializers.ValidationError({"body": "not valid base64"}) from None
        else:
            data["bytes"] = data["body"].encode("utf-8")
        if len(data["bytes"]) > 4 * 1024 * 1024:
            raise serializers.ValidationError({"body": "larger than 4 MiB (maxMessageSize)"})
        return data

    def validate_properties(self, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not key or any(c in key + text for c in "\x01\x02"):
                raise serializers.ValidationError(f"property {key!r}: empty name or a reserved separator")
        return value


class TopicListQuery(PageQuery):
    """The topic list's query: ``search`` (part of the name), ``type`` (comma separated,
    default NORMAL,FIFO; ``all`` for every type), ``page``, ``page_size``."""

    search = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    type = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)

    def validate_type(self, value: str) -> tuple[str, ...]:
        """The types asked for, as a tuple."""
        if value == "all":
            return TYPES
        if not value:
            return DEFAULT_TYPES
        types = tuple(t.strip().upper() for t in value.split(",") if t.strip())
        unknown = [t for t in types if t not in TYPES]
        if unknown:
            raise serializers.ValidationError(
                f"unknown topic type(s) {', '.join(unknown)}; types: {', '.join(TYPES)}, or all"
            )
        return types


class OffsetByTimeQuery(serializers.Serializer):
    """``timestamp``: the moment (epoch ms) whose first offset per queue is wanted."""

    timestamp = serializers.IntegerField(
        min_value=0, error_messages={"required": "give timestamp as epoch milliseconds"}
    )


# What the topic endpoints answer (declared for the OpenAPI document; the services build it).


class TopicRowOut(serializers.Serializer):
    """A topic in the list: its kind, its message type, where it lives, queue counts summed
    over its brokers (null when no master answered for it), permission and order flag."""

    name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    messageType = serializers.CharField(
        allow_null=True, help_text=MESSAGE_TYPE_OUT + " (null when no master answered)"
    )  # noqa: N815
    brokers = serializers.ListField(child=serializers.CharField())
    readQueueNums = serializers.IntegerField(allow_null=True)  # noqa: N815
    writeQueueNums = serializers.IntegerField(allow_null=True)  # noqa: N815
    perm = serializers.CharField(allow_null=True)
    order = serializers.BooleanField()


class TopicPageOut(serializers.Serializer):
    """A page of topics, and the brokers that did not answer (their figures are missing)."""

    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pageSize = serializers.IntegerField()  # noqa: N815
    results = TopicRowOut(many=True)
    unreadableBrokers = serializers.ListField(child=serializers.CharField())  # noqa: N815


class TopicWrittenOut(serializers.Serializer):
    """A created or updated topic: what was stored and on which brokers."""

    name = serializers.CharField()
    brokers = serializers.ListField(child=serializers.CharField())
    readQueueNums = serializers.IntegerField()  # noqa: N815
    writeQueueNums = serializers.IntegerField()  # noqa: N815
    perm = serializers.CharField()
    order = serializers.BooleanField()
    messageType = serializers.ChoiceField(choices=SETTABLE_MESSAGE_TYPES, required=False)  # noqa: N815
    brokerCluster = serializers.CharField(required=False)  # noqa: N815


class TopicRouteQueueOut(serializers.Serializer):
    brokerName = serializers.CharField()  # noqa: N815
    readQueueNums = serializers.IntegerField()  # noqa: N815
    writeQueueNums = serializers.IntegerField()  # noqa: N815
    perm = serializers.CharField()


class TopicRouteOut(serializers.Serializer):
    """The nameservers' route: queues per broker set, each set's addresses by broker id."""

    queueDatas = TopicRouteQueueOut(many=True)  # noqa: N815
    brokers = serializers.DictField(child=serializers.DictField(child=serializers.CharField()))
    orderTopicConf = serializers.CharField(allow_null=True, allow_blank=True)  # noqa: N815


class TopicQueueOut(serializers.Serializer):
    """One queue: its offsets, messages held, and the span of time its messages cover."""

    brokerName = serializers.CharField()  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    minOffset = serializers.IntegerField()  # noqa: N815
    maxOffset = serializers.IntegerField()  # noqa: N815
    messages = serializers.IntegerField()
    lastUpdateTimestamp = serializers.IntegerField(allow_null=True)  # noqa: N815
    earliestStoreTimestamp = serializers.IntegerField(allow_null=True)  # noqa: N815
    retentionSpanMs = serializers.IntegerField(allow_null=True)  # noqa: N815


class StoredTodayOut(serializers.Serializer):
    """Messages the topic stored today (UTC) by the traffic counters, as of when they last ran."""

    messages = serializers.IntegerField()
    asOf = serializers.IntegerField(allow_null=True)  # noqa: N815


class TopicDetailOut(serializers.Serializer):
    """One topic: message type, route, queues, the groups consuming it, messages stored
    today (UTC)."""

    name = serializers.CharField()
    type = serializers.ChoiceField(choices=TYPES)
    messageType = serializers.CharField(
        allow_null=True, help_text=MESSAGE_TYPE_OUT + " (null when no master holds it)"
    )  # noqa: N815
    route = TopicRouteOut()
    totalMessages = serializers.IntegerField()  # noqa: N815
    queues = TopicQueueOut(many=True)
    consumers = serializers.ListField(child=serializers.CharField())
    storedToday = StoredTodayOut()  # noqa: N815


class TopicConsumerImpactOut(serializers.Serializer):
    group = serializers.CharField()
    lag = serializers.IntegerField()
    consumeTps = serializers.FloatField()  # noqa: N815


class TopicImpactOut(serializers.Serializer):
    """What deleting the topic would touch; ``safe`` when no group consumes it and it holds nothing."""

    topic = serializers.CharField()
    messages = serializers.IntegerField()
    consumers = TopicConsumerImpactOut(many=True)
    totalLag = serializers.IntegerField()  # noqa: N815
    safe = serializers.BooleanField()


class TopicDeleteUnconfirmedOut(serializers.Serializer):
    """The 409 of a delete without ``?confirm=<topic>``: the impact to check first."""

    error = serializers.CharField()
    detail = serializers.CharField()
    impact = TopicImpactOut()


class SentOut(serializers.Serializer):
    """A sent test message: its client id (UNIQ_KEY), its offset id, and where it was stored."""

    msgId = serializers.CharField()  # noqa: N815
    offsetMsgId = serializers.CharField()  # noqa: N815
    brokerName = serializers.CharField()  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    queueOffset = serializers.IntegerField()  # noqa: N815


class QueueOffsetOut(serializers.Serializer):
    brokerName = serializers.CharField()  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    offset = serializers.IntegerField()


class OffsetsByTimeOut(serializers.Serializer):
    """Per queue, the first offset stored at or after ``timestamp``."""

    topic = serializers.CharField()
    timestamp = serializers.IntegerField()
    queues = QueueOffsetOut(many=True)
