"""Message types (RocketMQ 5 ``TopicMessageType``): what kind of message a send carries, what
a topic accepts, and the check that refuses a message of the wrong kind.

A topic's type is its ``message.type`` attribute (``broker_core.model.topicattributes``;
NORMAL when absent).  A message's type is read from its properties, in RocketMQ's order:
TRANSACTION (``TRAN_MSG=true``), DELAY (a delay level or a timer property), FIFO (a message
group, RocketMQ 5's ``__SHARDINGKEY``), else NORMAL.

Where RocketMQ checks: its proxy, for the v5 gRPC clients and the remoting clients it fronts
(``enableTopicMessageTypeCheck``, on by default there); its broker never does.  Quiver's
broker applies the same check when its ``enableTopicMessageTypeCheck`` is set (off by
default, so 4.x clients sending straight to a broker behave as against RocketMQ's broker),
and the gRPC proxy can apply it with ``message_type_refusal`` and advertise a topic's types
with ``accepted_message_types``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_TRANSFER_FLAG,
)
from broker_core.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

UNSPECIFIED: Final = "UNSPECIFIED"
NORMAL: Final = "NORMAL"
FIFO: Final = "FIFO"
DELAY: Final = "DELAY"
TRANSACTION: Final = "TRANSACTION"
MIXED: Final = "MIXED"

# Every value ``message.type`` may hold (RocketMQ's ``topicMessageTypeSet``), in its order.
MESSAGE_TYPES: Final = (UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED)
# The type of a topic without the attribute (RocketMQ ``TopicConfig.getTopicMessageType``).
DEFAULT_MESSAGE_TYPE: Final = NORMAL
# The types a message itself can have (``message_type_of``), and those a MIXED topic takes.
SENDABLE_TYPES: Final = (NORMAL, FIFO, DELAY, TRANSACTION)

_DELAY_PROPERTIES: Final = (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
)


def message_type_of(properties: Mapping[str, str]) -> str:
    """The type of a message with these properties (RocketMQ
    ``TopicMessageType.parseFromMessageProperty``): TRANSACTION, DELAY, FIFO or NORMAL."""
    if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return TRANSACTION
    if any(properties.get(name) is not None for name in _DELAY_PROPERTIES):
        return DELAY
    if properties.get(PROPERTY_SHARDING_KEY) is not None:
        return FIFO
    return NORMAL


def accepted_message_types(topic_type: str) -> tuple[str, ...]:
    """The message types a topic of ``topic_type`` takes, as RocketMQ's proxy lists them in a
    route's ``accept_message_types``: its own type, every sendable type for MIXED, and
    UNSPECIFIED for UNSPECIFIED or a type it does not know."""
    if topic_type == MIXED:
        return SENDABLE_TYPES
    if topic_type in SENDABLE_TYPES:
        return (topic_type,)
    return (UNSPECIFIED,)


def message_type_problem(topic_type: str, message_type: str) -> str | None:
    """Why a ``message_type`` message may not go to a ``topic_type`` topic, in RocketMQ's
    words, or None when it may (``DefaultTopicMessageTypeValidator``): the types must be the
    same, unless the topic is MIXED; an UNSPECIFIED message is never accepted."""
    if message_type == UNSPECIFIED or (message_type != topic_type and topic_type != MIXED):
        return (
            f"TopicMessageType validate failed, the expected type is {topic_type}, "
            f"but actual type is {message_type}"
        )
    return None


def is_checked(topic: str, properties: Mapping[str, str]) -> bool:
    """Whether a send to ``topic`` is checked at all: not to a retry or dead-letter topic,
    not a message one broker forwarded to another (``TRANSFER_FLAG``), as in RocketMQ."""
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        return False
    return PROPERTY_TRANSFER_FLAG not in properties


def message_type_refusal(topic: str, topic_type: str, properties: Mapping[str, str]) -> str | None:
    """The remark refusing a message with ``properties`` sent to ``topic`` (of ``topic_type``),
    or None when it may be sent: ``is_checked`` and then ``message_type_problem``.  The broker
    answers the remark with MESSAGE_ILLEGAL (as RocketMQ's remoting proxy does); a gRPC
    front end answers MESSAGE_PROPERTY_CONFLICT_WITH_TYPE."""
    if not is_checked(topic, properties):
        return None
    return message_type_problem(topic_type, message_type_of(properties))
