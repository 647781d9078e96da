"""Polling before sleeping (``remoting.busypoll``): the adaptive rule, the server's loop, a
blocking connection's wait, and the settings that choose the window.

Nothing here measures time: the tests check which waits poll and what a miss or a hit
does, over real sockets and a real server.  (The figures are bench/peers.py's.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator

import pytest

from broker_core.client.config import ClientConfig
from broker_core.client.instance import ClientInstance
from broker_core.config import BrokerConfig, NamesrvConfig, load_broker_config
from broker_core.errors import ConfigError
from broker_core.remoting import blocking
from broker_core.remoting.blocking import BlockingChannels, BlockingConnection
from broker_core.remoting.busypoll import MAX_BUSY_POLL_MICROS, MAX_SKIPPED, BusyPoll, LoopBusyPoll
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.connection import Connection
from broker_core.remoting.server import RemotingServer


def polls(policy: BusyPoll, waits: int) -> list[bool]:
    """Which of the next ``waits`` waits poll first (each one missing when it does)."""
    out = []
    for _ in range(waits):
        polled = policy.until(1.0) != 0.0
        out.append(polled)
        if polled:
            policy.miss()
    return out


def test_every_wait_polls_while_the_window_covers_them() -> None:
    policy = BusyPoll(200)
    for _ in range(1000):
        assert policy.until(5.0) == pytest.approx(5.0002)
        policy.hit()


def test_misses_in_a_row_make_twice_as_many_waits_sleep_at_once_each_time() -> None:
    pattern = polls(BusyPoll(200), 18)
    # Poll, miss; 1 sleeps; poll, miss; 3 sleep; poll, miss; 7 sleep; poll, miss...
    assert pattern == [True, False, True] + [False] * 3 + [True] + [False] * 7 + [True, False, False, False]


def test_the_sleeps_after_misses_stop_growing_at_the_cap() -> None:
    policy = BusyPoll(200)
    pattern = polls(policy, 20_000)
    polled_at = [i for i, p in enumerate(pattern) if p]
    gaps = [b - a - 1 for a, b in zip(polled_at, polled_at[1:], strict=False)]
    assert max(gaps) == MAX_SKIPPED
    assert gaps[-5:] == [MAX_SKIPPED] * 5


def test_a_hit_brings_polling_back_for_every_wait() -> None:
    policy = BusyPoll(200)
    polls(policy, 50)  # deep in misses
    while not policy.until(1.0):
        pass
    policy.hit()
    assert all(policy.until(1.0) for _ in range(100))


def test_a_window_of_zero_never_polls() -> None:
    policy = BusyPoll(0)
    assert not any(policy.until(1.0) for _ in range(100))


@pytest.mark.parametrize("micros", [-1, MAX_BUSY_POLL_MICROS + 1])
def test_windows_out_of_range_are_refused_with_a_sentence_everywhere(micros: int) -> None:
    with pytest.raises(ConfigError, match="serverBusyPollMicros must be 0 .no polling. to 10000 µs"):
        BrokerConfig(server_busy_poll_micros=micros)
    with pytest.raises(ConfigError, match="serverBusyPollMicros"):
        NamesrvConfig(server_busy_poll_micros=micros)
    with pytest.raises(ConfigError, match="busy_poll_micros"):
        ClientConfig(busy_poll_micros=micros)
    with pytest.raises(ConfigError, match="busy_poll_micros"):
        RemotingServer(busy_poll_micros=micros)
    with pytest.raises(ConfigError, match="busy_poll_micros"):
        BlockingChannels(busy_poll_micros=micros)


def test_the_broker_file_key_reaches_the_config() -> None:
    config, _store, unknown = load_broker_config(
        {"storePathRootDir": "/nonexistent", "serverBusyPollMicros": "0"}
    )
    assert config.server_busy_poll_micros == 0
    assert unknown == []
    namesrv, unknown = NamesrvConfig.from_properties({"serverBusyPollMicros": "50"})
    assert namesrv.server_busy_poll_micros == 50
    assert unknown == []


@pytest.mark.parametrize("micros", [0, 750])
def test_a_clients_setting_reaches_its_sync_senders_sockets(micros: int) -> None:
    config = ClientConfig(
        namesrv_addr="127.0.0.1:9", instance_name=f"busy-poll-{micros}", busy_poll_micros=micros
    )
    instance = ClientInstance.acquire(config)
    try:
        channels = instance._blocking
        assert channels.busy_poll_micros == micros
        assert channels.connection("127.0.0.1:9")._busy_poll.window == micros / 1_000_000
    finally:
        instance.release()


async def settle(busy: LoopBusyPoll) -> None:
    """Let the loop run until the polling that a read started has run out."""
    for _ in range(200):
        await asyncio.sleep(0.002)
        if not busy.polling:
            return
    raise AssertionError("the loop kept polling with no reads")


async def test_a_read_keeps_the_loop_polling_until_the_window_passes_then_counts_a_miss() -> None:
    busy = LoopBusyPoll(1_000)
    busy.read(time.monotonic())
    assert busy.polling
    await settle(busy)
    # That was a miss: the next read sleeps at once, the one after polls again.
    busy.read(time.monotonic())
    assert not busy.polling
    busy.read(time.monotonic())
    assert busy.polling
    await settle(busy)


async def test_a_loop_with_a_window_of_zero_never_polls() -> None:
    busy = LoopBusyPoll(0)
    busy.read(time.monotonic())
    assert not busy.polling


def slow(request: RemotingCommand, conn: Connection) -> object:
    async def answer() -> RemotingCommand:
        await asyncio.sleep(0.05)
        return request.response(body=request.body)

    return answer()


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    server = RemotingServer()

    def polling_now(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        # Whether the loop was polling when it handled this request (the read started it).
        return request.response(body=request.body, remark=str(server.busy_poll.polling))

    server.register(RequestCode.HEART_BEAT, polling_now)
    server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, slow)  # type: ignore[arg-type]
    await server.start()
    yield server
    await server.close()


async def test_the_server_polls_after_a_request_it_answered(server: RemotingServer) -> None:
    conn = BlockingConnection(server.address, connect_timeout=1.0)
    answer = await asyncio.to_thread(conn.request, RemotingCommand.request(RequestCode.HEART_BEAT), 2.0)
    assert (answer.code, answer.remark) == (ResponseCode.SUCCESS, "True")
    await settle(server.busy_poll)
    conn.close()


async def test_a_server_with_a_window_of_zero_never_polls() -> None:
    server = RemotingServer(busy_poll_micros=0)
    server.register(
        RequestCode.HEART_BEAT, lambda request, conn: request.response(remark=str(server.busy_poll.polling))
    )
    await server.start()
    try:
        conn = BlockingConnection(server.address, connect_timeout=1.0, busy_poll_micros=0)
        answer = await asyncio.to_thread(conn.request, RemotingCommand.request(RequestCode.HEART_BEAT), 2.0)
        assert answer.remark == "False"
        conn.close()
    finally:
        await server.close()


async def test_a_wait_the_window_does_not_cover_is_a_miss_and_the_answer_still_comes(
    server: RemotingServer,
) -> None:
    conn = BlockingConnection(server.address, connect_timeout=1.0, busy_poll_micros=2_000)
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, body=b"late")
    answer = await asyncio.to_thread(conn.request, request, 2.0)
    assert answer.body == b"late"
    assert conn._busy_poll.until(0.0) == 0.0  # the miss: the next wait sleeps at once
    assert conn._busy_poll.until(0.0) != 0.0
    conn.close()


async def test_an_answer_within_the_window_is_a_hit(server: RemotingServer) -> None:
    conn = BlockingConnection(server.address, connect_timeout=1.0, busy_poll_micros=MAX_BUSY_POLL_MICROS)
    polling_back = False
    # A loopback answer comes well within the 10 ms window, unless the machine stalls the
    # test just then (CI saw it once): a few tries, each after a fresh miss.
    for _ in range(5):
        conn._busy_poll.hit()  # from the same state each try: polling, then one miss
        conn._busy_poll.miss()
        conn._busy_poll.until(0.0)  # the one wait the miss makes sleep
        answer = await asyncio.to_thread(conn.request, RemotingCommand.request(RequestCode.HEART_BEAT), 2.0)
        assert answer.code == ResponseCode.SUCCESS
        # A hit: polling is back for every wait (a miss would skip the next ones).
        if all(conn._busy_poll.until(0.0) for _ in range(10)):
            polling_back = True
            break
    assert polling_back
    conn.close()


async def test_threads_waiting_together_sleep_instead_of_polling(server: RemotingServer) -> None:
    # Two threads each wait on a slow answer on their own socket at the same moment: the
    # second to start sees the first waiting, so it sleeps at once and counts no miss.
    first = BlockingConnection(server.address, connect_timeout=1.0, busy_poll_micros=2_000)
    second = BlockingConnection(server.address, connect_timeout=1.0, busy_poll_micros=2_000)
    started = threading.Event()

    def first_waits() -> RemotingCommand:
        started.set()
        return first.request(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, body=b"1"), 2.0)

    def second_waits() -> RemotingCommand:
        started.wait(2.0)
        while not blocking._waiting:  # the first thread is waiting for its answer
            time.sleep(0.001)
        return second.request(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, body=b"2"), 2.0)

    answers = await asyncio.gather(asyncio.to_thread(first_waits), asyncio.to_thread(second_waits))
    assert [a.body for a in answers] == [b"1", b"2"]
    assert second._busy_poll.until(0.0) != 0.0  # it never polled, so it never missed
    first.close()
    second.close()
