"""Messages between RocketMQ 5's protobuf form and the brokers' stored form.

A v2 ``Message`` carries its system properties (tag, keys, message id, group, delivery
time, ...) in ``system_properties`` and the application's in ``user_properties``; a stored
message carries all of them as one property map, under RocketMQ's names.  The mapping:

====================  ======================================
v2 system property    stored property
====================  ======================================
tag                   ``TAGS``
keys                  ``KEYS`` (space-separated)
message_id            ``UNIQ_KEY``
message_group         ``__SHARDINGKEY`` (FIFO)
delivery_timestamp    ``TIMER_DELIVER_MS`` (a timer message)
====================  ======================================

Going out (receive), RocketMQ's other system property names never show up as user
properties, and the body's MD5 (upper-case hex, which both official clients accept) is
sent as its digest.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from broker_core.model.message import (
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)
from broker_core.model.messagetype import (
    DELAY,
    FIFO,
    TRANSACTION,
    message_type_of,
)
from broker_core.proxy.stubs import load

pb, svc, _grpc = load()

# Stored properties that are RocketMQ's own, never an application's (MessageConst's names).
SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "MSG_REGION",
        "TRACE_ON",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "SCHEDULE_OFFSET",  # Quiver's delivery marker before issue 21: still in older stores
        "__SHARDINGKEY",
        "__STARTDELIVERTIME",
        "TIMER_DELIVER_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "TIMER_OUT_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OFFSET",
        "TIMER_DEL_UNIQKEY",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TRACE_CONTEXT",
    }
)

_TYPES = {FIFO: pb.FIFO, DELAY: pb.DELAY, TRANSACTION: pb.TRANSACTION}


class MessageRefused(ValueError):
    """A v2 message the proxy will not store; ``code`` is the v2 status to answer."""

    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


def stored_properties(message: Any) -> dict[str, str]:
    """The property map a v2 ``message`` is stored with."""
    system = message.system_properties
    properties = dict(message.user_properties)
    clash = sorted(SYSTEM_PROPERTIES & properties.keys())
    if clash:
        raise MessageRefused(
            pb.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user properties may not use RocketMQ's own names: {clash}"
        )
    if system.HasField("tag"):
        properties[PROPERTY_TAGS] = system.tag
    if system.keys:
        properties[PROPERTY_KEYS] = " ".join(system.keys)
    properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
    if system.HasField("message_group") and system.message_group:
        properties[PROPERTY_SHARDING_KEY] = system.message_group
    if system.HasField("delivery_timestamp"):
        properties[PROPERTY_TIMER_DELIVER_MS] = str(delivery_millis(system.delivery_timestamp))
    return properties


def stored_body(message: Any) -> bytes:
    """The body to store: inflated when the client sent it GZIP-encoded."""
    body: bytes = message.body
    if message.system_properties.body_encoding == pb.GZIP:
        try:
            return zlib.decompress(body, 31)
        except zlib.error as exc:
            raise MessageRefused(
                pb.MESSAGE_CORRUPTED, f"the body says GZIP but does not inflate: {exc}"
            ) from None
    return body


def status(code: int, message: str = "OK") -> Any:
    """A v2 Status (every RPC's answer carries one)."""
    return pb.Status(code=code, message=message)


def to_millis(stamp: Timestamp) -> int:
    return int(stamp.seconds) * 1000 + int(stamp.nanos) // 1_000_000


# Seconds past this (the year 5138) cannot be a delivery time someone means.
_IMPLAUSIBLE_SECONDS = 10**11


def delivery_millis(stamp: Timestamp) -> int:
    """A message's delivery time in epoch ms.

    ``rocketmq-python-client`` 5.1.2 documents ``Message.delivery_timestamp`` in milliseconds
    but writes that number into the Timestamp's *seconds*; read such a value (thousands of
    years ahead) as the milliseconds it was meant to be, so its timer messages arrive when
    asked rather than being refused as too far ahead.
    """
    if stamp.seconds > _IMPLAUSIBLE_SECONDS:
        return int(stamp.seconds)
    return to_millis(stamp)


def timestamp(millis: int) -> Timestamp:
    return Timestamp(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


def duration(millis: int) -> Duration:
    return Duration(seconds=millis // 1000, nanos=(millis % 1000) * 1_000_000)


def duration_millis(value: Duration) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def v2_message(stored: MessageExt, namespace: str, receipt_handle: str, invisible_ms: int) -> Any:
    """A popped stored message as RocketMQ 5 clients receive it."""
    props = stored.properties
    body = stored.uncompressed_body()
    system = pb.SystemProperties(
        message_id=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or stored.msg_id,
        body_digest=pb.Digest(type=pb.MD5, checksum=hashlib.md5(body).hexdigest().upper()),  # noqa: S324
        body_encoding=pb.IDENTITY,
        message_type=_TYPES.get(message_type_of(props), pb.NORMAL),
        born_timestamp=timestamp(stored.born_timestamp),
        born_host=stored.born_host.split(":")[0],
        store_timestamp=timestamp(stored.store_timestamp),
        store_host=stored.store_host,
        receipt_handle=receipt_handle,
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        invisible_duration=duration(invisible_ms),
        delivery_attempt=stored.reconsume_times + 1,
    )
    if props.get(PROPERTY_TAGS):
        system.tag = props[PROPERTY_TAGS]
    if props.get(PROPERTY_KEYS):
        system.keys.extend(k for k in props[PROPERTY_KEYS].split(" ") if k)
    if props.get(PROPERTY_SHARDING_KEY):
        system.message_group = props[PROPERTY_SHARDING_KEY]
    deliver_at = props.get(PROPERTY_TIMER_DELIVER_MS)
    if deliver_at and deliver_at.isdigit():
        system.delivery_timestamp.CopyFrom(timestamp(int(deliver_at)))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
    return pb.Message(
        topic=pb.Resource(name=stored.topic, resource_namespace=namespace),
        user_properties=user,
        system_properties=system,
        body=body,
    )


# The longest a receive or pull is held at a broker (RocketMQ's proxy: 20 s at most).
MAX_LONG_POLLING_MS = 20_000


def long_polling_ms(request: Any) -> int:
    """How long a ReceiveMessage or PullMessage may be held: its ``long_polling_timeout``,
    at most ``MAX_LONG_POLLING_MS`` (which is also the default)."""
    if not request.HasField("long_polling_timeout"):
        return MAX_LONG_POLLING_MS
    return min(max(duration_millis(request.long_polling_timeout), 0), MAX_LONG_POLLING_MS)


def filter_of(expression: Any) -> tuple[str, str]:
    """A v5 ``FilterExpression`` as a subscription's expression and RocketMQ expression type
    (``TAG``, ``*`` when empty; or ``SQL92``, which the broker evaluates)."""
    if expression.type == pb.SQL:
        return str(expression.expression), "SQL92"
    return str(expression.expression or "*"), "TAG"


def request_filter(request: Any) -> tuple[str, str]:
    """The filter of a ReceiveMessage or PullMessage (every message by tag when it has none)."""
    if not request.HasField("filter_expression"):
        return "*", "TAG"
    return filter_of(request.filter_expression)
