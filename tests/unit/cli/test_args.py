"""Argument values the admin commands accept: times, booleans, message ids."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from broker_core.cli.args import format_timestamp, parse_bool, parse_timestamp
from broker_core.errors import MessageIllegalError
from broker_core.model.message import create_message_id, decode_message_id, encode_host


def fixed_clock() -> int:
    return 1_700_000_000_123


def test_it_reads_epoch_milliseconds_now_and_minus_one() -> None:
    assert parse_timestamp("1700000000000", fixed_clock) == 1_700_000_000_000
    assert parse_timestamp(" now ", fixed_clock) == 1_700_000_000_123
    assert parse_timestamp("NOW", fixed_clock) == 1_700_000_000_123
    assert parse_timestamp("-1", fixed_clock) == -1


def test_it_reads_mqadmins_date_format_in_local_time() -> None:
    expected = int(datetime(2024, 3, 9, 14, 5, 7).timestamp()) * 1000 + 42
    assert parse_timestamp("2024-03-09#14:05:07:042", fixed_clock) == expected


def test_it_refuses_anything_else_saying_what_it_accepts() -> None:
    for text in ("yesterday", "2024-03-09 14:05:07", "2024-03-09#14:05:07", "12.5", ""):
        with pytest.raises(ValueError, match="yyyy-MM-dd#HH:mm:ss:SSS"):
            parse_timestamp(text, fixed_clock)
    with pytest.raises(ValueError, match="not a valid date"):
        parse_timestamp("2024-02-30#00:00:00:000", fixed_clock)


def test_it_formats_timestamps_back_and_shows_never_as_a_dash() -> None:
    ms = parse_timestamp("2024-03-09#14:05:07:042", fixed_clock)
    assert format_timestamp(ms) == "2024-03-09 14:05:07,042"
    assert format_timestamp(0) == "-" and format_timestamp(-1) == "-"
    now = time.time_ns() // 1_000_000
    assert parse_timestamp(format_timestamp(now).replace(" ", "#").replace(",", ":"), fixed_clock) == now


def test_it_reads_booleans_strictly() -> None:
    assert parse_bool("TRUE") is True and parse_bool("1") is True and parse_bool("no") is False
    with pytest.raises(ValueError, match="not a boolean"):
        parse_bool("maybe")


def test_it_turns_an_offset_msg_id_back_into_broker_address_and_offset() -> None:
    assert decode_message_id("7F00000100002A9F0000000000000000") == ("127.0.0.1:10911", 0)
    msg_id = create_message_id(encode_host("10.1.2.3:10911"), 123_456_789)
    assert len(msg_id) == 32 and decode_message_id(msg_id.lower()) == ("10.1.2.3:10911", 123_456_789)
    v6 = create_message_id(encode_host("[::1]:10911"), 7)
    assert len(v6) == 56 and decode_message_id(v6) == ("[::1]:10911", 7)
    with pytest.raises(MessageIllegalError, match="32 \\(IPv4\\) or 56"):
        decode_message_id("7F000001")
    with pytest.raises(MessageIllegalError, match="not hexadecimal"):
        decode_message_id("0100007F00005BCD000081118E73010Z")
