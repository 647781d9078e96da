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


# What the message endpoints answer (declared for the OpenAPI document; the services build it).


class MessageSummaryOut(serializers.Serializer):
    """What a list shows of a message (``services.summary``): its ids, where it is stored
    (``brokerName`` null when the lookup did not say), tags, keys, times and body size."""

    msgId = serializers.CharField()  # noqa: N815
    uniqKey = serializers.CharField(allow_null=True)  # noqa: N815
    topic = serializers.CharField()
    brokerName = serializers.CharField(allow_null=True)  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    queueOffset = serializers.IntegerField()  # noqa: N815
    tags = serializers.CharField(allow_null=True)
    keys = serializers.CharField(allow_null=True)
    bornTimestamp = serializers.IntegerField()  # noqa: N815
    storeTimestamp = serializers.IntegerField()  # noqa: N815
    bodySize = serializers.IntegerField()  # noqa: N815
    reconsumeTimes = serializers.IntegerField()  # noqa: N815


class BrowsePageOut(serializers.Serializer):
    """A page of a topic's messages, newest first: the range and tags asked, how much of the
    range was scanned, ``truncated`` while messages remain and the ``cursor`` to go on with."""

    topic = serializers.CharField()
    begin = serializers.IntegerField()
    end = serializers.IntegerField()
    tags = serializers.CharField(allow_null=True)
    order = serializers.CharField()
    messages = MessageSummaryOut(many=True)
    scanned = serializers.IntegerField()
    total = serializers.IntegerField()
    progress = serializers.FloatField()
    truncated = serializers.BooleanField()
    cursor = serializers.CharField(allow_null=True)


class ByKeyOut(serializers.Serializer):
    """Messages whose KEYS hold ``key``; ``truncated`` when the index's bound was reached."""

    topic = serializers.CharField()
    key = serializers.CharField()
    messages = MessageSummaryOut(many=True)
    truncated = serializers.BooleanField()


class BodyViewsOut(serializers.Serializer):
    """A body as a person reads it (``bodies.body_views``): text in ``charset`` (null when it
    is not printable text), pretty JSON when it parses, hex of the first 64 KiB."""

    size = serializers.IntegerField()
    charset = serializers.CharField()
    binary = serializers.BooleanField()
    text = serializers.CharField(allow_null=True, allow_blank=True)
    textTruncated = serializers.BooleanField()  # noqa: N815
    json = serializers.CharField(allow_null=True)
    hex = serializers.CharField(allow_blank=True)
    hexTruncated = serializers.BooleanField()  # noqa: N815


class ConsumedByOut(serializers.Serializer):
    """How one group stands with the message (RocketMQ's MessageTrack: e.g. CONSUMED, NOT_CONSUME_YET)."""

    consumerGroup = serializers.CharField()  # noqa: N815
    trackType = serializers.CharField()  # noqa: N815


class MessageDetailOut(MessageSummaryOut):
    """One message: its summary, properties, hosts, offsets, flags, body views and which
    groups consumed it."""

    properties = serializers.DictField(child=serializers.CharField())
    bornHost = serializers.CharField()  # noqa: N815
    storeHost = serializers.CharField()  # noqa: N815
    commitLogOffset = serializers.IntegerField()  # noqa: N815
    sysFlag = serializers.IntegerField()  # noqa: N815
    flag = serializers.IntegerField()
    bodyCrc = serializers.IntegerField()  # noqa: N815
    body = BodyViewsOut()
    consumedBy = ConsumedByOut(many=True)  # noqa: N815


class FoundMessageOut(MessageSummaryOut):
    """A message a search found, and how it matched (offset id, client id, key)."""

    matchedAs = serializers.ListField(child=serializers.CharField())  # noqa: N815


class SearchOut(serializers.Serializer):
    """A search's answer (``search.as_json``): what the text was taken as, the topics searched
    of how many (``bounded`` when not all), the messages found newest first, ``truncated``
    when the index's bound was hit, brokers that did not answer, and sentences saying what
    was searched and, when nothing was found, what to try."""

    query = serializers.CharField()
    topic = serializers.CharField(allow_null=True)
    searchedAs = serializers.ListField(child=serializers.CharField())  # noqa: N815
    topicsSearched = serializers.IntegerField()  # noqa: N815
    topicsTotal = serializers.IntegerField()  # noqa: N815
    bounded = serializers.BooleanField()
    messages = FoundMessageOut(many=True)
    truncated = serializers.BooleanField()
    unanswered = serializers.ListField(child=serializers.CharField())
    searched = serializers.CharField()
    notes = serializers.ListField(child=serializers.CharField())
    nextStep = serializers.CharField(allow_null=True)  # noqa: N815


class ConsumerResendOut(serializers.Serializer):
    """A message consumed again by one online consumer: the consumer's ``result`` as it
    reported it (RocketMQ's ConsumeMessageDirectlyResult)."""

    msgId = serializers.CharField()  # noqa: N815
    group = serializers.CharField()
    clientId = serializers.CharField()  # noqa: N815
    result = serializers.DictField()


class TraceRecordOut(serializers.Serializer):
    """A publication record of a trace (``Pub``, or ``EndTransaction`` of a transactional
    message), as the client wrote it; the fields after ``storeHost`` depend on the kind and
    on the client's version."""

    type = serializers.CharField(help_text="Pub or EndTransaction")
    timestamp = serializers.IntegerField(allow_null=True)
    region = serializers.CharField(allow_blank=True)
    group = serializers.CharField(allow_blank=True)
    topic = serializers.CharField()
    msgId = serializers.CharField()  # noqa: N815
    tags = serializers.CharField(allow_blank=True)
    keys = serializers.CharField(allow_blank=True)
    storeHost = serializers.CharField(allow_blank=True)  # noqa: N815
    msgType = serializers.IntegerField(allow_null=True)  # noqa: N815
    bodyLength = serializers.IntegerField(allow_null=True, required=False)  # noqa: N815
    costMs = serializers.IntegerField(allow_null=True, required=False)  # noqa: N815
    offsetMsgId = serializers.CharField(required=False)  # noqa: N815
    success = serializers.BooleanField(required=False)
    clientHost = serializers.CharField(required=False)  # noqa: N815
    transactionId = serializers.CharField(required=False, allow_blank=True)  # noqa: N815
    transactionState = serializers.CharField(required=False)  # noqa: N815
    fromCheck = serializers.BooleanField(required=False)  # noqa: N815


class TraceAttemptOut(serializers.Serializer):
    """One consumption attempt: when it began, the retry count, its cost and outcome (null
    until its ``SubAfter`` record is there; ``finished`` says whether it is)."""

    startedAt = serializers.IntegerField(allow_null=True)  # noqa: N815
    retryTimes = serializers.IntegerField(allow_null=True)  # noqa: N815
    costMs = serializers.IntegerField(allow_null=True)  # noqa: N815
    success = serializers.BooleanField(allow_null=True)
    finished = serializers.BooleanField()


class TraceOut(serializers.Serializer):
    """A message's trace: its publication records, the attempts of each consumer group
    (by group name), how many records were read, and the topic they were read from."""

    msgId = serializers.CharField()  # noqa: N815
    publish = TraceRecordOut(many=True)
    consumers = serializers.DictField(child=TraceAttemptOut(many=True))
    records = serializers.IntegerField()
    traceTopic = serializers.CharField()  # noqa: N815
