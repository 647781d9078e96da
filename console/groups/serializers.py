"""Validate what the group endpoints accept."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from broker_core.model.groupconfig import SubscriptionGroupConfig
from console.core.apiviews import PageQuery

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
    consumeMessageOrderly = serializers.BooleanField(  # noqa: N815
        required=False,
        help_text="a FIFO group (RocketMQ 5): its pop consumers get one message group's messages in "
        "order, one in flight at a time; false when a group is created without it, kept as it is "
        "when an update does not name it",
    )
    brokerCluster = serializers.CharField(required=False, allow_blank=True, max_length=127)  # noqa: N815


def group_config(name: str, data: dict[str, Any]) -> SubscriptionGroupConfig:
    """Validated ``GroupConfigWrite`` data as ``name``'s config (``brokerCluster`` is where, not
    what; a ``consumeMessageOrderly`` it does not name is false)."""
    return SubscriptionGroupConfig(
        name,
        consume_enable=data["consumeEnable"],
        consume_from_min_enable=data["consumeFromMinEnable"],
        consume_broadcast_enable=data["consumeBroadcastEnable"],
        retry_queue_nums=data["retryQueueNums"],
        retry_max_times=data["retryMaxTimes"],
        consume_message_orderly=bool(data.get("consumeMessageOrderly", False)),
    )


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


SORT_KEYS = ("group", "lag", "secondsBehind", "consumeTps", "clients")


class GroupListQuery(PageQuery):
    """The group list's query: ``search`` (part of the name), ``system`` (also the broker's own
    groups), ``sort`` (a key, ``-`` first for descending), ``page``, ``page_size``."""

    search = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    system = serializers.BooleanField(required=False, default=False)
    sort = serializers.ChoiceField(
        choices=[*SORT_KEYS, *(f"-{k}" for k in SORT_KEYS)], required=False, default="group"
    )


class ProducerQuery(serializers.Serializer):
    """``topic``: only the producers connected to this topic's masters (every master without it)."""

    topic = serializers.RegexField(r"^[%|a-zA-Z0-9_-]{1,127}$", required=False, allow_blank=True, default="")


# What the group endpoints answer (declared for the OpenAPI document; the services build it).


class GroupConfigOut(serializers.Serializer):
    """A subscription-group config in RocketMQ's field names."""

    groupName = serializers.CharField()  # noqa: N815
    consumeEnable = serializers.BooleanField()  # noqa: N815
    consumeFromMinEnable = serializers.BooleanField()  # noqa: N815
    consumeBroadcastEnable = serializers.BooleanField()  # noqa: N815
    retryQueueNums = serializers.IntegerField()  # noqa: N815
    retryMaxTimes = serializers.IntegerField()  # noqa: N815
    brokerId = serializers.IntegerField()  # noqa: N815
    whichBrokerWhenConsumeSlowly = serializers.IntegerField()  # noqa: N815
    notifyConsumerIdsChangedEnable = serializers.BooleanField()  # noqa: N815
    consumeMessageOrderly = serializers.BooleanField(help_text="a FIFO group (RocketMQ 5)")  # noqa: N815


class PopFiguresOut(serializers.Serializer):
    """A group's pop consumption (RocketMQ 5 clients) summed over every master: messages in
    flight (handed out, not acked) and held behind their message group's (FIFO), acks per
    second over the last minute, and since each broker started the acked, redelivered and
    dead-lettered counts."""

    inFlight = serializers.IntegerField()  # noqa: N815
    held = serializers.IntegerField()
    ackedTps = serializers.FloatField()  # noqa: N815
    acked = serializers.IntegerField()
    redelivered = serializers.IntegerField()
    deadLettered = serializers.IntegerField()  # noqa: N815


