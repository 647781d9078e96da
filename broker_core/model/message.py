"""The commit-log record: RocketMQ's stored message format, byte for byte.

A pull response carries these records as they are, and the official clients decode them,
so the layout is fixed (big-endian; sizes for IPv4 hosts, IPv6 hosts take 20 bytes)::

    off  size  field
      0     4  TOTALSIZE                 whole record length
      4     4  MAGICCODE                 0xDAA320A7 (blank end-of-file marker: 0xCBD43194)
      8     4  BODYCRC                   CRC32 (IEEE, as zlib.crc32) of the stored body & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG                      the producer's flag
     20     8  QUEUEOFFSET               index in the consume queue
     28     8  PHYSICALOFFSET            commit-log offset of this record
     36     4  SYSFLAG                   compressed, multi-tags, transaction type, v6 hosts
     40     8  BORNTIMESTAMP             ms
     48   8/20 BORNHOST                  ip (4 or 16) + port int32
     56     8  STORETIMESTAMP            ms
     64   8/20 STOREHOSTADDRESS          ip + port: the broker's client-facing address
     72     4  RECONSUMETIMES
     76     8  PREPARED TRANSACTION OFFSET
     84   4+B  BODYLENGTH, BODY
   88+B   1+T  TOPICLENGTH (one byte), TOPIC
  89+B+T  2+P  PROPERTIESLENGTH (int16), PROPERTIES   name\\x01value\\x02 ...

    total (IPv4) = 91 + B + T + P

The offset msgId is the store host plus the physical offset, as 32 upper-case hex chars.
This module owns the format: everything else encodes and decodes records through it.
"""

from __future__ import annotations

import functools
import mmap
import socket
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from broker_core.errors import MessageIllegalError

try:  # ISA-L's SIMD CRC32: the same IEEE CRC as zlib.crc32, ~6x faster on 1 KiB bodies
    from isal.isal_zlib import crc32 as crc32
except ImportError:  # pragma: no cover - isal has wheels for the platforms we run on
    from zlib import crc32 as crc32
from broker_core.model.hashcode import tags_code as _tags_code
from broker_core.speedups import compiled

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194
# Smallest possible record (IPv4, empty body, one-character topic, no properties).
MIN_RECORD_SIZE = 92
MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767

# sysFlag bits (RocketMQ MessageSysFlag).
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20

# Property names (RocketMQ MessageConst).
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
# Timer messages (RocketMQ 5): when to deliver, as an absolute epoch ms or a delay from the
# store time; a delay level, when a message has one too, wins (RocketMQ drops these then).
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
# Aliyun ONS / ali-ons ``setStartDeliverTime``: absolute epoch ms, like TIMER_DELIVER_MS.
PROPERTY_START_DELIVER_TIME = "__STARTDELIVERTIME"
# RocketMQ 5: a FIFO message's message group (the v5 clients' ``message_group``).
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
# Set on a message one broker forwards to another.
PROPERTY_TRANSFER_FLAG = "TRANSFER_FLAG"
# Set by the broker: the due time it resolved (epoch ms), when the timer took the message
# in and when it delivered it.  A message with TIMER_OUT_MS is never held again.
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
# What a producer sets to make a message a timer message, in the order they are read.
TIMER_PROPERTIES = (
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_START_DELIVER_TIME,
)
# Quiver: on a message the timer delivered, the rmq_sys_wheel_timer queue offset of the
# entry it delivers; recovery reads it to resume exactly once.
PROPERTY_TIMER_OFFSET = "TIMER_OFFSET"

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# Header up to BODYLENGTH for IPv4 born and store hosts (88 bytes).
_HEADER_V4 = struct.Struct(">iIiiiqqiq8sq8siqi")
_QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
_BLANK = struct.Struct(">iI")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_LONG = struct.Struct(">q")
_MSG_ID = struct.Struct(">4siq")


