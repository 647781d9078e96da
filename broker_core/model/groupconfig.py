"""Subscription-group configs as values: how one consumer group may consume (RocketMQ
``SubscriptionGroupConfig``).

The broker stores them (``broker_core.broker.groups.SubscriptionGroupManager``, in
``subscriptionGroup.json``); the admin client sends them in UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
and reads them back.  The JSON form uses RocketMQ's camelCase field names::

    {"groupName": "<group>", "consumeEnable": true, "retryQueueNums": 1,
     "retryMaxTimes": 16, "brokerId": 0, ...}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from broker_core.model.jsonfields import json_bool, json_int, json_str
from broker_core.topics import group_problem

MASTER_ID = 0

GroupName = str


class SubscriptionGroupConfigJson(TypedDict):
    groupName: str
    consumeEnable: bool
    consumeFromMinEnable: bool
    consumeBroadcastEnable: bool
    retryQueueNums: int
    retryMaxTimes: int
    brokerId: int
    whichBrokerWhenConsumeSlowly: int
    notifyConsumerIdsChangedEnable: bool
    consumeMessageOrderly: bool


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """How one consumer group may consume from this broker.

    ``retry_max_times`` is how often a message is redelivered before it goes to the
    group's DLQ; ``retry_queue_nums`` is the queue count of its ``%RETRY%`` topic.
    ``broker_id`` is where the group pulls from (0 = the master) and
    ``which_broker_when_consume_slowly`` where it is sent when it falls far behind.
    ``consume_message_orderly`` makes it a FIFO group (RocketMQ 5): its pop consumers get
    the messages of one message group in order, one in flight at a time.
    """

    group_name: GroupName
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = MASTER_ID
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False

    def problem(self) -> str | None:
        """Return why this config may not be stored, or None when it may."""
        name_problem = group_problem(self.group_name)
        if name_problem is not None:
            return name_problem
        for label, value in (
            ("retryQueueNums", self.retry_queue_nums),
            ("retryMaxTimes", self.retry_max_times),
            ("brokerId", self.broker_id),
            ("whichBrokerWhenConsumeSlowly", self.which_broker_when_consume_slowly),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                return f"{label} of group {self.group_name!r} must be a non-negative integer, not {value!r}"
        return None

    def to_json(self) -> SubscriptionGroupConfigJson:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "brokerId": self.broker_id,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SubscriptionGroupConfig:
        """Build from RocketMQ's camelCase JSON; absent fields take their defaults.

        Raises ``ValueError`` for a field of the wrong type; unknown keys (the Java
        broker's ``groupRetryPolicy``, ``attributes``, ...) are ignored.
        """
        return cls(
            group_name=json_str(obj, "groupName"),
            consume_enable=json_bool(obj, "consumeEnable", True),
            consume_from_min_enable=json_bool(obj, "consumeFromMinEnable", True),
            consume_broadcast_enable=json_bool(obj, "consumeBroadcastEnable", True),
            retry_queue_nums=json_int(obj, "retryQueueNums", 1),
            retry_max_times=json_int(obj, "retryMaxTimes", 16),
            broker_id=json_int(obj, "brokerId", MASTER_ID),
            which_broker_when_consume_slowly=json_int(obj, "whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=json_bool(obj, "notifyConsumerIdsChangedEnable", True),
            consume_message_orderly=json_bool(obj, "consumeMessageOrderly", False),
        )
