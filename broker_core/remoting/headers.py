"""Request and response headers (``extFields``), declared once for the broker and the clients.

Each header is a dataclass with its RocketMQ field names (the ``*RequestHeader`` /
``*ResponseHeader`` classes of ``org.apache.rocketmq.common.protocol.header``):
``from_fields()`` reads it from a command's ``ext_fields`` and ``to_fields()`` writes it
back.  The broker's processors parse requests and build responses with them; the clients
(``broker_core.client.requests``) build requests and parse responses with them, so a
field is named, defaulted and converted in one place.

Field values arrive as strings whatever their type (the C++ client writes some numbers as
JSON numbers; the frame codec hands every value over as a string).  Booleans are written
``true``/``false`` by Java and ``1``/``0`` by the C++ client; ``header_bool`` accepts both.
Reading is lenient where the Java broker is (an absent number takes its default); a
number that does not parse raises ``ValueError``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

# ``consumerGroup``: the request field that names the consumer group in every consumer
# request (pull, offsets, consumer list, consume stats, connections...).
CONSUMER_GROUP: Final = "consumerGroup"


def header_bool(value: str | None) -> bool:
    """``"true"``/``"1"`` (any case, spaces ignored) -> True; anything else -> False."""
    return (value or "").strip().lower() in ("true", "1")


def header_bool_for(value: bool, language: str) -> str:
    """A boolean as the receiving client reads it: ``1``/``0`` for C++, ``true``/``false`` otherwise."""
    if language == "CPP":
        return "1" if value else "0"
    return "true" if value else "false"


def _int(fields: Mapping[str, str], name: str, default: int) -> int:
    """The field as an int; ``default`` when absent or empty."""
    return int(fields.get(name) or default)


# -- PULL_MESSAGE (11) ---------------------------------------------------------------------


class PullSysFlag(enum.IntFlag):
    """The ``sysFlag`` bits of a pull (RocketMQ ``PullSysFlag``)."""

    COMMIT_OFFSET = 0x1  # commit ``commitOffset`` for the group before reading
    SUSPEND = 0x2  # hold the pull (long polling) when nothing is there yet
    SUBSCRIPTION = 0x4  # the request carries its tag expression in ``subscription``
    CLASS_FILTER = 0x8  # filter classes (never used by Quiver)


DEFAULT_PULL_BATCH: Final = 32  # maxMsgNums when the request has none
DEFAULT_SUSPEND_TIMEOUT_MS: Final = 15_000  # suspendTimeoutMillis when the request has none


@dataclass(frozen=True, slots=True)
class PullMessageRequestHeader:
    """PULL_MESSAGE's request (RocketMQ ``PullMessageRequestHeader``).

    ``subscription`` is the tag expression (``*`` when absent); it counts only when
    ``sys_flag`` has ``SUBSCRIPTION``, else the broker uses the group's registered one.
    ``expression_type`` (``TAG``) is written only when set, as the C++ client omits it.
    """

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = DEFAULT_PULL_BATCH
    sys_flag: PullSysFlag = PullSysFlag(0)
    commit_offset: int = 0
    suspend_timeout_millis: int = DEFAULT_SUSPEND_TIMEOUT_MS
    subscription: str = "*"
    sub_version: int = 0
    expression_type: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> PullMessageRequestHeader:
        """Read a pull as the broker does; absent fields take the Java broker's defaults."""
        return cls(
            consumer_group=fields.get(CONSUMER_GROUP, ""),
            topic=fields.get("topic", ""),
            queue_id=_int(fields, "queueId", 0),
            queue_offset=_int(fields, "queueOffset", 0),
            max_msg_nums=_int(fields, "maxMsgNums", DEFAULT_PULL_BATCH),
            sys_flag=PullSysFlag(_int(fields, "sysFlag", 0)),
            commit_offset=_int(fields, "commitOffset", 0),
            suspend_timeout_millis=_int(fields, "suspendTimeoutMillis", DEFAULT_SUSPEND_TIMEOUT_MS),
            subscription=fields.get("subscription") or "*",
            sub_version=_int(fields, "subVersion", 0),
            expression_type=fields.get("expressionType") or None,
        )

    def to_fields(self) -> dict[str, str]:
        fields = {
            CONSUMER_GROUP: self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "queueOffset": str(self.queue_offset),
            "maxMsgNums": str(self.max_msg_nums),
            "sysFlag": str(int(self.sys_flag)),
            "commitOffset": str(self.commit_offset),
            "suspendTimeoutMillis": str(self.suspend_timeout_millis),
            "subscription": self.subscription,
            "subVersion": str(self.sub_version),
        }
        if self.expression_type is not None:
            fields["expressionType"] = self.expression_type
        return fields


