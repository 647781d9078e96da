"""The servers protect themselves from hostile clients (issue 14): real nameservers and
brokers on loopback ports, attacked over raw sockets.

* a client that pipelines requests and never reads its answers is no longer read from
  once its unsent answers pass the high-water mark, so what the server holds for it stays
  bounded, and other clients are still answered;
* a flooding client's pipeline does not make other clients' requests wait behind all of it;
* partial frames on many connections: past the global cap the connections whose partial
  frames began first are dropped, so what the server holds stays under the cap;
* a client that drips a frame a byte at a time is closed once the frame is late, though
  each byte resets the idle timer; the deadline has a default and is set from the config.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker_core.broker.controller import BrokerController
from broker_core.config import BrokerConfig, NamesrvConfig, load_broker_config
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import FrameDecoder, RemotingCommand, encode
from broker_core.remoting.server import RemotingServer
from broker_core.testing import run_broker, run_namesrv

from .conftest import cli_server

MiB = 1024 * 1024


@contextlib.asynccontextmanager
async def server_of(kind: str, tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[RemotingServer, str]]:
    """A nameserver or a broker with its default settings (plus ``settings``): its remoting
    server and its address."""
    if kind == "nameserver":
        async with run_namesrv(**settings) as ns:
            yield ns.server, ns.address
    else:
        async with run_broker(tmp_path / "store", **settings) as broker:
            yield broker.server, broker.address


def request_frames(kind: str, count: int) -> bytes:
    """``count`` pipelined requests a client of ``kind`` would send (distinct opaques)."""
    frames = []
    for n in range(count):
        if kind == "nameserver":
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})
        elif n % 4 == 0:
            heartbeat = {"clientID": "10.0.0.9@hostile", "producerDataSet": [], "consumerDataSet": []}
            body = orjson.dumps(heartbeat)
            cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
        else:
            cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Orders", "queueId": "0"})
        cmd.opaque = n + 1
        frames.append(encode(cmd))
    return b"".join(frames)


def probe_request(kind: str) -> RemotingCommand:
    if kind == "nameserver":
        return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Orders"})
    return RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "Orders", "queueId": "0"})


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def raw_socket(address: str) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setblocking(False)
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (EOF or reset); False while it is open."""
    try:
        return sock.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def server_side(server: RemotingServer, sock: socket.socket) -> Any:
    """The server's connection for our ``sock`` (None once it is gone)."""
    host, port = sock.getsockname()[:2]
    local = f"{host}:{port}"
    return next((c for c in server.connections if c.remote_address == local), None)


# -- a client that never reads -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["nameserver", "broker"])
async def test_a_client_that_never_reads_is_not_read_from_and_others_are_still_answered(
    kind: str, tmp_path: Path
) -> None:
    async with server_of(kind, tmp_path) as (server, address):
        hostile = raw_socket(address)
        payload = memoryview(request_frames(kind, 2000))
        sent, last_progress = 0, asyncio.get_running_loop().time()
        try:
            # Pipeline as fast as the kernel takes it, never reading.  The old server read
            # everything and queued every answer, so this never stalled (it stops at 48 MiB).
            async with asyncio.timeout(15):
                while sent < 48 * MiB:
                    try:
                        sent += hostile.send(payload[sent % len(payload) :])
                        last_progress = asyncio.get_running_loop().time()
                    except BlockingIOError:
                        if asyncio.get_running_loop().time() - last_progress > 0.5:
                            break  # no progress for half a second: the server stopped reading us
                        await asyncio.sleep(0.005)
            assert sent < 48 * MiB, f"the server read all {sent} bytes of a client that never reads"
            high, _ = server.write_buffer_limits
            conn = server_side(server, hostile)
            assert conn is not None and conn.reading_paused
            # What it holds for the hostile client: the high-water mark plus one turn's
            # answers, not the answers to everything the client sent.
            assert conn.unsent_bytes <= high + 256 * 1024, conn.unsent_bytes
            assert server.unsent_bytes <= high + 256 * 1024

            client = RemotingClient()
            try:
                for _ in range(3):
                    await client.invoke(address, probe_request(kind), timeout=5)  # answered
            finally:
                await client.close()
        finally:
            hostile.close()
        # Gone with the client: nothing is held for it any more.
        await eventually(lambda: server.unsent_bytes == 0 and server.partial_frame_bytes == 0)


