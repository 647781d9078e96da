"""Topic and group names: RocketMQ's validation rules and its system topics.

A topic is 1..127 characters of ``[%|a-zA-Z0-9_-]`` (RocketMQ ``TopicValidator``): the
record format stores its length in one byte.  Retry and dead-letter topics are derived
from the consumer group: ``%RETRY%<group>`` and ``%DLQ%<group>``.
"""

from __future__ import annotations

import re

from broker_core.errors import MessageIllegalError

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
_VALID_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+")

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
# RocketMQ 5's timer topic (TimerMessageStore.TIMER_TOPIC): timer messages wait here.
TIMER_TOPIC = "rmq_sys_wheel_timer"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

# Consumer groups of RocketMQ's own tools (MixAll): admin reads pull as TOOLS_CONSUMER.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
CID_RMQ_SYS_PREFIX = "CID_RMQ_SYS_"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        SELF_TEST_TOPIC,
        BENCHMARK_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)


def _name_problem(kind: str, name: object, max_length: int) -> str | None:
    if not isinstance(name, str) or not name:
        return f"the {kind} name is empty"
    if len(name) > max_length:
        return f"the {kind} name is longer than {max_length} characters ({len(name)})"
    if not _VALID_CHARS.fullmatch(name):
        return f"the {kind} name {name!r} may only contain letters, digits, '%', '|', '_' and '-'"
    return None


def topic_problem(topic: object) -> str | None:
    """Return why ``topic`` is not a valid topic name, or None when it is valid."""
    return _name_problem("topic", topic, TOPIC_MAX_LENGTH)


def validate_topic(topic: object) -> str:
    """Return ``topic`` if valid, else raise ``MessageIllegalError`` saying why."""
    problem = topic_problem(topic)
    if problem is not None:
        raise MessageIllegalError(problem)
    assert isinstance(topic, str)
    return topic


def group_problem(group: object) -> str | None:
    """Return why ``group`` is not a valid consumer/producer group name, or None."""
    return _name_problem("group", group, GROUP_MAX_LENGTH)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_system_topic(topic: str) -> bool:
    """True for RocketMQ's internal topics (not retry/DLQ, which belong to a group)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)
