"""SEND_MESSAGE and PULL_MESSAGE frames as the C++ client sends them, built once and filled.

The load generator and the echo server share these: the workload's constants (topic,
queues, 1 KiB bodies, batches of 32), a frame template encoded once by
``broker_core.remoting.command.encode`` whose fixed-width slots are replaced per request,
and the walk over a pull body's records.
"""

from __future__ import annotations

import struct

from broker_core.model.message import encode_batch, encode_properties
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand, encode

TOPIC = "BenchTopic"
E2E_TOPIC = "BenchE2E"
QUEUES = 8
BODY_BYTES = 1024
BATCH = 32
PRODUCER_GROUP = "BenchProducer"
CONSUMER_GROUP = "BenchConsumer"
PULL_BATCH = 32
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

# Fixed-width stand-ins in a frame encoded once by the codec, replaced per request.
OPAQUE_SLOT = b"1234567890"  # 10 digits: opaques run 1_000_000_000 + n (< 2**31)
BORN_SLOT = b"9876543210123"  # 13 digits: a wall-clock ms timestamp
UNIQ_SLOT = b"FEDCBA9876543210"  # 16 hex digits: the UNIQ_KEY's counter half
STAMP_SLOT = b"\xfa\xce\xb0\x0c\xfa\xce\xb0\x0c"  # the body's first 8 bytes: send time, ns
OPAQUE_BASE = 1_000_000_000


class FrameTemplate:
    """A frame encoded once by ``broker_core.remoting.command.encode``, with slots to fill.

    Each slot is a placeholder that occurs exactly once in the encoded frame; ``fill``
    returns the frame with each placeholder replaced by a value of the same width, so a
    request costs one join instead of a header encode.
    """

    def __init__(self, frame: bytes, slots: list[bytes]) -> None:
        found = []
        for index, slot in enumerate(slots):
            if frame.count(slot) != 1:
                raise ValueError(f"slot {slot!r} occurs {frame.count(slot)} times in the template")
            found.append((frame.index(slot), index, len(slot)))
        found.sort()
        self._order = [index for _, index, _ in found]
        self._pieces: list[bytes] = []
        at = 0
        for pos, _, width in found:
            self._pieces.append(frame[at:pos])
            at = pos + width
        self._tail = frame[at:]
        self._widths = [width for _, _, width in found]

    def fill(self, values: list[bytes]) -> bytes:
        """The frame with slot ``i`` replaced by ``values[i]`` (same width as the slot)."""
        parts: list[bytes] = []
        for piece, index, width in zip(self._pieces, self._order, self._widths, strict=True):
            value = values[index]
            if len(value) != width:
                raise ValueError(f"slot value {value!r} is not {width} bytes")
            parts.append(piece)
            parts.append(value)
        parts.append(self._tail)
        return b"".join(parts)


def send_properties(uniq_tail: bytes) -> bytes:
    """A message's properties as the official client sends them (tag, UNIQ_KEY, WAIT)."""
    return encode_properties(
        {"TAGS": "TagA", "UNIQ_KEY": "0100007F00005BCD" + uniq_tail.decode(), "WAIT": "true"}
    )


def send_template(topic: str, queue_id: int, *, batch: bool, body: bytes) -> FrameTemplate:
    """SEND_MESSAGE (code 10) as the C++ client sends it; batches carry batch=1."""
    fields = {
        "producerGroup": PRODUCER_GROUP,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": BORN_SLOT.decode(),
        "flag": "0",
        "properties": "" if batch else send_properties(UNIQ_SLOT).decode(),
        "reconsumeTimes": "0",
        "unitMode": "0",
        "batch": "1" if batch else "0",
    }
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, body)
    cmd.language = "CPP"
    cmd.opaque = int(OPAQUE_SLOT)
    slots = [OPAQUE_SLOT, BORN_SLOT] + ([] if batch else [UNIQ_SLOT, STAMP_SLOT])
    return FrameTemplate(encode(cmd), slots)


def batch_bodies(count: int, size: int) -> list[bytes]:
    """``count`` distinct batch bodies of ``size`` items each (distinct UNIQ_KEYs)."""
    body = b"q" * BODY_BYTES
    out = []
    for b in range(count):
        items = [(body, send_properties(b"%016X" % (b * size + i)), 0) for i in range(size)]
        out.append(encode_batch(items))  # type: ignore[arg-type]
    return out


def pull_frame(topic: str, queue_id: int, offset: int, opaque: int, *, suspend_ms: int = 0) -> bytes:
    """PULL_MESSAGE (code 11) with its own subscription ("*"), optionally long-polling."""
    sys_flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0)
    fields = {
        "consumerGroup": CONSUMER_GROUP,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(PULL_BATCH),
        "sysFlag": str(sys_flag),
        "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms or 1000),
        "subscription": "*",
        "subVersion": "0",
    }
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
    cmd.language = "CPP"
    cmd.opaque = opaque
    return encode(cmd)


def count_records(body: bytes) -> int:
    """How many records a FOUND pull body holds (walking their TOTALSIZE fields)."""
    count = pos = 0
    size = len(body)
    unpack = struct.Struct(">i").unpack_from
    while pos + 4 <= size:
        (total,) = unpack(body, pos)
        if total <= 0:
            break
        pos += total
        count += 1
    return count
