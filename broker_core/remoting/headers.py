"""Request and response headers (``extFields``), declared once for the broker and the clients.

Each header is a dataclass with its RocketMQ field names (the ``*RequestHeader`` /
``*ResponseHeader`` classes of ``org.apache.rocketmq.common.protocol.header``):
``from_fields()`` reads it from a command's ``ext_fields`` and ``to_fields()`` writes it
back.  The broker's processors parse requests and build responses with them; the clients
(``broker_core.client.requests``, the producer, the admin client) build requests and
parse responses with them, so a field is named, defaulted and converted in one place.
Headers are frozen, but for SEND_MESSAGE's two (request and response), read and written
once per message on the broker's busiest path.

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
from typing import Final, NamedTuple

# ``consumerGroup``: the request field that names the consumer group in every consumer
# request (pull, offsets, consumer list, consume stats, connections...).
CONSUMER_GROUP: Final = "consumerGroup"
# ``producerGroup``: the field that names the producer group (SEND_MESSAGE, END_TRANSACTION,
# GET_PRODUCER_CONNECTION_LIST, a transaction's check-back).
PRODUCER_GROUP: Final = "producerGroup"


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


# -- SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) ------------------


class _SendKeys(NamedTuple):
    """The field names of a send header, in one of its two spellings."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: str
    queue_id: str
    sys_flag: str
    born_timestamp: str
    flag: str
    properties: str
    reconsume_times: str
    unit_mode: str
    max_reconsume_times: str
    batch: str
    broker_name: str


# RocketMQ ``SendMessageRequestHeader``'s names, and ``SendMessageRequestHeaderV2``'s
# one-letter keys for the same fields (``n``, brokerName, is RocketMQ 5's).
SEND_V1_KEYS: Final = _SendKeys(
    PRODUCER_GROUP,
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "brokerName",
)
SEND_V2_KEYS: Final = _SendKeys("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n")
# The topic's V2 key: a header that has it is spelled V2, whatever its request code (the
# Java client sends SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE so; a V1 header under a V2 code
# reads as V1).
_V2_TOPIC: Final = SEND_V2_KEYS.topic
DEFAULT_TOPIC: Final = "TBW102"  # defaultTopic when the request has none
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4  # defaultTopicQueueNums when the request has none


def _send_int(fields: Mapping[str, str], key: str, name: str, default: int) -> int:
    """The field as an int (``default`` when absent or empty); ``ValueError`` naming it by
    its V1 name ``name`` when it is no number."""
    raw = fields.get(key)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"header field {name} is not a number: {raw!r}") from None


# The booleans clients write (Java ``true``/``false``, C++ ``1``/``0``), read without a call.
_SEND_BOOLS: Final[Mapping[str | None, bool]] = {
    None: False,
    "": False,
    "false": False,
    "true": True,
    "0": False,
    "1": True,
}


def _send_bool(value: str | None) -> bool:
    """``header_bool``, with the spellings clients send looked up first (the send path's hot)."""
    known = _SEND_BOOLS.get(value)
    return header_bool(value) if known is None else known


