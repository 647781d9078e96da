"""The commit-log record format (``broker_core.model.message``), byte for byte.

Layout reference: remoting-protocol.md section 6.  Every round trip goes through
``MessageInner.encode`` + ``finish_record`` (what the commit log does) and ``decode_record``
(what a consumer does).
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path

import pytest

from broker_core.errors import MessageIllegalError
from broker_core.model.hashcode import tags_code
from broker_core.model.message import (
    BLANK,
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    END,
    MAX_PROPERTIES_BYTES,
    MESSAGE_MAGIC_CODE,
    MULTI_TAGS_FLAG,
    STOREHOST_V6_FLAG,
    TRANSACTION_PREPARED_TYPE,
    MessageInner,
    RecordFormatError,
    blank_marker,
    body_crc,
    check_record,
    create_message_id,
    decode_message_id,
    decode_properties,
    decode_record,
    encode_host,
    encode_properties,
    finish_record,
    iter_records,
)

from .conftest import T0

STORE_HOST = encode_host("127.0.0.1:10911")
CAPTURES = Path(__file__).resolve().parents[4] / "shared" / "reference" / "captures"


def stored(
    msg: MessageInner,
    *,
    queue_offset: int = 0,
    phys: int = 0,
    store_ts: int = T0,
    store_host: bytes = STORE_HOST,
) -> bytearray:
    record = msg.encode(store_host)
    finish_record(record, queue_offset, phys, store_ts)
    return record


# -- round trips ---------------------------------------------------------------------------


def test_it_round_trips_every_header_field() -> None:
    msg = MessageInner(
        "orders",
        7,
        b"payload",
        {"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "0100007F0000C2FC0000B9C58E730100"},
        flag=0x1234,
        sys_flag=MULTI_TAGS_FLAG | TRANSACTION_PREPARED_TYPE,
        born_timestamp=T0 - 5,
        born_host="192.168.7.9:54321",
        reconsume_times=3,
        prepared_transaction_offset=987_654_321,
    )
    record = stored(msg, queue_offset=42, phys=1 << 40, store_ts=T0)
    decoded = decode_record(record)
    assert decoded.store_size == len(record)
    assert decoded.queue_id == 7
    assert decoded.flag == 0x1234
    assert decoded.queue_offset == 42
    assert decoded.commit_log_offset == 1 << 40
    assert decoded.sys_flag == MULTI_TAGS_FLAG | TRANSACTION_PREPARED_TYPE
    assert decoded.born_timestamp == T0 - 5
    assert decoded.born_host == "192.168.7.9:54321"
    assert decoded.store_timestamp == T0
    assert decoded.store_host == "127.0.0.1:10911"
    assert decoded.reconsume_times == 3
    assert decoded.prepared_transaction_offset == 987_654_321
    assert decoded.body == b"payload"
    assert decoded.topic == "orders"
    assert decoded.properties == msg.properties
    assert decoded.keys == "k1 k2" and decoded.tags == "TagA"
    assert decoded.uniq_key == "0100007F0000C2FC0000B9C58E730100"
    assert decoded.body_crc_ok
    assert decoded.msg_id == create_message_id(STORE_HOST, 1 << 40)


def test_it_writes_the_fixed_header_at_the_documented_positions() -> None:
    record = stored(
        MessageInner("t", 3, b"abc", flag=9, born_timestamp=11), queue_offset=5, phys=77, store_ts=99
    )
    total, magic, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts = struct.unpack_from(
        ">iIiiiqqiq", record
    )
    assert (total, magic, queue_id, flag, queue_offset, phys, sys_flag, born_ts) == (
        len(record),
        MESSAGE_MAGIC_CODE,
        3,
        9,
        5,
        77,
        0,
        11,
    )
    assert crc == zlib.crc32(b"abc") & 0x7FFFFFFF
    assert record[48:56] == encode_host("127.0.0.1:0")
    assert struct.unpack_from(">q", record, 56)[0] == 99
    assert record[64:72] == STORE_HOST
    assert struct.unpack_from(">i", record, 84)[0] == 3 and record[88:91] == b"abc"
    assert record[91] == 1 and record[92:93] == b"t"
    assert struct.unpack_from(">h", record, 93)[0] == 0


def test_it_round_trips_unicode_properties_including_characters_outside_the_bmp() -> None:
    props = {"名前": "値😀🎉", "emoji😀": "ünïcödé", "TAGS": "🏷️tag", "KEYS": "ключ 鍵"}
    decoded = decode_record(stored(MessageInner("orders", 0, "тело 😀".encode(), props)))
    assert decoded.properties == props
    assert decoded.body.decode() == "тело 😀"
    assert decoded.tags == "🏷️tag"


def test_it_hashes_a_non_bmp_tag_over_utf16_code_units_like_java() -> None:
    # Java: "😀".hashCode() == 0xD83D * 31 + 0xDE00 (a surrogate pair).
    assert tags_code("😀") == 0xD83D * 31 + 0xDE00
    assert MessageInner("t", 0, b"x", {"TAGS": "😀"}).tags_code == 0xD83D * 31 + 0xDE00
    assert tags_code(None) == 0 and tags_code("") == 0


def test_it_round_trips_an_empty_body() -> None:
    record = stored(MessageInner("t", 0, b""))
    assert len(record) == 91 + 0 + 1 + 0
    decoded = decode_record(record)
    assert decoded.body == b"" and decoded.body_crc == 0 and decoded.body_crc_ok


def test_it_round_trips_a_one_mebibyte_body() -> None:
    body = random.Random(1).randbytes(1 << 20)
    record = stored(MessageInner("big", 0, body, {"KEYS": "k"}))
    decoded = decode_record(record)
    assert decoded.body == body
    assert decoded.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert len(record) == 91 + (1 << 20) + 3 + len(b"KEYS\x01k\x02")


def test_it_round_trips_an_ipv6_born_host_and_sets_its_flag() -> None:
    msg = MessageInner("t6", 1, b"body", {"a": "b"}, born_host="[2001:db8::7]:4242")
    record = stored(msg)
    decoded = decode_record(record)
    assert decoded.sys_flag & BORNHOST_V6_FLAG
    assert not decoded.sys_flag & STOREHOST_V6_FLAG
    assert decoded.born_host == "[2001:db8::7]:4242"
    assert decoded.store_timestamp == T0
    assert decoded.store_host == "127.0.0.1:10911"
    assert len(record) == 91 + 12 + 4 + 2 + len(b"a\x01b\x02")


def test_it_round_trips_an_ipv6_store_host_with_a_56_character_msg_id() -> None:
    v6 = encode_host("[::1]:10911")
    decoded = decode_record(stored(MessageInner("t", 0, b"x"), phys=4096, store_host=v6))
    assert decoded.sys_flag & STOREHOST_V6_FLAG
    assert decoded.store_host == "[::1]:10911"
    assert len(decoded.msg_id) == 56
    assert decode_message_id(decoded.msg_id) == ("[::1]:10911", 4096)


def test_it_clears_v6_flags_a_producer_set_for_ipv4_hosts() -> None:
    decoded = decode_record(stored(MessageInner("t", 0, b"x", sys_flag=BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)))
    assert decoded.sys_flag & (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG) == 0
    assert decoded.born_host == "127.0.0.1:0"


@pytest.mark.parametrize(
    ("body", "topic", "props"),
    [(b"", "t", {}), (b"x" * 100, "orders", {"KEYS": "a"}), (b"\0" * 7, "T" * 127, {"k": "v" * 1000})],
)
def test_it_sizes_an_ipv4_record_as_91_plus_body_topic_and_properties(
    body: bytes, topic: str, props: dict[str, str]
) -> None:
    record = stored(MessageInner(topic, 0, body, props))
    assert len(record) == 91 + len(body) + len(topic) + len(encode_properties(props))
    assert struct.unpack_from(">i", record)[0] == len(record)


def test_it_computes_the_body_crc_as_zlib_crc32_masked_to_31_bits() -> None:
    body = b"body-2"  # zlib.crc32 has its top bit set: the mask matters
    assert zlib.crc32(body) & 0x80000000
    assert body_crc(body) == zlib.crc32(body) & 0x7FFFFFFF
    record = stored(MessageInner("t", 0, body))
    assert struct.unpack_from(">i", record, 8)[0] == zlib.crc32(body) & 0x7FFFFFFF


def test_it_keeps_compressed_bodies_as_stored_and_inflates_on_request() -> None:
    raw = b"compress me " * 100
    deflated = zlib.compress(raw)
    decoded = decode_record(stored(MessageInner("t", 0, deflated, sys_flag=COMPRESSED_FLAG)))
    assert decoded.body == deflated
    assert decoded.body_crc == zlib.crc32(deflated) & 0x7FFFFFFF
    assert decoded.uncompressed_body() == raw


def test_it_refuses_a_topic_longer_than_127_bytes_or_empty() -> None:
    with pytest.raises(MessageIllegalError, match="topic"):
        MessageInner("T" * 128, 0, b"x").encode(STORE_HOST)
    with pytest.raises(MessageIllegalError, match="topic"):
        MessageInner("", 0, b"x").encode(STORE_HOST)
    # 64 two-byte characters are 128 bytes: the limit is on the encoded length.
    with pytest.raises(MessageIllegalError, match="topic"):
        MessageInner("é" * 64, 0, b"x").encode(STORE_HOST)


def test_it_keeps_properties_exactly_as_the_client_sent_them() -> None:
    raw = b"WAIT\x01true\x02KEYS\x01a\x02"
    msg = MessageInner("t", 0, b"x", decode_properties(raw), properties_raw=raw)
    record = stored(msg)
    assert record.endswith(struct.pack(">h", len(raw)) + raw)


def test_it_decodes_records_laid_back_to_back() -> None:
    records = [stored(MessageInner("t", 0, b"m%d" % i), queue_offset=i) for i in range(3)]
    decoded = list(iter_records(b"".join(records)))
    assert [m.body for m in decoded] == [b"m0", b"m1", b"m2"]
    assert [m.queue_offset for m in decoded] == [0, 1, 2]


def test_it_raises_record_format_error_for_bytes_that_are_not_a_record() -> None:
    good = stored(MessageInner("t", 0, b"abc"))
    with pytest.raises(RecordFormatError):
        decode_record(bytes(200))
    with pytest.raises(RecordFormatError):
        decode_record(good[:-1])
    with pytest.raises(RecordFormatError):
        decode_record(b"\x00" * 10)
    bad_props = bytearray(good)
    struct.pack_into(">h", bad_props, len(good) - 2, 5)
    with pytest.raises(RecordFormatError):
        decode_record(bad_props)


# -- properties ----------------------------------------------------------------------------


def test_it_encodes_properties_with_a_trailing_separator() -> None:
    assert encode_properties({"a": "1", "b": "2"}) == b"a\x011\x02b\x012\x02"
    assert encode_properties({}) == b""
    assert encode_properties({"k": ""}) == b"k\x01\x02"


def test_it_decodes_properties_with_or_without_the_trailing_separator() -> None:
    assert decode_properties(b"a\x011\x02b\x012\x02") == {"a": "1", "b": "2"}
    assert decode_properties(b"a\x011\x02b\x012") == {"a": "1", "b": "2"}
    assert decode_properties("a\x011\x02") == {"a": "1"}
    assert decode_properties(b"") == {}


def test_it_skips_pairs_without_exactly_one_name_value_separator() -> None:
    assert decode_properties(b"junk\x02a\x011\x02x\x01y\x01z\x02\x01novalue\x02") == {"a": "1"}


@pytest.mark.parametrize(
    "props",
    [{"na\x01me": "v"}, {"na\x02me": "v"}, {"name": "va\x01lue"}, {"name": "va\x02lue"}, {"": "v"}],
)
def test_it_refuses_separators_in_property_names_or_values(props: dict[str, str]) -> None:
    with pytest.raises(MessageIllegalError) as raised:
        encode_properties(props)
    assert raised.value.remark


def test_it_refuses_properties_longer_than_32767_bytes() -> None:
    fits = {"k": "v" * (MAX_PROPERTIES_BYTES - 3)}  # k \x01 ... \x02
    assert len(encode_properties(fits)) == MAX_PROPERTIES_BYTES
    with pytest.raises(MessageIllegalError, match="32767"):
        encode_properties({"k": "v" * (MAX_PROPERTIES_BYTES - 2)})
    with pytest.raises(MessageIllegalError, match="32767"):
        MessageInner("t", 0, b"x", properties_raw=b"x" * 32768).encode(STORE_HOST)
    record = stored(MessageInner("t", 0, b"x", fits))
    assert decode_record(record).properties == fits


# -- message ids ---------------------------------------------------------------------------


def test_it_makes_the_documented_msg_id_for_127_0_0_1_10911_offset_0() -> None:
    assert create_message_id(STORE_HOST, 0) == "7F00000100002A9F0000000000000000"
    assert decode_message_id("7F00000100002A9F0000000000000000") == ("127.0.0.1:10911", 0)
    assert decode_message_id("7f00000100002a9f0000000000000000") == ("127.0.0.1:10911", 0)


def test_it_round_trips_msg_ids_of_large_offsets() -> None:
    host = encode_host("10.0.0.5:9876")
    msg_id = create_message_id(host, 0x0123456789AB)
    assert msg_id == msg_id.upper() and len(msg_id) == 32
    assert decode_message_id(msg_id) == ("10.0.0.5:9876", 0x0123456789AB)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "XYZ",
        "7F00000100002A9F000000000000000",
        "7F00000100002A9F00000000000000000G",
        "7F" * 17,
        "7F" * 15,
    ],
)
def test_it_rejects_malformed_msg_ids(bad: str) -> None:
    with pytest.raises(MessageIllegalError):
        decode_message_id(bad)


# -- recovery's record check ---------------------------------------------------------------


def test_it_checks_a_valid_record_and_returns_its_dispatch_request() -> None:
    msg = MessageInner("orders", 2, b"abc", {"KEYS": "k1 k2", "UNIQ_KEY": "U", "TAGS": "TagA"})
    record = stored(msg, queue_offset=9, phys=500)
    buf = bytearray(1000)
    buf[0 : len(record)] = record
    size, request = check_record(buf, 0, len(buf))
    assert size == len(record)
    assert request is not None
    assert (request.topic, request.queue_id, request.queue_offset, request.commit_log_offset) == (
        "orders",
        2,
        9,
        500,
    )
    assert request.msg_size == len(record)
    assert request.tags_code == tags_code("TagA")
    assert (request.keys, request.uniq_key, request.store_timestamp) == ("k1 k2", "U", T0)


def test_it_ends_the_log_at_zeros_garbage_or_a_torn_record() -> None:
    record = stored(MessageInner("orders", 0, b"x" * 50))
    size = len(record)
    assert check_record(bytes(4096), 0, 4096) == (END, None)
    garbage = random.Random(7).randbytes(4096)
    assert check_record(garbage, 0, 4096) == (END, None)
    # Torn: the record's bytes stop before its TOTALSIZE says.
    assert check_record(record[: size - 10], 0, size - 10) == (END, None)
    torn = bytearray(4096)
    torn[: size - 10] = record[: size - 10]
    assert check_record(torn, 0, 4096) == (END, None)
    # A flipped body byte fails the CRC.
    flipped = bytearray(record)
    flipped[90] ^= 0xFF
    assert check_record(flipped, 0, len(flipped)) == (END, None)
    # Less than 8 bytes left.
    assert check_record(record, size - 4, size) == (END, None)
    # Right magic, impossible size.
    bad_size = bytearray(record)
    struct.pack_into(">i", bad_size, 0, 10)
    assert check_record(bad_size, 0, len(bad_size)) == (END, None)


def test_it_recognises_the_blank_end_of_file_marker_only_where_it_closes_the_segment() -> None:
    segment = bytearray(4096)
    segment[4000:4008] = blank_marker(96)
    assert struct.unpack_from(">iI", segment, 4000) == (96, BLANK_MAGIC_CODE)
    assert check_record(segment, 4000, 4096) == (BLANK, None)
    # A blank whose size does not reach the end of the segment is not trusted.
    segment[4000:4008] = blank_marker(50)
    assert check_record(segment, 4000, 4096) == (END, None)
    tail = bytearray(4096)
    tail[4088:4096] = blank_marker(8)
    assert check_record(tail, 4088, 4096) == (BLANK, None)


# -- what the official C++ client sent ---------------------------------------------------------


def _captured_sends(name: str) -> list[dict[str, object]]:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"capture {path} not available")
    sends = []
    for line in path.read_text().splitlines():
        frame = json.loads(line)
        if frame.get("dir") != "in" or frame.get("role") != "broker":
            continue
        header = json.loads(frame["header_raw"])
        if header.get("code") == 10:
            sends.append({**header["extFields"], "body": bytes.fromhex(frame.get("body_hex", ""))})
    return sends


def _captured_pull_body_sizes(name: str) -> list[int]:
    """Body sizes of the FOUND pull responses the reference server sent (frame length - header)."""
    sizes = []
    for line in (CAPTURES / name).read_text().splitlines():
        frame = json.loads(line)
        if frame.get("dir") == "out" and frame.get("what") == "response to 11":
            header = json.loads(frame["header"])
            if header["code"] == 0:
                total, header_len = struct.unpack(">ii", bytes.fromhex(frame["bytes_hex_head"]))
                sizes.append(total - 4 - (header_len & 0xFFFFFF))
    return sizes


def _record_of_send(send: dict[str, object], queue_offset: int, phys: int) -> bytearray:
    props_raw = str(send["properties"]).encode()
    msg = MessageInner(
        str(send["topic"]),
        int(send["queueId"]),  # type: ignore[call-overload]
        send["body"],  # type: ignore[arg-type]
        decode_properties(props_raw),
        flag=int(send["flag"]),  # type: ignore[call-overload]
        sys_flag=int(send["sysFlag"]),  # type: ignore[call-overload]
        born_timestamp=int(send["bornTimestamp"]),  # type: ignore[call-overload]
        reconsume_times=int(send["reconsumeTimes"]),  # type: ignore[call-overload]
        properties_raw=props_raw,
    )
    return stored(msg, queue_offset=queue_offset, phys=phys)


def test_it_stores_the_c_plus_plus_clients_sample_message_in_199_bytes() -> None:
    # The captures hold the client's SEND_MESSAGE frames but only the first 8 bytes of each
    # pull response, so the stored records are rebuilt from the sends and checked against
    # the sizes the reference broker's pull responses carried (remoting-protocol.md 6.1).
    sends = [s for s in _captured_sends("producer-consumer-all.jsonl") if s["body"] == b"hello-0"]
    assert sends, "the capture has the hello-0 send"
    record = _record_of_send(sends[0], queue_offset=0, phys=0)
    assert len(record) == 199
    decoded = decode_record(record)
    assert decoded.topic == "ProbeTopic"
    assert decoded.body == b"hello-0"
    assert decoded.born_timestamp == int(sends[0]["bornTimestamp"])  # type: ignore[call-overload]
    assert decoded.properties["KEYS"] == "key-0 order-0"
    assert decoded.properties["TAGS"] == "TagA"
    assert decoded.properties["myprop"] == "v0"
    assert decoded.properties["UNIQ_KEY"] == "0100007F0000C2FC0000B9C58E730100"


def test_it_rebuilds_records_the_size_of_the_captured_orderly_pull_response() -> None:
    sends = [s for s in _captured_sends("orderly-and-pull.jsonl") if str(s["topic"]) == "ProbeTopic"]
    by_queue: dict[int, list[bytearray]] = {}
    phys = 0
    for send in sends:
        queue = by_queue.setdefault(int(send["queueId"]), [])  # type: ignore[call-overload]
        record = _record_of_send(send, queue_offset=len(queue), phys=phys)
        phys += len(record)
        queue.append(record)
    pulled = _captured_pull_body_sizes("orderly-and-pull.jsonl")
    assert pulled, "the capture has FOUND pull responses"
    queue_body_sizes = {sum(map(len, records)) for records in by_queue.values()}
    for size in pulled:
        assert size in queue_body_sizes, f"a pull body of {size} bytes matches no queue ({queue_body_sizes})"
    for records in by_queue.values():
        for i, msg in enumerate(iter_records(b"".join(records))):
            assert msg.topic == "ProbeTopic" and msg.queue_offset == i
            assert msg.body.startswith(b"ord-") and msg.properties["TAGS"] == "TagA"
            assert msg.properties["KEYS"] == "ok" + msg.body.decode()[4:]


@pytest.mark.parametrize(
    ("properties", "problem"),
    [
        ({"": "v"}, "empty name"),
        ({"a\x01b": "v"}, "reserved separator"),
        ({"a": "v\x02w"}, "reserved separator"),
        ({"a": "x", "b": "\x01\x02"}, "reserved separator"),  # counts even out over pairs: still caught
        ({"k": "v" * 40_000}, "the format allows"),
    ],
)
def test_property_encoding_refuses_what_the_format_cannot_carry(
    properties: dict[str, str], problem: str
) -> None:
    with pytest.raises(MessageIllegalError, match=problem):
        encode_properties(properties)


def test_property_encoding_round_trips_and_stringifies() -> None:
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "ünï": "cödé", "n": 5}
    raw = encode_properties(props)  # type: ignore[arg-type]
    assert raw == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02ünï\x01cödé\x02n\x015\x02".encode()
    assert decode_properties(raw) == {k: str(v) for k, v in props.items()}
