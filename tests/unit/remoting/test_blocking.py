"""Blocking connections over real sockets: answers, reconnects, timeouts, bad frames, per-thread sockets.

The server runs on the test's loop; the blocking calls run on worker threads
(``asyncio.to_thread``), as a caller thread of the client would make them.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import AsyncIterator

import pytest

from broker_core.remoting.blocking import BlockingChannels, BlockingConnection
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.connection import Connection
from broker_core.remoting.errors import ConnectionClosedError, RemotingConnectError, RemotingTimeoutError
from broker_core.remoting.server import RemotingServer


def echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    return request.response(body=request.body, remark=conn.remote_address)


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    server = RemotingServer()
    server.register(RequestCode.HEART_BEAT, echo)
    await server.start()
    yield server
    await server.close()


def heartbeat(body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(RequestCode.HEART_BEAT, body=body)


async def test_it_answers_requests_in_turn_on_one_socket(server: RemotingServer) -> None:
    conn = BlockingConnection(server.address, connect_timeout=1.0)

    def run() -> list[RemotingCommand]:
        return [conn.request(heartbeat(b"%d" % n), 2.0) for n in range(50)]

    responses = await asyncio.to_thread(run)
    assert [r.body for r in responses] == [b"%d" % n for n in range(50)]
    assert {r.code for r in responses} == {ResponseCode.SUCCESS}
    assert len({r.remark for r in responses}) == 1  # every answer came over the same socket
    assert [r.opaque for r in responses] == list(range(1, 51))
    conn.close()


async def test_it_reconnects_when_the_peer_closed_the_idle_socket(server: RemotingServer) -> None:
    conn = BlockingConnection(server.address, connect_timeout=1.0)
    first = await asyncio.to_thread(conn.request, heartbeat(), 2.0)
    for server_side in list(server.connections):
        server_side.close("reaped as idle")
    for _ in range(100):
        if not server.connections:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # the FIN reaches the client's socket
    second = await asyncio.to_thread(conn.request, heartbeat(b"again"), 2.0)
    assert second.body == b"again"
    assert second.remark != first.remark  # a new socket (a new client port)
    conn.close()


async def test_a_timeout_closes_the_socket_so_a_late_answer_is_never_taken(server: RemotingServer) -> None:
    release = asyncio.Event()

    async def slow(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        await release.wait()
        return request.response(remark="late")

    server.register(RequestCode.PULL_MESSAGE, slow)
    conn = BlockingConnection(server.address, connect_timeout=1.0)
    with pytest.raises(RemotingTimeoutError, match="within 0.2s"):
        await asyncio.to_thread(conn.request, RemotingCommand.request(RequestCode.PULL_MESSAGE), 0.2)
    assert not conn.connected
    release.set()
    answer = await asyncio.to_thread(conn.request, heartbeat(b"next"), 2.0)
    assert answer.body == b"next" and answer.remark != "late"
    conn.close()


async def test_a_refused_connect_is_a_connect_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: connections are refused
        conn = BlockingConnection(f"127.0.0.1:{port}", connect_timeout=1.0)
        with pytest.raises(RemotingConnectError, match=str(port)):
            await asyncio.to_thread(conn.request, heartbeat(), 1.0)
    with pytest.raises(RemotingConnectError, match="not an ip:port"):
        BlockingConnection("no-port", connect_timeout=1.0)


async def test_a_malformed_answer_is_a_closed_connection_not_a_hang() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(4096)
        writer.write(struct.pack(">ii", 8, 0x7FFFFFF0) + b"junk")  # header length past the frame
        await writer.drain()
        await asyncio.sleep(1)
        writer.close()

    bad = await asyncio.start_server(garbage, "127.0.0.1", 0)
    port = bad.sockets[0].getsockname()[1]
    conn = BlockingConnection(f"127.0.0.1:{port}", connect_timeout=1.0)
    try:
        with pytest.raises(ConnectionClosedError, match="bad frame"):
            await asyncio.to_thread(conn.request, heartbeat(), 2.0)
        assert not conn.connected
    finally:
        bad.close()
        await bad.wait_closed()


async def test_channels_give_each_thread_its_own_socket_and_close_them_all(server: RemotingServer) -> None:
    channels = BlockingChannels(connect_timeout=1.0)
    both_connected = threading.Barrier(2, timeout=5)
    remarks: list[str] = []
    hold = threading.Event()

    def two_requests() -> None:
        conn = channels.connection(server.address)
        assert channels.connection(server.address) is conn  # the same thread: the same one
        remarks.append(conn.request(heartbeat(), 2.0).remark or "")
        both_connected.wait()  # neither thread ends before the other has its socket
        remarks.append(conn.request(heartbeat(), 2.0).remark or "")
        hold.wait(5)  # alive (its sockets with it) until the pool has been closed

    threads = [threading.Thread(target=two_requests) for _ in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(500):
        if len(remarks) == 4:
            break
        await asyncio.sleep(0.01)
    assert len(remarks) == 4 and len(set(remarks)) == 2  # two threads, two sockets, each kept
    assert len(server.connections) == 2
    channels.close()  # closes the sockets of threads that are still running
    for _ in range(100):
        if not server.connections:
            break
        await asyncio.sleep(0.01)
    assert not server.connections
    hold.set()
    await asyncio.to_thread(lambda: [thread.join(5) for thread in threads])
    with pytest.raises(RemotingConnectError, match="closed"):
        channels.connection(server.address)


async def test_a_peer_that_never_reads_makes_a_big_request_time_out_not_hang() -> None:
    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.pause_reading()  # the socket's buffers fill and stay full
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(deaf, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = BlockingConnection(f"127.0.0.1:{port}", connect_timeout=1.0)
    try:
        with pytest.raises(RemotingTimeoutError):
            await asyncio.to_thread(conn.request, heartbeat(b"x" * (64 << 20)), 0.5)
        assert not conn.connected
    finally:
        conn.close()
        server.close()
        await server.wait_closed()
