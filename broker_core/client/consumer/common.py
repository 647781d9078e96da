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

from broker_core.errors import ClientError
from broker_core.model.hashcode import tags_code
from broker_core.model.message import MessageExt
from broker_core.sql92 import EXPRESSION_TYPE, Sql92SyntaxError, compile_sql92
from broker_core.tags import SUB_ALL, parse_tags

TAG = "TAG"
"""The ``expressionType`` of a tag subscription."""


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
class MessageSelector:
    """Which messages of a topic a consumer wants (RocketMQ's ``MessageSelector``): by tag
    (``"TagA || TagB"``, ``*``) or by a SQL92 expression over their properties, which the
    broker evaluates (it must run with ``enablePropertyFilter = true``)."""

    expression: str
    expression_type: str = TAG

    @classmethod
    def by_tag(cls, expression: str | None = SUB_ALL) -> MessageSelector:
        return cls((expression or "").strip() or SUB_ALL, TAG)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """A SQL92 selector (``"a > 5 AND b = 'x'"``), checked here: a ClientError says what
        is wrong and where before anything is sent."""
        try:
            compile_sql92(expression)
        except Sql92SyntaxError as exc:
            raise ClientError(f"bad SQL92 selector: {exc}") from None
        return cls(expression, EXPRESSION_TYPE)

    @classmethod
    def of(cls, selector: str | MessageSelector | None) -> MessageSelector:
        """``selector`` as a selector: a string (or None) is a tag expression."""
        return selector if isinstance(selector, MessageSelector) else cls.by_tag(selector)

    @property
    def is_sql92(self) -> bool:
        return self.expression_type == EXPRESSION_TYPE


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A topic and its selector, as heartbeats and pulls carry it."""

    topic: str
    expression: str
    tags: frozenset[str] | None  # None: every tag (or a SQL92 selector)
    version: int
    expression_type: str = TAG

    @classmethod
    def of(cls, topic: str, selector: str | MessageSelector | None) -> SubscriptionData:
        """``selector`` (a tag expression, "TagA || TagB"; empty or None is every tag, "*";
        or a ``MessageSelector``) for ``topic``, versioned now."""
        chosen = MessageSelector.of(selector)
        tags = None if chosen.is_sql92 else parse_tags(chosen.expression)
        version = time.time_ns() // 1_000_000
        return cls(topic, chosen.expression, tags, version, chosen.expression_type)

    @property
    def selector(self) -> MessageSelector:
        return MessageSelector(self.expression, self.expression_type)

    def matches(self, msg: MessageExt) -> bool:
        """The client-side filter: the message's tag is one of ours (by string); a SQL92
        selector was applied by the broker."""
        return self.tags is None or (msg.tags is not None and msg.tags in self.tags)

    def to_json(self) -> dict[str, Any]:
        """A heartbeat's subscriptionData entry (Java's field names; empty sets omitted)."""
        data: dict[str, Any] = {
            "classFilterMode": False,
            "expressionType": self.expression_type,
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
