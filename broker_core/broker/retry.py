"""Where a consumer group's redeliveries go: ``%RETRY%<group>``, and once a message has been
retried the group's maximum, ``%DLQ%<group>``.

Shared by CONSUMER_SEND_MSG_BACK (``processors/sendback.py``), by sends made straight to
``%RETRY%<group>`` (``processors/send.py``: Java's fallback when a send-back fails, and how
its orderly consumer gives a message up) and by heartbeats (``processors/clients.py``),
as RocketMQ's ``createTopicInSendMessageBackMethod`` serves all three.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExt,
    MessageInner,
)
from broker_core.model.topicconfig import PERM_READ, PERM_WRITE, TopicConfig
from broker_core.topics import RETRY_GROUP_TOPIC_PREFIX, dlq_topic

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

# RocketMQ creates retry and DLQ topics readable and writeable (PERM_WRITE alone would
# refuse the console, which reads and resends from the DLQ).
DLQ_PERM = PERM_READ | PERM_WRITE
# A group's DLQ has one queue (RocketMQ ``DLQ_NUMS_PER_GROUP``): messages land in queue 0.
DLQ_NUMS_PER_GROUP = 1


def ensure_send_back_topic(broker: BrokerController, topic: str, queues: int = 1) -> TopicConfig:
    """The config of a retry or DLQ topic, created with ``queues`` queues if missing.

    A new topic is announced to the nameservers at once, so consumers find its route.
    An existing topic keeps its config (an operator may have changed it).
    """
    if broker.topics.ensure(TopicConfig(topic, queues, queues, DLQ_PERM)):
        broker.topics_changed()
    config = broker.topics.get(topic)
    assert config is not None, f"{topic} was just ensured"
    return config


def retry_group_of(topic: str) -> str | None:
    """The group whose retry topic ``topic`` is (``%RETRY%<group>``), or None."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return None


def max_reconsume_times(config: SubscriptionGroupConfig, asked: int | None) -> int:
    """How often a message of the group may be redelivered: what the client asked for
    (Java sends its consumer's maxReconsumeTimes), else the group's ``retryMaxTimes``."""
    return config.retry_max_times if asked is None else asked


def send_back_properties(original: MessageExt) -> dict[str, str]:
    """The properties a redelivered or dead-lettered copy of ``original`` carries, as
    RocketMQ's broker stores them: every property of the original, where it came from
    (RETRY_TOPIC, ORIGIN_MESSAGE_ID: the first copy's offset msgId), ``WAIT=false``, and
    ``DELAY=0`` (no delay; a redelivery's caller sets its level)."""
    props = dict(original.properties)
    props.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    props[PROPERTY_DELAY_TIME_LEVEL] = "0"
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, original.msg_id)
    return props


def dead_letter_copy(
    broker: BrokerController, group: str, original: MessageExt, reconsume_times: int
) -> MessageInner:
    """The copy of ``original`` to store in ``%DLQ%<group>`` (queue 0), the topic created if
    missing."""
    topic = dlq_topic(group)
    ensure_send_back_topic(broker, topic)
    return MessageInner(
        topic,
        0,
        original.body,
        send_back_properties(original),
        flag=original.flag,
        sys_flag=original.sys_flag,
        born_timestamp=original.born_timestamp,
        born_host=original.born_host,
        reconsume_times=reconsume_times,
    )
