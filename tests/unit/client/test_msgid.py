"""Client message ids (UNIQ_KEY) in RocketMQ's layout, and the client's identity."""

from __future__ import annotations

import os
from datetime import datetime

import pytest

from broker_core.client.config import ClientConfig
from broker_core.client.msgid import UniqueIdGenerator, client_ip_of, pid_of
from broker_core.errors import ConfigError


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def test_an_id_is_ip_pid_random_time_in_month_and_counter() -> None:
    ids = UniqueIdGenerator("10.1.2.3", pid=0x1234)
    first = ids.next_id(ms("2026-11-23T10:00:00.250"))
    second = ids.next_id(ms("2026-11-23T10:00:00.250"))
    assert len(first) == 32 and first == first.upper()
    raw = bytes.fromhex(first)
    assert raw[:4] == bytes([10, 1, 2, 3]) and raw[4:6] == b"\x12\x34"
    since_month = ms("2026-11-23T10:00:00.250") - ms("2026-11-01T00:00:00")
    assert int.from_bytes(raw[10:14], "big") == since_month
    assert int.from_bytes(bytes.fromhex(second)[14:], "big") == int.from_bytes(raw[14:], "big") + 1
    assert first[:20] == second[:20]  # the fixed part
    assert client_ip_of(first) == "10.1.2.3" and pid_of(first) == 0x1234


def test_the_month_start_moves_on_with_the_calendar() -> None:
    ids = UniqueIdGenerator("127.0.0.1", pid=1)
    late = bytes.fromhex(ids.next_id(ms("2026-11-30T23:59:59.999")))
    # Past 24.8 days the milliseconds overflow a Java int and wrap, as Java writes them.
    wrapped = (ms("2026-11-30T23:59:59.999") - ms("2026-11-01T00:00:00")) & 0xFFFFFFFF
    assert int.from_bytes(late[10:14], "big") == wrapped
    december = bytes.fromhex(ids.next_id(ms("2026-12-01T00:00:00.005")))
    assert int.from_bytes(december[10:14], "big") == 5


def test_ids_are_unique_across_many() -> None:
    ids = UniqueIdGenerator("127.0.0.1")
    assert len({ids.next_id() for _ in range(10_000)}) == 10_000


def test_the_client_id_is_ip_at_instance_with_the_pid_for_the_default_name() -> None:
    config = ClientConfig(namesrv_addr="a:1; b:2", client_ip="10.0.0.7")
    assert config.client_id == f"10.0.0.7@{os.getpid()}"
    assert config.namesrv_addrs == ["a:1", "b:2"]
    assert ClientConfig(client_ip="10.0.0.7", instance_name="billing").client_id == "10.0.0.7@billing"
    with pytest.raises(ConfigError):
        ClientConfig(access_key="ops")
    with pytest.raises(ConfigError):
        ClientConfig(request_timeout_ms=0)


def test_ids_for_a_batch_are_the_ids_one_at_a_time_would_be() -> None:
    at = ms("2026-11-23T10:00:00.250")
    one_by_one = UniqueIdGenerator("10.1.2.3", pid=7)
    batched = UniqueIdGenerator("10.1.2.3", pid=7)
    batched._prefix = one_by_one._prefix  # the same random part, to compare whole ids
    singles = [one_by_one.next_id(at) for _ in range(40)]
    assert batched.next_ids(40, at) == singles
    assert batched.next_id(at) == one_by_one.next_id(at)  # one counter for both ways
    assert batched.next_ids(0, at) == []