class GroupRowOut(serializers.Serializer):
    """A group in the list: lag in messages and seconds (null when a broker did not answer),
    topics, clients online, consumption model and rate, its config (null: none stored),
    whether it is a FIFO group, and its pop figures (null: it has not consumed by pop)."""

    group = serializers.CharField()
    lag = serializers.IntegerField(allow_null=True)
    secondsBehind = serializers.FloatField(allow_null=True)  # noqa: N815
    topics = serializers.ListField(child=serializers.CharField())
    clients = serializers.IntegerField()
    online = serializers.BooleanField()
    messageModel = serializers.CharField(allow_null=True)  # noqa: N815
    consumeType = serializers.CharField(allow_null=True)  # noqa: N815
    consumeTps = serializers.FloatField()  # noqa: N815
    config = GroupConfigOut(allow_null=True)
    fifo = serializers.BooleanField()
    pop = PopFiguresOut(allow_null=True)


class GroupPageOut(serializers.Serializer):
    """A page of groups, and the brokers that did not answer (lag is then unknown)."""

    count = serializers.IntegerField()
    page = serializers.IntegerField()
    pageSize = serializers.IntegerField()  # noqa: N815
    results = GroupRowOut(many=True)
    unreadableBrokers = serializers.ListField(child=serializers.CharField())  # noqa: N815


class GroupWrittenOut(serializers.Serializer):
    """A created or updated group: its stored config and the brokers it was stored on."""

    group = serializers.CharField()
    brokers = serializers.ListField(child=serializers.CharField())
    config = GroupConfigOut()


class GroupTopicOut(serializers.Serializer):
    """How far the group got through one topic: the sums over its queues."""

    topic = serializers.CharField()
    brokerOffset = serializers.IntegerField()  # noqa: N815
    consumerOffset = serializers.IntegerField()  # noqa: N815
    lag = serializers.IntegerField()


class GroupQueueOut(serializers.Serializer):
    """The group on one queue: the queue's end, the committed offset (-1: none), the lag,
    and the online client holding it (when known)."""

    topic = serializers.CharField()
    brokerName = serializers.CharField()  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    brokerOffset = serializers.IntegerField()  # noqa: N815
    consumerOffset = serializers.IntegerField()  # noqa: N815
    lag = serializers.IntegerField()
    lastTimestamp = serializers.IntegerField()  # noqa: N815
    clientId = serializers.CharField(required=False, allow_null=True)  # noqa: N815


class ClientOut(serializers.Serializer):
    """One connected client: its language and RocketMQ version code as its frames say, its
    protocol (``remoting``, or the proxy's name for gRPC, e.g. ``gRPC v2``, for a RocketMQ 5
    client) and such a client's SDK version ("" for remoting clients)."""

    clientId = serializers.CharField()  # noqa: N815
    clientAddr = serializers.CharField()  # noqa: N815
    language = serializers.CharField()
    version = serializers.IntegerField()
    protocol = serializers.CharField()
    versionDesc = serializers.CharField(allow_blank=True)  # noqa: N815


class ConnectionOut(serializers.Serializer):
    """The group's clients online and what they subscribe to."""

    group = serializers.CharField()
    connectionSet = ClientOut(many=True)  # noqa: N815
    subscriptionTable = serializers.DictField(child=serializers.DictField())  # noqa: N815
    consumeType = serializers.CharField()  # noqa: N815
    messageModel = serializers.CharField()  # noqa: N815
    consumeFromWhere = serializers.CharField()  # noqa: N815


class GroupDetailOut(serializers.Serializer):
    """One group: lag and rate, progress per topic and per queue, its clients (null when
    none is online) and its config on each master that stores one."""

    group = serializers.CharField()
    totalLag = serializers.IntegerField()  # noqa: N815
    consumeTps = serializers.FloatField()  # noqa: N815
    topics = GroupTopicOut(many=True)
    online = serializers.BooleanField()
    connection = ConnectionOut(allow_null=True)
    queues = GroupQueueOut(many=True)
    configs = serializers.DictField(child=GroupConfigOut())


class GroupImpactOut(serializers.Serializer):
    """What deleting the group would touch; ``safe`` when no client of it is online."""

    group = serializers.CharField()
    clientsOnline = serializers.IntegerField()  # noqa: N815
    totalLag = serializers.IntegerField()  # noqa: N815
    topics = serializers.ListField(child=serializers.CharField())
    safe = serializers.BooleanField()