async def test_a_flooding_client_does_not_hold_up_another_clients_request() -> None:
    """Twenty thousand route queries pipelined in one write, then one from another client:
    it is answered after a few of the flood's, not after the flood's whole read (the old
    server answered all of a read first: 256 KiB of requests on asyncio's loop, up to 8 MB
    on uvloop's, hundreds of ms)."""
    total = 20_000
    async with run_namesrv() as ns:
        flooder = socket.socket()
        # Big buffers, so the whole flood sits in the kernel before the server reads any of
        # it, and every answer fits there unread.
        flooder.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MiB)
        flooder.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * MiB)
        flooder.connect(("127.0.0.1", ns.port))
        other = raw_socket(ns.address)
        try:
            await eventually(lambda: len(ns.server.connections) == 2)
            flooder.sendall(request_frames("nameserver", total))  # the loop does not run meanwhile
            flooder.setblocking(False)
            await asyncio.sleep(0)  # one loop iteration: the server reads the flood's first part
            other.send(encode(probe_request("nameserver")))
            other_decoder, answers = FrameDecoder(), []
            async with asyncio.timeout(10):
                while not answers:  # woken as soon as the answer arrives
                    answers += other_decoder.feed(await asyncio.get_running_loop().sock_recv(other, 65536))
            flood_decoder = FrameDecoder()
            before = 0
            with contextlib.suppress(BlockingIOError):
                while data := flooder.recv(1 << 20):
                    before += len(flood_decoder.feed(data))
            assert answers[0].code == ResponseCode.TOPIC_NOT_EXIST
            assert before < 1_500, f"the other client's request waited behind {before} of the flood's"
            got = before  # and the flood is answered in full
            async with asyncio.timeout(20):
                while got < total:
                    await asyncio.sleep(0.005)
                    with contextlib.suppress(BlockingIOError):
                        while data := flooder.recv(1 << 20):
                            got += len(flood_decoder.feed(data))
            assert got == total
        finally:
            flooder.close()
            other.close()


# -- partial frames --------------------------------------------------------------------------