@dataclass(slots=True)
class SendMessageRequestHeader:
    """A send's request (RocketMQ ``SendMessageRequestHeader`` and its V2 spelling).

    Mutable, unlike the other headers: it is read for every message on the broker's
    busiest path (a frozen dataclass pays an ``object.__setattr__`` per field), and the
    broker redirects it in place (a retry message that goes to the DLQ).

    ``batch`` is the header's own flag (the C++ 1.2.x client sends a batch as SEND_MESSAGE
    with ``batch`` = 1); the request code SEND_BATCH_MESSAGE makes a batch too, which the
    broker adds.  ``max_reconsume_times`` and ``broker_name`` are written only when set.
    """

    producer_group: str
    topic: str
    default_topic: str = DEFAULT_TOPIC
    default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS
    queue_id: int = -1
    sys_flag: int = 0
    born_timestamp: int = 0
    flag: int = 0
    properties: str = ""
    reconsume_times: int = 0
    unit_mode: bool = False
    # Java sends its consumer's maxReconsumeTimes with a message bound for %RETRY%<group>.
    max_reconsume_times: int | None = None
    batch: bool = False
    broker_name: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> SendMessageRequestHeader:
        """Read a send in either spelling; absent or empty fields take their defaults.

        Runs for every message: the numbers are converted in one go, and only when one
        fails are they converted again field by field to name the culprit.

        Raises:
            ValueError: the request names no topic, or a number field is no number (the
                message names it by its V1 name).
        """
        keys = SEND_V2_KEYS if _V2_TOPIC in fields else SEND_V1_KEYS
        (
            k_group,
            k_topic,
            k_default_topic,
            k_queue_nums,
            k_queue_id,
            k_sys_flag,
            k_born,
            k_flag,
            k_properties,
            k_reconsume,
            k_unit_mode,
            k_max_reconsume,
            k_batch,
            k_broker_name,
        ) = keys
        get = fields.get
        topic = get(k_topic)
        if not topic:
            raise ValueError("the send request names no topic")
        max_times = get(k_max_reconsume)
        try:
            queue_nums = int(get(k_queue_nums) or DEFAULT_TOPIC_QUEUE_NUMS)
            queue_id = int(get(k_queue_id) or -1)
            sys_flag = int(get(k_sys_flag) or 0)
            born_timestamp = int(get(k_born) or 0)
            flag = int(get(k_flag) or 0)
            reconsume_times = int(get(k_reconsume) or 0)
            max_reconsume_times = int(max_times) if max_times else None
        except ValueError:
            v1 = SEND_V1_KEYS
            queue_nums = _send_int(
                fields, k_queue_nums, v1.default_topic_queue_nums, DEFAULT_TOPIC_QUEUE_NUMS
            )
            queue_id = _send_int(fields, k_queue_id, v1.queue_id, -1)
            sys_flag = _send_int(fields, k_sys_flag, v1.sys_flag, 0)
            born_timestamp = _send_int(fields, k_born, v1.born_timestamp, 0)
            flag = _send_int(fields, k_flag, v1.flag, 0)
            reconsume_times = _send_int(fields, k_reconsume, v1.reconsume_times, 0)
            max_reconsume_times = (
                _send_int(fields, k_max_reconsume, v1.max_reconsume_times, 0) if max_times else None
            )
        return cls(
            get(k_group, ""),
            topic,
            get(k_default_topic) or DEFAULT_TOPIC,
            queue_nums,
            queue_id,
            sys_flag,
            born_timestamp,
            flag,
            get(k_properties, ""),
            reconsume_times,
            _send_bool(get(k_unit_mode)),
            max_reconsume_times,
            _send_bool(get(k_batch)),
            get(k_broker_name) or None,
        )

    def to_fields(self, language: str = "JAVA") -> dict[str, str]:
        """The V1 spelling (SEND_MESSAGE), booleans as ``language``'s client writes them."""
        return self._fields(SEND_V1_KEYS, language)

    def to_v2_fields(self) -> dict[str, str]:
        """The V2 spelling (SEND_MESSAGE_V2, SEND_BATCH_MESSAGE): the compact header Java
        clients send."""
        return self._fields(SEND_V2_KEYS, "JAVA")

    def _fields(self, keys: _SendKeys, language: str) -> dict[str, str]:
        # Built for every message a client sends: the keys unpacked at once, not looked up.
        (
            k_group,
            k_topic,
            k_default_topic,
            k_queue_nums,
            k_queue_id,
            k_sys_flag,
            k_born,
            k_flag,
            k_properties,
            k_reconsume,
            k_unit_mode,
            k_max_reconsume,
            k_batch,
            k_broker_name,
        ) = keys
        fields = {
            k_group: self.producer_group,
            k_topic: self.topic,
            k_default_topic: self.default_topic,
            k_queue_nums: str(self.default_topic_queue_nums),
            k_queue_id: str(self.queue_id),
            k_sys_flag: str(self.sys_flag),
            k_born: str(self.born_timestamp),
            k_flag: str(self.flag),
            k_properties: self.properties,
            k_reconsume: str(self.reconsume_times),
            k_unit_mode: header_bool_for(self.unit_mode, language),
            k_batch: header_bool_for(self.batch, language),
        }
        if self.max_reconsume_times is not None:
            fields[k_max_reconsume] = str(self.max_reconsume_times)
        if self.broker_name is not None:
            fields[k_broker_name] = self.broker_name
        return fields


# The region a Quiver broker reports (RocketMQ's default).
DEFAULT_REGION: Final = "DefaultRegion"