@functools.lru_cache(maxsize=4096)
def encode_host(host: str | tuple[str, int]) -> bytes:
    """``"ip:port"`` (or ``(ip, port)``) -> 8 bytes (IPv4) or 20 bytes (IPv6).

    Cached: a broker sees the same few producer addresses over and over.
    """
    if isinstance(host, str):
        ip, _, port_text = host.rpartition(":")
        ip = ip.strip("[]")
        port = int(port_text)
    else:
        ip, port = host
    try:
        return socket.inet_pton(socket.AF_INET, ip) + _INT.pack(port)
    except OSError:
        return socket.inet_pton(socket.AF_INET6, ip) + _INT.pack(port)


def decode_host(raw: bytes) -> str:
    """Inverse of ``encode_host``: 8 or 20 bytes -> ``"ip:port"``."""
    family = socket.AF_INET if len(raw) == 8 else socket.AF_INET6
    ip = socket.inet_ntop(family, raw[:-4])
    port = _INT.unpack(raw[-4:])[0]
    return f"{ip}:{port}" if family == socket.AF_INET else f"[{ip}]:{port}"


def encode_properties(properties: Mapping[str, str]) -> bytes:
    """Encode properties as ``name\\x01value\\x02`` pairs (trailing separator included).

    Raises MessageIllegalError when a name or value contains a separator character or the
    result does not fit the record's 2-byte length field.
    """
    if not properties:
        return b""
    text = "".join([f"{name}\x01{value}\x02" for name, value in properties.items()])
    # One separator of each kind per pair means no name or value holds one (the common
    # case, checked in two C calls); otherwise the loop below finds the culprit.
    pairs = len(properties)
    if (
        text.count(NAME_VALUE_SEPARATOR) == pairs
        and text.count(PROPERTY_SEPARATOR) == pairs
        and "" not in properties
    ):
        raw = text.encode("utf-8")
        if len(raw) > MAX_PROPERTIES_BYTES:
            raise MessageIllegalError(
                f"message properties are {len(raw)} bytes encoded; the format allows {MAX_PROPERTIES_BYTES}"
            )
        return raw
    parts = []
    for name, value in properties.items():
        name = str(name)
        value = str(value)
        if not name:
            raise MessageIllegalError("a message property has an empty name")
        for text in (name, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise MessageIllegalError(
                    f"message property {name!r} contains a reserved separator character (\\x01 or \\x02)"
                )
        parts.append(f"{name}\x01{value}\x02")
    raw = "".join(parts).encode("utf-8")
    if len(raw) > MAX_PROPERTIES_BYTES:
        raise MessageIllegalError(
            f"message properties are {len(raw)} bytes encoded; the format allows {MAX_PROPERTIES_BYTES}"
        )
    return raw


def decode_properties(raw: bytes | str) -> dict[str, str]:
    """Decode ``name\\x01value\\x02`` pairs; pairs without exactly one separator are skipped."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes | bytearray | memoryview) else raw
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name and NAME_VALUE_SEPARATOR not in value:
            result[name] = value
    return result


def body_crc(body: bytes) -> int:
    """BODYCRC as RocketMQ computes it: CRC32 of the stored body, made non-negative."""
    return crc32(body) & 0x7FFFFFFF


def create_message_id(store_host: bytes, physical_offset: int) -> str:
    """Offset msgId: store host (encoded, 8 or 20 bytes) + physical offset, upper-case hex."""
    return (store_host + _LONG.pack(physical_offset)).hex().upper()


def decode_message_id(msg_id: str) -> tuple[str, int]:
    """Offset msgId -> (store host ``"ip:port"``, physical offset).

    Raises MessageIllegalError for anything but a 32- or 56-hex-character id.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageIllegalError(f"msgId {msg_id!r} is not hexadecimal") from exc
    if len(raw) not in (16, 28):
        raise MessageIllegalError(f"msgId {msg_id!r} must be 32 (IPv4) or 56 (IPv6) hex characters")
    return decode_host(raw[:-8]), _LONG.unpack(raw[-8:])[0]


class _PropertyAccess:
    """Named access to the reserved properties, for classes with a ``properties`` dict."""

    __slots__ = ()
    properties: dict[str, str]

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)