@dataclass(frozen=True, slots=True)
class PullMessageResponseHeader:
    """PULL_MESSAGE's response (RocketMQ ``PullMessageResponseHeader``).

    The broker writes all four fields on every answer, refusals included: the C++ client
    reads them whatever the code.  ``next_begin_offset`` is None when a broker left it
    out (a refusal from another implementation); each caller decides what that means.
    """

    next_begin_offset: int | None
    min_offset: int = 0
    max_offset: int = 0
    suggest_which_broker_id: int = 0

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> PullMessageResponseHeader:
        nxt = fields.get("nextBeginOffset")
        return cls(
            next_begin_offset=int(nxt) if nxt else None,
            min_offset=_int(fields, "minOffset", 0),
            max_offset=_int(fields, "maxOffset", 0),
            suggest_which_broker_id=_int(fields, "suggestWhichBrokerId", 0),
        )

    def next_offset_or(self, default: int) -> int:
        """``next_begin_offset``, or ``default`` (where the pull began) when it was left out."""
        return default if self.next_begin_offset is None else self.next_begin_offset

    def to_fields(self) -> dict[str, str]:
        return {
            "suggestWhichBrokerId": str(self.suggest_which_broker_id),
            "nextBeginOffset": str(self.next_begin_offset if self.next_begin_offset is not None else 0),
            "minOffset": str(self.min_offset),
            "maxOffset": str(self.max_offset),
        }


# -- GET_CONSUMER_LIST_BY_GROUP (38) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GetConsumerListByGroupRequestHeader:
    """GET_CONSUMER_LIST_BY_GROUP's request; the answer's body is ``{"consumerIdList": [...]}``."""

    consumer_group: str

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> GetConsumerListByGroupRequestHeader:
        return cls(fields.get(CONSUMER_GROUP, ""))

    def to_fields(self) -> dict[str, str]:
        return {CONSUMER_GROUP: self.consumer_group}


# -- QUERY_CONSUMER_OFFSET (14) and UPDATE_CONSUMER_OFFSET (15) ----------------------------


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetRequestHeader:
    """QUERY_CONSUMER_OFFSET's request: the group's committed offset of one queue."""

    consumer_group: str
    topic: str
    queue_id: int

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> QueryConsumerOffsetRequestHeader:
        return cls(fields.get(CONSUMER_GROUP, ""), fields.get("topic", ""), _int(fields, "queueId", 0))

    def to_fields(self) -> dict[str, str]:
        return {CONSUMER_GROUP: self.consumer_group, "topic": self.topic, "queueId": str(self.queue_id)}


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetResponseHeader:
    """QUERY_CONSUMER_OFFSET's answer (-1 when the field is absent: no offset)."""

    offset: int

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> QueryConsumerOffsetResponseHeader:
        return cls(_int(fields, "offset", -1))

    def to_fields(self) -> dict[str, str]:
        return {"offset": str(self.offset)}


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetRequestHeader:
    """UPDATE_CONSUMER_OFFSET's request: commit ``commit_offset`` for the group on one queue."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> UpdateConsumerOffsetRequestHeader:
        return cls(
            fields.get(CONSUMER_GROUP, ""),
            fields.get("topic", ""),
            _int(fields, "queueId", 0),
            _int(fields, "commitOffset", 0),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            CONSUMER_GROUP: self.consumer_group,
            "topic": self.topic,
            "queueId": str(self.queue_id),
            "commitOffset": str(self.commit_offset),
        }
