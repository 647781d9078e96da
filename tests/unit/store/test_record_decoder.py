"""The C record decoder (``_speedups.decode_records``) agrees with the pure-Python one.

``decode_record`` and ``iter_records`` use the C decoder when the extension is built;
``py_decode_record`` and ``py_iter_records`` are the reference.  Both must give the same
``MessageExt`` objects for any records, and fail on the same bytes with the same exception
and message, after yielding the same records.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import struct
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_core.model import message
from broker_core.model.message import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    MESSAGE_MAGIC_CODE,
    STOREHOST_V6_FLAG,
    MessageExt,
    MessageInner,
    RecordFormatError,
    create_message_id,
    decode_properties,
    encode_host,
    encode_properties,
    finish_record,
    py_decode_record,
    py_iter_records,
)
from broker_core.speedups import pure_python_requested

speedups = pytest.importorskip("broker_core._speedups")

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Text that encodes to UTF-8 (no lone surrogates), and the same without the separators.
CHARS = st.characters(blacklist_categories=("Cs",))
PROPERTY_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02")


def test_the_c_decoder_is_built_and_in_use() -> None:
    # A silent fallback would leave the tests below comparing the Python decoder with itself.
    if pure_python_requested():
        assert message._c_decode_records is None
        assert message.decode_record is message.py_decode_record
        return
    assert message._c_decode_records is speedups.decode_records
    assert message.decode_record is message._c_decode_record
    assert message.iter_records is message._c_iter_records


# -- building records byte by byte ---------------------------------------------------------


def pack_record(
    *,
    body: bytes = b"body",
    topic: bytes = b"orders",
    props: bytes = b"",
    born: bytes = bytes([10, 0, 0, 9]) + struct.pack(">i", 53412),
    store: bytes = bytes([127, 0, 0, 1]) + struct.pack(">i", 10911),
    sys_flag: int = 0,
    crc: int = 0,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    phys: int = 0,
    born_ts: int = 1_700_000_000_000,
    store_ts: int = 1_700_000_000_001,
    reconsume: int = 0,
    prepared: int = 0,
) -> bytes:
    """A record with any field values, including ones MessageInner would refuse to encode."""
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    sys_flag |= (BORNHOST_V6_FLAG if len(born) == 20 else 0) | (STOREHOST_V6_FLAG if len(store) == 20 else 0)
    tail = bytes([len(topic)]) + topic + struct.pack(">h", len(props)) + props
    total = 72 + len(born) + len(store) + len(body) + len(tail)
    head = struct.pack(
        f">iIiiiqqiq{len(born)}sq{len(store)}siqi",
        total,
        MESSAGE_MAGIC_CODE,
        crc,
        queue_id,
        flag,
        queue_offset,
        phys,
        sys_flag,
        born_ts,
        born,
        store_ts,
        store,
        reconsume,
        prepared,
        len(body),
    )
    return head + body + tail


V6_SPECIALS = [
    ipaddress.IPv6Address(text).packed
    for text in (
        "::",
        "::1",
        "::ffff:10.1.2.3",
        "::10.1.2.3",
        "fe80::1",
        "2001:db8::8:800:200c:417a",
        "1:0:0:1::",
    )
]
ports = INT32 | st.integers(0, 65535)
ipv4_hosts = st.builds(
    lambda ip, port: ip + struct.pack(">i", port), st.binary(min_size=4, max_size=4), ports
)
ipv6_hosts = st.builds(
    lambda ip, port: ip + struct.pack(">i", port),
    st.binary(min_size=16, max_size=16)
    | st.ip_addresses(v=6).map(lambda a: a.packed)
    | st.sampled_from(V6_SPECIALS),
    ports,
)
hosts = ipv4_hosts | ipv6_hosts

# Property bytes as clients write them (empty values included), and anything at all:
# stray separators, pairs without a value or a name, invalid UTF-8, no trailing separator.
PROPERTY_BYTES = b"\x01 \x02 K EYS = \xe2\x82 \xac \xff \xc3\xa9 \xf0".split(b" ") + [b" "]
encoded_properties = st.dictionaries(
    st.text(PROPERTY_CHARS, min_size=1, max_size=12) | st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT"]),
    st.text(PROPERTY_CHARS, max_size=20),
    max_size=6,
).map(encode_properties)
raw_properties = st.lists(st.sampled_from(PROPERTY_BYTES) | st.binary(max_size=6), max_size=40).map(b"".join)
properties = encoded_properties | raw_properties

topics = st.text(CHARS, min_size=1, max_size=40).map(str.encode).filter(lambda t: len(t) <= 127) | st.binary(
    min_size=1, max_size=127
)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    body = draw(st.binary(max_size=2048))
    sys_flag = draw(INT32)
    if draw(st.booleans()):  # a body stored compressed, as the producer sends big ones
        body = zlib.compress(body)
        sys_flag |= COMPRESSED_FLAG
    return pack_record(
        body=body,
        topic=draw(topics),
        props=draw(properties.filter(lambda p: len(p) <= 32767)),
        born=draw(hosts),
        store=draw(hosts),
        sys_flag=sys_flag,
        crc=draw(INT32),
        queue_id=draw(INT32),
        flag=draw(INT32),
        queue_offset=draw(INT64),
        phys=draw(INT64),
        born_ts=draw(INT64),
        store_ts=draw(INT64),
        reconsume=draw(INT32),
        prepared=draw(INT64),
    )


def outcome(decode: Callable[[], Iterable[MessageExt]]) -> tuple[list[MessageExt], Any, str | None]:
    """The records an iteration yields, then the type and message of what it raised."""
    got: list[MessageExt] = []
    try:
        for msg in decode():
            got.append(msg)
    except Exception as exc:
        return got, type(exc), str(exc)
    return got, None, None


def assert_same_records(buf: bytes | bytearray | memoryview) -> list[MessageExt]:
    expected = outcome(lambda: py_iter_records(buf))
    assert outcome(lambda: message.iter_records(buf)) == expected
    # The C function's own answer: tuples of MessageExt's fields, or the instances, then
    # where and why it stopped.
    for cls in (None, MessageExt):
        decoded, error = speedups.decode_records(buf, cls)
        assert [m if cls else MessageExt(*m) for m in decoded] == expected[0]
        if expected[1] is None:
            assert error is None
        else:
            pos = sum(m.store_size for m in expected[0])
            assert expected[1] is RecordFormatError  # never struct.error or another surprise
            assert error == (pos, expected[2])
    for msg in expected[0]:
        assert type(msg) is MessageExt and type(msg.body) is bytes and type(msg.properties) is dict
    return expected[0]


# -- the same records ----------------------------------------------------------------------


@given(st.lists(records(), min_size=1, max_size=12))
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_it_decodes_any_records_like_the_python_decoder(recs: list[bytes]) -> None:
    buf = b"".join(recs)
    decoded = assert_same_records(buf)
    assert len(decoded) == len(recs)  # every generated record is well formed
    assert_same_records(bytearray(buf))
    assert_same_records(memoryview(buf))
    pos = 0
    for raw, msg in zip(recs, decoded, strict=True):
        assert message.decode_record(buf, pos) == msg == py_decode_record(raw)
        assert message.decode_record(buf, pos, with_body=False) == py_decode_record(buf, pos, with_body=False)
        assert message.decode_record(buf, pos, with_body=False).body == b""
        pos += len(raw)


@given(
    st.lists(
        st.tuples(
            st.text(CHARS, min_size=1, max_size=20).filter(lambda t: len(t.encode()) <= 127),
            st.binary(max_size=1500),
            st.dictionaries(
                st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "DELAY", "é", "自定义"]),
                st.text(PROPERTY_CHARS, max_size=16),
                max_size=5,
            ),
            st.sampled_from(
                ["10.1.2.3:50000", "127.0.0.1:0", "[::1]:9876", "[fe80::1:2]:1", "[::ffff:1.2.3.4]:5"]
            ),
            st.sampled_from([encode_host("127.0.0.1:10911"), encode_host("[2001:db8::1]:10911")]),
            st.booleans(),
        ),
        min_size=1,
        max_size=32,
    )
)
@settings(max_examples=150, deadline=None)
def test_it_decodes_what_the_store_encodes(
    items: list[tuple[str, bytes, dict[str, str], str, bytes, bool]],
) -> None:
    buf = bytearray()
    for i, (topic, body, props, born_host, store_host, compressed) in enumerate(items):
        stored_body = zlib.compress(body) if compressed else body
        msg = MessageInner(
            topic,
            i % 4,
            stored_body,
            props,
            sys_flag=COMPRESSED_FLAG if compressed else 0,
            born_timestamp=1_700_000_000_000 + i,
            born_host=born_host,
            reconsume_times=i % 3,
        )
        record = msg.encode(store_host)
        finish_record(record, i, 4096 + len(buf), 1_700_000_000_500 + i)
        buf += record
    decoded = assert_same_records(bytes(buf))
    assert [(m.topic, m.uncompressed_body(), m.properties, m.born_host) for m in decoded] == [
        (topic, body, props, born_host) for topic, body, props, born_host, _, _ in items
    ]
    for m, (*_, store_host, _) in zip(decoded, items, strict=True):
        assert m.msg_id == create_message_id(store_host, m.commit_log_offset) and m.body_crc_ok


def test_it_decodes_properties_exactly_as_decode_properties_does() -> None:
    for raw in [
        b"",
        b"a\x01\x02",
        b"a\x011\x02b\x012",
        b"junk\x02a\x011\x02x\x01y\x01z\x02\x01novalue\x02",
        b"a\x011\x02a\x012\x02b\x01\x02a\x013\x02",  # the last value wins, in first-seen order
        b"\xe2\x82\x02k\x01\xe2\x82\x02\xff\x01v\x02",  # invalid UTF-8 on either side of a separator
        b"\x02\x02\x01\x01\x02",
    ]:
        (msg,), error = speedups.decode_records(pack_record(props=raw), MessageExt)
        assert error is None
        assert msg.properties == decode_properties(raw)
        assert list(msg.properties.items()) == list(decode_properties(raw).items())


def test_it_formats_hosts_and_msg_ids_as_the_python_helpers_do() -> None:
    for born_host, store_host in [
        ("1.2.3.4:-1", "255.255.255.255:2147483647"),
        ("[::]:0", "[::ffff:127.0.0.1]:10911"),
        ("[2001:db8:0:0:1:0:0:1]:80", "[::1]:-2147483648"),
    ]:
        raw = pack_record(born=encode_host(born_host), store=encode_host(store_host), phys=-2)
        msg = message.decode_record(raw)
        assert msg == py_decode_record(raw)
        assert msg.store_host == message.decode_host(encode_host(store_host))
        assert msg.msg_id == create_message_id(encode_host(store_host), -2)


# -- the same errors -----------------------------------------------------------------------


def v4_and_v6_buffer() -> bytes:
    v6 = encode_host("[2001:db8::7]:10911")
    return (
        pack_record(props=b"TAGS\x01a\x02")
        + pack_record(born=v6, body=b"x" * 40, phys=300)
        + pack_record(store=v6, topic="tópico".encode())
        + pack_record(born=v6, store=v6, props=b"KEYS\x01k\x02")
    )


def test_it_fails_like_the_python_decoder_at_every_truncation() -> None:
    buf = v4_and_v6_buffer()
    for end in range(len(buf) + 1):
        assert_same_records(buf[:end])


def test_it_fails_like_the_python_decoder_on_a_bad_magic_code() -> None:
    buf = bytearray(v4_and_v6_buffer())
    second = struct.unpack_from(">i", buf)[0]
    struct.pack_into(">I", buf, second + 4, 0xCBD43194)
    decoded = assert_same_records(buf)
    assert len(decoded) == 1
    with pytest.raises(RecordFormatError, match=rf"bad magic code 0xCBD43194 at {second}"):
        list(message.iter_records(buf))
    with pytest.raises(RecordFormatError, match=r"only 10 bytes left at 0"):
        message.decode_record(bytes(10))


@pytest.mark.parametrize(
    ("field", "values"),
    [
        ("total", [0, 91, 92, 93, 111, 112, 2**31 - 1, -1, -(2**31)]),
        ("body_len", [-1, 0, 1, 39, 41, 2**31 - 1, -(2**31)]),
        ("topic_len", [0, 1, 5, 200, 255]),
        ("props_len", [-1, 0, 1, 7, 32767, -32768]),
        ("sys_flag", [0, BORNHOST_V6_FLAG, STOREHOST_V6_FLAG, BORNHOST_V6_FLAG | STOREHOST_V6_FLAG, -1]),
    ],
)
def test_it_fails_like_the_python_decoder_on_overrunning_lengths(field: str, values: list[int]) -> None:
    head = pack_record(props=b"TAGS\x01a\x02")
    target = pack_record(body=b"x" * 40, topic=b"topic", props=b"KEYS\x01k\x02")
    tail = pack_record(born=encode_host("[::1]:1"), props=b"WAIT\x01true\x02")
    positions = {
        "total": (0, ">i"),
        "sys_flag": (36, ">i"),
        "body_len": (84, ">i"),
        "topic_len": (88 + 40, ">B"),
        "props_len": (88 + 40 + 1 + 5, ">h"),
    }
    at, fmt = positions[field]
    for value in values:
        record = bytearray(target)
        struct.pack_into(fmt, record, at, value)
        for buf in (head + record + tail, head + record, bytes(record)):
            assert_same_records(buf)
            for pos in (0, len(head)):
                expected = outcome(lambda buf=buf, pos=pos: [py_decode_record(buf, pos)])
                assert outcome(lambda buf=buf, pos=pos: [message.decode_record(buf, pos)]) == expected


def test_a_record_too_short_for_its_ipv6_hosts_is_a_format_error_in_both() -> None:
    # TOTALSIZE says 100 bytes while IPv6 hosts need 115 for the fixed fields: a format
    # error (recovery stops there), not a struct.error, whether or not bytes follow it.
    record = bytearray(pack_record(born=encode_host("[::1]:1"), store=encode_host("[::2]:2"))[:100])
    struct.pack_into(">i", record, 0, 100)
    for buf in (bytes(record), bytes(record) + pack_record()):
        assert_same_records(buf)
        expected = outcome(lambda buf=buf: [py_decode_record(buf)])
        assert expected[1] is RecordFormatError
        assert outcome(lambda buf=buf: [message.decode_record(buf)]) == expected
    with pytest.raises(RecordFormatError, match="too short for its fixed fields"):
        py_decode_record(bytes(record))


@given(
    st.lists(records(), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 10**6), st.binary(min_size=1, max_size=4)), min_size=1, max_size=6),
    st.integers(0, 10**6),
)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_it_fails_like_the_python_decoder_on_corrupted_buffers(
    recs: list[bytes], patches: list[tuple[int, bytes]], cut: int
) -> None:
    buf = bytearray(b"".join(recs))
    starts = [sum(map(len, recs[:i])) for i in range(len(recs))]
    for where, data in patches:
        # Mostly the fixed header fields and the lengths around the body, where the checks are.
        record = where % len(recs)
        at = starts[record] + (where // len(recs)) % min(len(recs[record]), 120)
        buf[at : at + len(data)] = data[: len(buf) - at]
    assert_same_records(bytes(buf))
    assert_same_records(bytes(buf[: cut % (len(buf) + 1)]))
    for pos in {0, *starts, cut % (len(buf) + 3)}:
        for with_body in (True, False):
            py = outcome(lambda pos=pos, wb=with_body: [py_decode_record(buf, pos, with_body=wb)])
            assert (
                outcome(lambda pos=pos, wb=with_body: [message.decode_record(buf, pos, with_body=wb)]) == py
            )


def test_iter_records_yields_the_good_records_before_raising() -> None:
    good = pack_record(body=b"first")
    it = message.iter_records(good + b"\x00" * 100)
    assert next(it).body == b"first"
    with pytest.raises(RecordFormatError, match=f"bad magic code 0x00000000 at {len(good)}$"):
        next(it)


def test_it_refuses_classes_it_cannot_fill() -> None:
    class NoSlots:
        pass

    @dataclasses.dataclass
    class NoSlotsExt:  # the same fields, in an instance __dict__
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
        properties: dict[str, str]
        msg_id: str

    for cls in (NoSlots, NoSlotsExt, dict):
        with pytest.raises(TypeError, match="is not a writable object slot"):
            speedups.decode_records(pack_record(), cls)
    # A slots class with the fields works, subclass or not.
    sub_ext = type("SubExt", (MessageExt,), {"__slots__": ()})
    (sub,), _ = speedups.decode_records(pack_record(), sub_ext)
    assert type(sub) is sub_ext
    assert MessageExt(*dataclasses.astuple(sub)) == py_decode_record(pack_record())
    with pytest.raises(TypeError):
        speedups.decode_records(pack_record(), 5)
    with pytest.raises(TypeError):
        speedups.decode_records("not bytes")
    with pytest.raises(ValueError):
        speedups.decode_records(pack_record(), None, True, -1)