class MessageInner(_PropertyAccess):
    """A message on its way into the commit log (RocketMQ ``MessageExtBrokerInner``).

    Everything that does not depend on the record's position is computed here, outside
    the commit log's lock: the body CRC, the encoded topic and properties, the tag hash.
    The commit log only fills in the queue offset, physical offset and store time.
    """

    __slots__ = (
        "topic",
        "queue_id",
        "body",
        "flag",
        "properties",
        "sys_flag",
        "born_timestamp",
        "born_host",
        "reconsume_times",
        "prepared_transaction_offset",
        "tags_code",
        "_props_raw",
        "_prepared",
    )

    def __init__(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        properties: Mapping[str, str] | None = None,
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | bytes = "127.0.0.1:0",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        properties_raw: bytes | None = None,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.body = bytes(body)
        self.flag = flag
        self.properties: dict[str, str] = dict(properties) if properties else {}
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host if isinstance(born_host, bytes) else encode_host(born_host)
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.tags_code = _tags_code(self.properties.get(PROPERTY_TAGS))
        # When given the properties exactly as a client sent them, keep those bytes.
        self._props_raw = properties_raw
        self._prepared: tuple[int, int, int, bytes] | None = None

    @property
    def delay_level(self) -> int:
        try:
            return int(self.properties.get(PROPERTY_DELAY_TIME_LEVEL) or 0)
        except ValueError:
            return 0

    def set_property(self, name: str, value: str) -> None:
        self.properties[name] = value
        self._props_raw = None
        self._prepared = None
        if name == PROPERTY_TAGS:
            self.tags_code = _tags_code(value)

    def clear_property(self, name: str) -> None:
        if self.properties.pop(name, None) is not None:
            self._props_raw = None
            self._prepared = None

    def prepare(self, store_host: bytes) -> tuple[int, int, int, bytes]:
        """Everything about the record that does not depend on where it goes.

        Returns ``(total size, body CRC, sysFlag, tail)`` where tail is TOPICLENGTH, TOPIC,
        PROPERTIESLENGTH and PROPERTIES.  Computed once (outside the commit log's lock) and
        cached until the message changes.  Raises MessageIllegalError when the topic or
        properties do not fit the format.
        """
        prepared = self._prepared
        if prepared is not None:
            return prepared
        props_raw = self._props_raw
        if props_raw is None:
            props_raw = encode_properties(self.properties)
        elif len(props_raw) > MAX_PROPERTIES_BYTES:
            raise MessageIllegalError(
                f"message properties are {len(props_raw)} bytes; the format allows {MAX_PROPERTIES_BYTES}"
            )
        born = self.born_host
        sys_flag = self.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        if len(born) == 20:
            sys_flag |= BORNHOST_V6_FLAG
        if len(store_host) == 20:
            sys_flag |= STOREHOST_V6_FLAG
        tail = topic_length_and_bytes(self.topic) + _SHORT.pack(len(props_raw)) + props_raw
        body = self.body
        prepared = (
            72 + len(born) + len(store_host) + len(body) + len(tail),
            crc32(body) & 0x7FFFFFFF,
            sys_flag,
            tail,
        )
        self._prepared = prepared
        return prepared

    def encode(self, store_host: bytes) -> bytearray:
        """Build the record with QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP zeroed.

        Call ``finish_record`` to fill in the rest.  The commit log's fast path writes
        IPv4 records straight into its file with ``pack_header_v4_into`` instead.
        """
        total, crc, sys_flag, tail = self.prepare(store_host)
        born, store, body = self.born_host, store_host, self.body
        record = bytearray(
            struct.pack(
                f">iIiiiqqiq{len(born)}sq{len(store)}siqi",
                total,
                MESSAGE_MAGIC_CODE,
                crc,
                self.queue_id,
                self.flag,
                0,
                0,
                sys_flag,
                self.born_timestamp,
                born,
                0,
                store,
                self.reconsume_times,
                self.prepared_transaction_offset,
                len(body),
            )
        )
        record += body
        record += tail
        return record


# Writes the 88-byte header of an IPv4 record in one call (see the layout above):
# (buffer, pos, total, magic, crc, queue id, flag, queue offset, physical offset, sysFlag,
#  born time, born host, store time, store host, reconsume times, prepared offset, body length)
pack_header_v4_into = _HEADER_V4.pack_into
HEADER_V4_SIZE = _HEADER_V4.size


@functools.lru_cache(maxsize=65536)
def topic_length_and_bytes(topic: str) -> bytes:
    """TOPICLENGTH + TOPIC for ``topic`` (cached: a broker has few topics, many messages)."""
    raw = topic.encode("utf-8")
    if not raw or len(raw) > MAX_TOPIC_BYTES:
        raise MessageIllegalError(f"topic must be 1..{MAX_TOPIC_BYTES} bytes, got {len(raw)}")
    return bytes((len(raw),)) + raw


# One item of a producer's encoded batch (RocketMQ MessageBatch): the item header holds
# TOTALSIZE, MAGICCODE (0), BODYCRC (0), FLAG, BODYLEN; then BODY, PROPLEN (int16), PROPERTIES.
_BATCH_ITEM_HEAD = struct.Struct(">iiiii")
BATCH_ITEM_FRAMING = _BATCH_ITEM_HEAD.size + 2  # item header + PROPLEN


def encode_batch(items: Iterable[tuple[bytes, Mapping[str, str] | bytes, int]]) -> bytes:
    """Encode (body, properties, flag) items as a producer sends a batch body."""
    out = bytearray()
    for body, props, flag in items:
        raw = props if isinstance(props, bytes) else encode_properties(props)
        out += _BATCH_ITEM_HEAD.pack(20 + len(body) + 2 + len(raw), 0, 0, flag, len(body))
        out += body
        out += _SHORT.pack(len(raw))
        out += raw
    return bytes(out)


def decode_batch(encoded: bytes, max_body: int) -> list[tuple[int, int, int, int]]:
    """Split an encoded batch into (item offset, body length, properties length, flag).

    Raises MessageIllegalError naming the first malformed item.  (The C version,
    ``_speedups.batch_items``, must agree with this one.)
    """
    items = []
    at = index = 0
    while at < len(encoded):
        if len(encoded) - at < 22:
            raise MessageIllegalError(
                f"batch item {index} at byte {at} is truncated ({len(encoded) - at} bytes left)"
            )
        total, _magic, _crc, flag, body_len = _BATCH_ITEM_HEAD.unpack_from(encoded, at)
        if body_len < 0 or total < 22 or total > len(encoded) - at or body_len > total - 22:
            raise MessageIllegalError(
                f"batch item {index} at byte {at} has inconsistent sizes (total {total}, body {body_len})"
            )
        props_len = int.from_bytes(encoded[at + 20 + body_len : at + 22 + body_len], "big")
        if props_len > MAX_PROPERTIES_BYTES or 22 + body_len + props_len != total:
            raise MessageIllegalError(
                f"batch item {index} at byte {at}: properties length {props_len} "
                f"does not fit its size {total}"
            )
        if body_len == 0:
            raise MessageIllegalError(f"batch item {index} has an empty body")
        if body_len > max_body:
            raise MessageIllegalError(
                f"batch item {index} body is {body_len} bytes; maxMessageSize is {max_body}"
            )
        items.append((at, body_len, props_len, flag))
        at += total
        index += 1
    return items


class MessageBatchInner:
    """A batch as a producer sends it: items encoded back to back, for one topic and queue.

    The commit log stores each item as its own record, with consecutive queue offsets,
    straight from the encoded bytes (RocketMQ ``MessageExtBatch``).  Batches carry no
    delay levels or transactions (RocketMQ refuses both for batches).
    """

    __slots__ = ("topic", "queue_id", "encoded", "sys_flag", "born_timestamp", "born_host", "properties")

    def __init__(
        self,
        topic: str,
        queue_id: int,
        encoded: bytes,
        *,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | bytes = "127.0.0.1:0",
        properties: Mapping[str, str] | None = None,
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.encoded = bytes(encoded)
        self.sys_flag = sys_flag & ~TRANSACTION_TYPE_MASK
        self.born_timestamp = born_timestamp
        self.born_host = born_host if isinstance(born_host, bytes) else encode_host(born_host)
        # The batch request's own properties (e.g. WAIT); each item has its own as well.
        self.properties: dict[str, str] = dict(properties) if properties else {}

    def messages(self, max_body: int) -> list[MessageInner]:
        """The items as separate messages (the path used without the C speedups)."""
        out = []
        for at, body_len, props_len, flag in decode_batch(self.encoded, max_body):
            body = self.encoded[at + 20 : at + 20 + body_len]
            props_raw = self.encoded[at + 22 + body_len : at + 22 + body_len + props_len]
            out.append(
                MessageInner(
                    self.topic,
                    self.queue_id,
                    body,
                    decode_properties(props_raw),
                    flag=flag,
                    sys_flag=self.sys_flag,
                    born_timestamp=self.born_timestamp,
                    born_host=self.born_host,
                    properties_raw=props_raw,
                )
            )
        return out


class DispatchRun:
    """Dispatch data for the records of one encoded batch (one consume queue, in order)."""

    __slots__ = ("topic", "queue_id", "sys_flag", "count", "cq_entries", "index_items")

    def __init__(
        self,
        topic: str,
        queue_id: int,
        count: int,
        cq_entries: bytes,
        index_items: list[tuple[str, str, int, int]],
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = 0
        self.count = count
        # The records' 20-byte consume-queue entries, packed, in queue order.
        self.cq_entries = cq_entries
        # (topic, key, commit-log offset, store time) for the index, in order.
        self.index_items = index_items


def finish_record(record: bytearray, queue_offset: int, physical_offset: int, store_timestamp: int) -> None:
    """Fill in the position-dependent fields of a record built by ``MessageInner.encode``."""
    _LONG.pack_into(record, _QUEUE_OFFSET_POS, queue_offset)
    _LONG.pack_into(record, PHYSICAL_OFFSET_POS, physical_offset)
    born_len = 20 if _INT.unpack_from(record, 36)[0] & BORNHOST_V6_FLAG else 8
    _LONG.pack_into(record, 48 + born_len, store_timestamp)


def record_properties(record: bytes | bytearray | memoryview) -> dict[str, str]:
    """The properties of one whole record, read straight from its bytes (a pull's filter
    looks at nothing else).  Raises RecordFormatError when the lengths do not fit."""
    if len(record) < MIN_RECORD_SIZE:
        raise RecordFormatError(f"a record of {len(record)} bytes is shorter than any")
    (sys_flag,) = _INT.unpack_from(record, 36)
    cursor = 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8 + (20 if sys_flag & STOREHOST_V6_FLAG else 8)
    if cursor + 16 > len(record):
        raise RecordFormatError(f"the {len(record)}-byte record is too short for its hosts")
    (body_len,) = _INT.unpack_from(record, cursor + 12)
    cursor += 16 + body_len
    if body_len < 0 or cursor + 3 > len(record):
        raise RecordFormatError(f"body length {body_len} overruns the {len(record)}-byte record")
    cursor += 1 + record[cursor]
    if cursor + 2 > len(record):
        raise RecordFormatError("the topic length overruns the record")
    (props_len,) = _SHORT.unpack_from(record, cursor)
    cursor += 2
    if props_len < 0 or cursor + props_len > len(record):
        raise RecordFormatError(f"properties length {props_len} overruns the record")
    return decode_properties(bytes(record[cursor : cursor + props_len]))


def store_timestamp_pos(sys_flag: int) -> int:
    """Byte position of STORETIMESTAMP in a record with this sysFlag."""
    return 56 if not sys_flag & BORNHOST_V6_FLAG else 68


@dataclass(slots=True)
class MessageExt(_PropertyAccess):
    """A decoded record (RocketMQ ``MessageExt``)."""

    store_size: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties: dict[str, str] = field(default_factory=dict)
    msg_id: str = ""

    @property
    def body_crc_ok(self) -> bool:
        return body_crc(self.body) == self.body_crc

    def uncompressed_body(self) -> bytes:
        """The body as the producer gave it (inflated when the COMPRESSED flag is set)."""
        if self.sys_flag & COMPRESSED_FLAG:
            return zlib.decompress(self.body)
        return self.body


class RecordFormatError(ValueError):
    """Bytes that were expected to hold a record do not."""


def py_decode_record(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, with_body: bool = True
) -> MessageExt:
    """Decode the record at ``buf[pos:]``.  Raises RecordFormatError on bad magic or size.

    The reference decoder: ``decode_record`` is ``_speedups.decode_records`` when the C
    extension was built, and must agree with this one field for field and error for error.
    """
    view = memoryview(buf)
    if len(view) - pos < MIN_RECORD_SIZE:
        raise RecordFormatError(f"only {len(view) - pos} bytes left at {pos}: too short for a record")
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = struct.unpack_from(
        ">iIiiiqqiq", view, pos
    )
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordFormatError(f"bad magic code 0x{magic:08X} at {pos}")
    if total < MIN_RECORD_SIZE or pos + total > len(view):
        raise RecordFormatError(f"record size {total} at {pos} does not fit the {len(view) - pos} bytes left")
    cursor = pos + 48
    born_len = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store_len = 20 if sys_flag & STOREHOST_V6_FLAG else 8
    if 48 + born_len + 8 + store_len + 16 + 3 > total:  # IPv6 hosts make the fixed part longer
        raise RecordFormatError(f"record size {total} at {pos} is too short for its fixed fields")
    born_host = decode_host(bytes(view[cursor : cursor + born_len]))
    cursor += born_len
    (store_ts,) = _LONG.unpack_from(view, cursor)
    cursor += 8
    store_raw = bytes(view[cursor : cursor + store_len])
    cursor += store_len
    reconsume, prepared, body_len = struct.unpack_from(">iqi", view, cursor)
    cursor += 16
    end = pos + total
    if body_len < 0 or cursor + body_len + 3 > end:
        raise RecordFormatError(f"body length {body_len} at {pos} overruns the record")
    body = bytes(view[cursor : cursor + body_len]) if with_body else b""
    cursor += body_len
    topic_len = view[cursor]
    cursor += 1
    topic = bytes(view[cursor : cursor + topic_len]).decode("utf-8", errors="replace")
    cursor += topic_len
    if cursor + 2 > end:
        raise RecordFormatError(f"topic length {topic_len} at {pos} overruns the record")
    (props_len,) = _SHORT.unpack_from(view, cursor)
    cursor += 2
    if props_len < 0 or cursor + props_len != end:
        raise RecordFormatError(f"properties length {props_len} at {pos} does not end the record")
    properties = decode_properties(bytes(view[cursor : cursor + props_len]))
    return MessageExt(
        store_size=total,
        body_crc=crc,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        commit_log_offset=phys,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=born_host,
        store_timestamp=store_ts,
        store_host=decode_host(store_raw),
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
        body=body,
        topic=topic,
        properties=properties,
        msg_id=create_message_id(store_raw, phys),
    )


def py_iter_records(buf: bytes | bytearray | memoryview) -> Iterator[MessageExt]:
    """Decode records laid back to back (a FOUND pull body): the reference for ``iter_records``."""
    pos = 0
    while pos < len(buf):
        msg = py_decode_record(buf, pos)
        yield msg
        pos += msg.store_size


class _RecordDecoder(Protocol):
    """``_speedups.decode_records`` as this module calls it: into MessageExt instances."""

    def __call__(
        self,
        buf: bytes | bytearray | memoryview,
        cls: type[MessageExt],
        with_body: bool = ...,
        pos: int = ...,
        max_count: int = ...,
        /,
    ) -> tuple[list[MessageExt], tuple[int, str] | None]: ...


# The C decoder (~15x faster): records, errors and messages as py_decode_record's.  None on
# machines without a compiler, where the reference versions below are used instead.
_c_decode_records: _RecordDecoder | None
if compiled is None:  # no compiler here, or QUIVER_PURE_PYTHON (broker_core.speedups)
    _c_decode_records = None
    decode_record = py_decode_record
    iter_records = py_iter_records
else:
    _decode_records_in_c: _RecordDecoder = compiled.decode_records
    _c_decode_records = _decode_records_in_c

    def _c_decode_record(
        buf: bytes | bytearray | memoryview, pos: int = 0, *, with_body: bool = True
    ) -> MessageExt:
        """Decode the record at ``buf[pos:]``.  Raises RecordFormatError on bad magic or size."""
        if pos >= 0:
            records, error = _decode_records_in_c(buf, MessageExt, with_body, pos, 1)
            if records:
                return records[0]
            if error is not None:
                raise RecordFormatError(error[1])
        # Nothing left at pos, or a negative pos: the reference says what is wrong.
        return py_decode_record(buf, pos, with_body=with_body)

    def _c_iter_records(buf: bytes | bytearray | memoryview) -> Iterator[MessageExt]:
        """Decode records laid back to back (a FOUND pull body)."""
        records, error = _decode_records_in_c(buf, MessageExt)
        yield from records
        if error is not None:
            raise RecordFormatError(error[1])

    decode_record = _c_decode_record
    iter_records = _c_iter_records


@dataclass(slots=True)
class DispatchRequest:
    """What the dispatcher needs from one record to update consume queues and the index."""

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str | None
    uniq_key: str | None
    sys_flag: int
    properties: dict[str, str]


# Outcome of ``check_record`` when it does not find a record.
BLANK = 0  # end-of-file blank: skip to the next segment
END = -1  # no valid record here: this is the end of the log


def check_record(
    buf: bytes | bytearray | memoryview | mmap.mmap, pos: int, limit: int
) -> tuple[int, DispatchRequest | None]:
    """Validate the record at ``pos`` (magic, sizes, body CRC) for recovery.

    Returns ``(size, request)`` for a valid record, ``(BLANK, None)`` for the blank marker
    at the end of a segment and ``(END, None)`` for anything else (zeros, a torn or
    corrupt record).  ``limit`` is where the segment's bytes end.
    """
    if limit - pos < 8:
        return END, None
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        return (BLANK, None) if total == limit - pos else (END, None)
    if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD_SIZE or pos + total > limit:
        return END, None
    try:
        msg = decode_record(memoryview(buf)[pos : pos + total])
    except (RecordFormatError, UnicodeDecodeError, OSError, ValueError):
        return END, None
    if not msg.body_crc_ok:
        return END, None
    return total, dispatch_request_of(msg)


def dispatch_request_of(msg: MessageExt) -> DispatchRequest:
    return DispatchRequest(
        topic=msg.topic,
        queue_id=msg.queue_id,
        commit_log_offset=msg.commit_log_offset,
        msg_size=msg.store_size,
        tags_code=_tags_code(msg.properties.get(PROPERTY_TAGS)),
        store_timestamp=msg.store_timestamp,
        queue_offset=msg.queue_offset,
        keys=msg.properties.get(PROPERTY_KEYS),
        uniq_key=msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        sys_flag=msg.sys_flag,
        properties=msg.properties,
    )


def blank_marker(remaining: int) -> bytes:
    """The 8-byte end-of-file blank that closes a segment's unused tail."""
    return _BLANK.pack(remaining, BLANK_MAGIC_CODE)