@dataclass(slots=True)
class SendMessageResponseHeader:
    """A send's answer on success (RocketMQ ``SendMessageResponseHeader``).

    ``msg_id`` is the offset message id (a batch's: one per message, comma-separated).
    The broker writes every field as a string: the C++ client crashes on a SEND success
    without them.  Not frozen, as the request's header: the broker builds one per send.
    Read leniently, as the Java client does: an absent queueId is the queue the message
    was sent to (``queue_id`` is then None), an absent queueOffset -1.
    """

    msg_id: str
    queue_id: int | None
    queue_offset: int
    region_id: str = DEFAULT_REGION
    trace_on: bool = True

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> SendMessageResponseHeader:
        get = fields.get
        queue_id = get("queueId")
        return cls(
            get("msgId", ""),
            int(queue_id) if queue_id is not None else None,
            int(get("queueOffset", -1)),
            get("MSG_REGION", DEFAULT_REGION),
            get("TRACE_ON", "true") != "false",
        )

    def to_fields(self) -> dict[str, str]:
        return {
            "msgId": self.msg_id,
            "queueId": str(self.queue_id if self.queue_id is not None else -1),
            "queueOffset": str(self.queue_offset),
            "MSG_REGION": self.region_id,
            "TRACE_ON": "true" if self.trace_on else "false",
        }


# -- Admin requests about groups: GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST (203),
# -- GET_PRODUCER_CONNECTION_LIST (204), GET_CONSUMER_RUNNING_INFO (307) and
# -- CONSUME_MESSAGE_DIRECTLY (309); the broker relays the last two to the consumer.


@dataclass(frozen=True, slots=True)
class GetConsumeStatsRequestHeader:
    """GET_CONSUME_STATS's request: the group's offsets and lag here; ``topic`` narrows
    them to one topic (None: every topic the group consumes; written only when set)."""

    consumer_group: str
    topic: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> GetConsumeStatsRequestHeader:
        return cls(fields.get(CONSUMER_GROUP, ""), fields.get("topic") or None)

    def to_fields(self) -> dict[str, str]:
        if self.topic is None:
            return {CONSUMER_GROUP: self.consumer_group}
        return {CONSUMER_GROUP: self.consumer_group, "topic": self.topic}


@dataclass(frozen=True, slots=True)
class GetConsumerConnectionListRequestHeader:
    """GET_CONSUMER_CONNECTION_LIST's request: the group's consumers connected here."""

    consumer_group: str

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> GetConsumerConnectionListRequestHeader:
        return cls(fields.get(CONSUMER_GROUP, ""))

    def to_fields(self) -> dict[str, str]:
        return {CONSUMER_GROUP: self.consumer_group}


@dataclass(frozen=True, slots=True)
class GetProducerConnectionListRequestHeader:
    """GET_PRODUCER_CONNECTION_LIST's request: the group's producers connected here."""

    producer_group: str

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> GetProducerConnectionListRequestHeader:
        return cls(fields.get(PRODUCER_GROUP, ""))

    def to_fields(self) -> dict[str, str]:
        return {PRODUCER_GROUP: self.producer_group}


@dataclass(frozen=True, slots=True)
class GetConsumerRunningInfoRequestHeader:
    """GET_CONSUMER_RUNNING_INFO's request: what one consumer says of itself
    (``jstack_enable``: with its threads' stacks, which no Quiver tool asks for)."""

    consumer_group: str
    client_id: str
    jstack_enable: bool = False

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> GetConsumerRunningInfoRequestHeader:
        return cls(
            fields.get(CONSUMER_GROUP, ""),
            fields.get("clientId", ""),
            header_bool(fields.get("jstackEnable")),
        )

    def to_fields(self) -> dict[str, str]:
        return {
            CONSUMER_GROUP: self.consumer_group,
            "clientId": self.client_id,
            "jstackEnable": "true" if self.jstack_enable else "false",
        }


@dataclass(frozen=True, slots=True)
class ConsumeMessageDirectlyRequestHeader:
    """CONSUME_MESSAGE_DIRECTLY's request: have one consumer consume the message ``msg_id``
    (its offset message id) now.  ``broker_name`` is the message's broker, written only
    when set (the broker adds its own when it relays a request without one)."""

    consumer_group: str
    client_id: str
    msg_id: str
    broker_name: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> ConsumeMessageDirectlyRequestHeader:
        return cls(
            fields.get(CONSUMER_GROUP, ""),
            fields.get("clientId", ""),
            fields.get("msgId", ""),
            fields.get("brokerName") or None,
        )

    def to_fields(self) -> dict[str, str]:
        fields = {CONSUMER_GROUP: self.consumer_group, "clientId": self.client_id, "msgId": self.msg_id}
        if self.broker_name is not None:
            fields["brokerName"] = self.broker_name
        return fields


# -- UNREGISTER_CLIENT (35) and NOTIFY_CONSUMER_IDS_CHANGED (40) ---------------------------