async def test_partial_frames_past_the_global_cap_drop_the_connections_that_began_first() -> None:
    cap = NamesrvConfig().server_partial_frames_max_bytes  # the default: 64 MiB
    each = 3 * MiB  # of a 15 MiB frame, under the 16 MiB frame limit
    count = cap // each + 4  # 25 connections: 75 MiB offered
    async with run_namesrv() as ns:
        server = ns.server
        socks: list[socket.socket] = []
        try:
            for _ in range(count):
                sock = raw_socket(ns.address)
                socks.append(sock)
                await eventually(lambda sock=sock: server_side(server, sock) is not None)
                conn = server_side(server, sock)
                await asyncio.get_running_loop().sock_sendall(
                    sock, (15 * MiB).to_bytes(4, "big") + b"x" * (each - 4)
                )
                # The server has it all before the next one begins.
                await eventually(lambda conn=conn: conn.partial_bytes == each or conn.closed)
                assert server.partial_frame_bytes <= cap
            dropped = [closed_by_peer(sock) for sock in socks]
            # The old server held all 75 MiB and closed nothing.
            assert dropped == [True] * (count - cap // each) + [False] * (cap // each)
            assert server.partial_frame_bytes == (cap // each) * each
            client = RemotingClient()
            try:
                answer = await client.invoke(ns.address, probe_request("nameserver"))
                assert answer.code == ResponseCode.TOPIC_NOT_EXIST
            finally:
                await client.close()
        finally:
            for sock in socks:
                sock.close()
        await eventually(lambda: server.partial_frame_bytes == 0)


# -- dripping ----------------------------------------------------------------------------------


async def test_a_frame_dripped_a_byte_at_a_time_is_closed_once_late_but_slow_clients_are_not() -> None:
    async with run_namesrv(server_partial_frame_timeout_millis=400) as ns:
        frame = encode(probe_request("nameserver"))
        dripper = raw_socket(ns.address)
        piecemeal = raw_socket(ns.address)  # whole frames in pieces: each completes in time
        chatty = RemotingClient()
        try:
            assert ns.server.partial_frame_timeout == 0.4
            for n in range(60):  # a byte every 20 ms: the idle timer (120 s) never fires
                if closed_by_peer(dripper):
                    break
                with contextlib.suppress(OSError):
                    dripper.send(frame[n % len(frame) : n % len(frame) + 1])
                # A frame split over two sends 20 ms apart, then the next one.
                half = len(frame) // 2
                piecemeal.send(frame[:half] if n % 2 == 0 else frame[half:])
                if n % 5 == 0:
                    await chatty.invoke(ns.address, probe_request("nameserver"))
                await asyncio.sleep(0.02)
            else:
                await eventually(lambda: closed_by_peer(dripper), timeout=3)
            assert not closed_by_peer(piecemeal)
            assert chatty.connections
            await eventually(lambda: len(ns.server.connections) == 2)  # piecemeal and chatty
        finally:
            dripper.close()
            piecemeal.close()
            await chatty.close()


def test_the_protections_have_defaults_and_are_set_from_the_config_files(tmp_path: Path) -> None:
    for config in (NamesrvConfig(), BrokerConfig()):
        assert config.write_buffer_high_water_mark == 256 * 1024
        assert config.write_buffer_low_water_mark == 64 * 1024
        assert config.server_partial_frames_max_bytes == 64 * MiB
        assert config.server_partial_frame_timeout_millis == 30_000
        assert config.server_channel_max_idle_time_seconds == 120

    async def defaults() -> None:
        async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
            for server in (ns.server, broker.server):
                assert server.partial_frame_timeout == 30.0
                assert server.idle_timeout == 120
                assert server.write_buffer_limits == (256 * 1024, 64 * 1024)
                assert server.partial_frames_max_bytes == 64 * MiB

    asyncio.run(defaults())

    # broker.conf keys reach the broker's server.
    broker_conf = {
        "storePathRootDir": str(tmp_path / "conf-store"),
        "writeBufferHighWaterMark": "131072",
        "writeBufferLowWaterMark": "32768",
        "serverPartialFramesMaxBytes": str(32 * MiB),
        "maxFrameSizeBytes": str(8 * MiB),
        "serverPartialFrameTimeoutMillis": "5000",
    }
    config, store_config, unknown = load_broker_config(broker_conf)
    assert unknown == []
    server = BrokerController(config, store_config).server
    assert server.write_buffer_limits == (131072, 32768)
    assert server.partial_frames_max_bytes == 32 * MiB
    assert server.partial_frame_timeout == 5.0

    # namesrv.conf keys reach the running process: a dripped frame is closed after 300 ms.
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort = 0\nserverPartialFrameTimeoutMillis = 300\n")
    frame = encode(probe_request("nameserver"))
    with cli_server("namesrv", conf) as (_, address):
        dripper = raw_socket(address)
        try:

            async def drip() -> bool:
                for n in range(min(150, len(frame) - 1)):  # a byte every 20 ms, 3 s at most
                    if closed_by_peer(dripper):
                        return True
                    with contextlib.suppress(OSError):
                        dripper.send(frame[n : n + 1])
                    await asyncio.sleep(0.02)
                return False

            assert asyncio.run(drip())
        finally:
            dripper.close()


def test_the_busy_poll_window_is_set_from_the_config_and_zero_turns_it_off(tmp_path: Path) -> None:
    # serverBusyPollMicros (remoting.busypoll): 200 µs by default, for both servers.
    async def check() -> None:
        async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
            assert ns.server.busy_poll.window == broker.server.busy_poll.window == 0.0002
        async with (
            run_namesrv(server_busy_poll_micros=0) as ns,
            run_broker(tmp_path / "store2", ns.address, server_busy_poll_micros=1500) as broker,
        ):
            assert ns.server.busy_poll.window == 0
            assert broker.server.busy_poll.window == 0.0015

    asyncio.run(check())
    config, store_config, unknown = load_broker_config(
        {"storePathRootDir": str(tmp_path / "conf-store"), "serverBusyPollMicros": "0"}
    )
    assert unknown == []
    assert BrokerController(config, store_config).server.busy_poll.window == 0
