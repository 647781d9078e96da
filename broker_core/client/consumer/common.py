"""What every consumer of this package shares: the group's settings and its subscriptions.

The push consumer (``push``), the pull consumer (``pull``: queues and offsets) and the
subscribe-and-poll consumer (``litepull``) describe themselves to the brokers alike: a
heartbeat's ``consumerDataSet`` entry (RocketMQ's ``ConsumerData``) names the group, how
it consumes (CONSUME_PASSIVELY: push; CONSUME_ACTIVELY: pull), its ``MessageModel``, its
``ConsumeFromWhere`` and a ``SubscriptionData`` per subscribed topic.  Each of those
facts is written here once.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from broker_core.model.hashcode import tags_code
from broker_core.model.message import MessageExt
from broker_core.tags import SUB_ALL, parse_tags


class MessageModel(enum.StrEnum):
    """Whether a group shares its queues (CLUSTERING) or every consumer reads all (BROADCASTING).

    String-valued, so the consumers take these or their names alike."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.StrEnum):
    """Where a queue with no committed offset starts (string-valued, like ``MessageModel``).

    The rules are ``assignment.start_offset``'s.
    """

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ConsumeType(enum.StrEnum):
    """How a consumer gets its messages, as its heartbeat says (RocketMQ ``ConsumeType``)."""

    CONSUME_ACTIVELY = "CONSUME_ACTIVELY"  # pull: the application asks
    CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push: a listener is called


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A topic and its tag expression, as heartbeats and pulls carry it."""

    topic: str
    expression: str
    tags: frozenset[str] | None  # None: every tag
    version: int

    @classmethod
    def of(cls, topic: str, expression: str | None) -> SubscriptionData:
        """``expression`` parsed ("TagA || TagB"; empty or None is every tag, "*"), versioned now."""
        expression = (expression or "").strip() or SUB_ALL
        return cls(topic, expression, parse_tags(expression), time.time_ns() // 1_000_000)

    def matches(self, msg: MessageExt) -> bool:
        """The client-side filter: the message's tag is one of ours (by string)."""
        return self.tags is None or (msg.tags is not None and msg.tags in self.tags)

    def to_json(self) -> dict[str, Any]:
        """A heartbeat's subscriptionData entry (Java's field names; empty sets omitted)."""
        data: dict[str, Any] = {
            "classFilterMode": False,
            "expressionType": "TAG",
            "subString": self.expression,
            "subVersion": self.version,
            "topic": self.topic,
        }
        if self.tags:
            ordered = sorted(self.tags)
            data["tagsSet"] = ordered
            data["codeSet"] = [tags_code(t) for t in ordered]
        return data


def consumer_data(
    group: str,
    consume_type: ConsumeType,
    message_model: str,
    consume_from_where: str,
    subscriptions: Iterable[SubscriptionData],
) -> dict[str, Any]:
    """A consumer's entry in a heartbeat's ``consumerDataSet`` (RocketMQ ``ConsumerData``).

    ``subscriptionDataSet`` is left out when there is no subscription (a pull consumer
    that only pulls by queue and offset).
    """
    data: dict[str, Any] = {
        "consumeFromWhere": str(consume_from_where),
        "consumeType": consume_type.value,
        "groupName": group,
        "messageModel": str(message_model),
        "unitMode": False,
    }
    subscription_set = [s.to_json() for s in subscriptions]
    if subscription_set:
        data["subscriptionDataSet"] = subscription_set
    return data