@dataclass(frozen=True, slots=True)
class UnregisterClientRequestHeader:
    """UNREGISTER_CLIENT's request: forget one producer or consumer group member of
    ``client_id`` (the client sends one request per group; a group left out is None)."""

    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> UnregisterClientRequestHeader:
        return cls(
            fields.get("clientID", ""),
            fields.get(PRODUCER_GROUP) or None,
            fields.get(CONSUMER_GROUP) or None,
        )

    def to_fields(self) -> dict[str, str]:
        fields = {"clientID": self.client_id}
        if self.producer_group is not None:
            fields[PRODUCER_GROUP] = self.producer_group
        if self.consumer_group is not None:
            fields[CONSUMER_GROUP] = self.consumer_group
        return fields


@dataclass(frozen=True, slots=True)
class NotifyConsumerIdsChangedRequestHeader:
    """NOTIFY_CONSUMER_IDS_CHANGED (broker to client, oneway): the group's members changed,
    rebalance now."""

    consumer_group: str

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> NotifyConsumerIdsChangedRequestHeader:
        return cls(fields.get(CONSUMER_GROUP, ""))

    def to_fields(self) -> dict[str, str]:
        return {CONSUMER_GROUP: self.consumer_group}


# -- END_TRANSACTION (37) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndTransactionRequestHeader:
    """END_TRANSACTION's request: a producer commits or rolls back its half message.

    ``commit_or_rollback`` is the transaction type of the sysFlag (commit 8, rollback 12,
    not yet known 0).  Absent offsets read as -1, as no half message has them.
    ``transaction_id`` and ``broker_name`` are written only when set.
    """

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    from_transaction_check: bool = False
    msg_id: str = ""
    topic: str = ""
    transaction_id: str | None = None
    broker_name: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> EndTransactionRequestHeader:
        return cls(
            fields.get(PRODUCER_GROUP, ""),
            _int(fields, "tranStateTableOffset", -1),
            _int(fields, "commitLogOffset", -1),
            _int(fields, "commitOrRollback", 0),
            header_bool(fields.get("fromTransactionCheck")),
            fields.get("msgId", ""),
            fields.get("topic", ""),
            fields.get("transactionId") or None,
            fields.get("brokerName") or None,
        )

    def to_fields(self) -> dict[str, str]:
        fields = {
            PRODUCER_GROUP: self.producer_group,
            "tranStateTableOffset": str(self.tran_state_table_offset),
            "commitLogOffset": str(self.commit_log_offset),
            "commitOrRollback": str(self.commit_or_rollback),
            "fromTransactionCheck": "true" if self.from_transaction_check else "false",
            "msgId": self.msg_id,
            "topic": self.topic,
        }
        if self.transaction_id is not None:
            fields["transactionId"] = self.transaction_id
        if self.broker_name is not None:
            fields["brokerName"] = self.broker_name
        return fields


# -- CHECK_TRANSACTION_STATE (39) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckTransactionStateRequestHeader:
    """CHECK_TRANSACTION_STATE (broker to producer, oneway): is this half message's local
    transaction decided?  The body is the half message's record.

    ``tran_state_table_offset`` (the half's queue offset) and ``commit_log_offset`` are None
    when absent: the producer then takes them from the record.  ``msg_id`` and
    ``transaction_id`` are the half's unique key, ``offset_msg_id`` its offset message id.
    ``topic`` and ``broker_name`` (RocketMQ 5's) are written only when set; Quiver's broker
    sends neither.
    """

    tran_state_table_offset: int | None
    commit_log_offset: int | None
    msg_id: str = ""
    transaction_id: str = ""
    offset_msg_id: str = ""
    topic: str | None = None
    broker_name: str | None = None

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> CheckTransactionStateRequestHeader:
        table_offset = fields.get("tranStateTableOffset")
        commit_log_offset = fields.get("commitLogOffset")
        return cls(
            int(table_offset) if table_offset else None,
            int(commit_log_offset) if commit_log_offset else None,
            fields.get("msgId", ""),
            fields.get("transactionId", ""),
            fields.get("offsetMsgId", ""),
            fields.get("topic") or None,
            fields.get("brokerName") or None,
        )

    def to_fields(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        if self.tran_state_table_offset is not None:
            fields["tranStateTableOffset"] = str(self.tran_state_table_offset)
        if self.commit_log_offset is not None:
            fields["commitLogOffset"] = str(self.commit_log_offset)
        fields.update(msgId=self.msg_id, transactionId=self.transaction_id, offsetMsgId=self.offset_msg_id)
        if self.topic is not None:
            fields["topic"] = self.topic
        if self.broker_name is not None:
            fields["brokerName"] = self.broker_name
        return fields