class GroupDeleteUnconfirmedOut(serializers.Serializer):
    """The 409 of a delete without ``?confirm=<group>``: the impact to check first."""

    error = serializers.CharField()
    detail = serializers.CharField()
    impact = GroupImpactOut()


class RunningInfoOut(serializers.Serializer):
    """What one online client says of itself (RocketMQ's ConsumerRunningInfo, as it sent it)."""

    group = serializers.CharField()
    clientId = serializers.CharField()  # noqa: N815
    runningInfo = serializers.CharField()  # noqa: N815


class PlannedQueueOut(serializers.Serializer):
    """One queue of a reset: the committed offset, the new one, messages moved (+ skipped,
    - replayed), the queue's range, and once applied the offset read back and whether it took."""

    brokerName = serializers.CharField()  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    currentOffset = serializers.IntegerField()  # noqa: N815
    newOffset = serializers.IntegerField()  # noqa: N815
    delta = serializers.IntegerField()
    minOffset = serializers.IntegerField(allow_null=True)  # noqa: N815
    maxOffset = serializers.IntegerField(allow_null=True)  # noqa: N815
    resultOffset = serializers.IntegerField(required=False)  # noqa: N815
    ok = serializers.BooleanField(required=False)


class ResetPlanOut(serializers.Serializer):
    """A reset's preview (``queues`` without results) or its outcome (with ``ok``)."""

    group = serializers.CharField()
    topic = serializers.CharField()
    mode = serializers.CharField()
    queues = PlannedQueueOut(many=True)
    ok = serializers.BooleanField(required=False)


class ProducerConnectionsOut(serializers.Serializer):
    """The producers of a producer group connected now."""

    group = serializers.CharField()
    topic = serializers.CharField(allow_null=True)
    connections = serializers.ListField(child=serializers.DictField())


class MonitorOut(serializers.Serializer):
    """A group's thresholds (the webhook shown as scheme and host only)."""

    cluster = serializers.CharField()
    group = serializers.CharField()
    minClients = serializers.IntegerField()  # noqa: N815
    maxLag = serializers.IntegerField(allow_null=True)  # noqa: N815
    maxSecondsBehind = serializers.IntegerField(allow_null=True)  # noqa: N815
    growingMinutes = serializers.IntegerField(allow_null=True)  # noqa: N815
    webhookUrl = serializers.CharField(allow_blank=True)  # noqa: N815
    updated = serializers.DateTimeField()


class MonitorListOut(serializers.Serializer):
    monitors = MonitorOut(many=True)


class AttemptCountOut(serializers.Serializer):
    """Messages in flight on one delivery attempt (1: the first delivery)."""

    attempt = serializers.IntegerField()
    messages = serializers.IntegerField()


class PopQueueOut(serializers.Serializer):
    """The group's pop consumption of one queue: offsets below ``baseOffset`` are finished
    (acked or dead-lettered), ``cursorOffset`` is the next to hand out."""

    topic = serializers.CharField()
    brokerName = serializers.CharField()  # noqa: N815
    queueId = serializers.IntegerField()  # noqa: N815
    baseOffset = serializers.IntegerField()  # noqa: N815
    cursorOffset = serializers.IntegerField()  # noqa: N815
    inFlight = serializers.IntegerField()  # noqa: N815
    held = serializers.IntegerField()
    acked = serializers.IntegerField()
    redelivered = serializers.IntegerField()
    deadLettered = serializers.IntegerField()  # noqa: N815
    attempts = AttemptCountOut(many=True)


class GroupPopOut(PopFiguresOut):
    """A group's pop consumption (RocketMQ 5 clients, through the proxy) on every master:
    ``popping`` when any has a pop book of it, ``fifo`` for a FIFO group, the summed figures
    with the messages in flight per delivery attempt, each queue's, and the masters asked."""

    group = serializers.CharField()
    popping = serializers.BooleanField()
    fifo = serializers.BooleanField()
    attempts = AttemptCountOut(many=True)
    queues = PopQueueOut(many=True)
    brokers = serializers.ListField(child=serializers.CharField())
