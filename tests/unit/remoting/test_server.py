"""The server over real sockets on 127.0.0.1: dispatch, errors, hostile peers, shutdown."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator

import pytest

from broker_core.errors import TopicNotExistError
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker_core.remoting.command import FrameDecoder, RemotingCommand, decode, encode
from broker_core.remoting.connection import Connection
from broker_core.remoting.errors import ConnectionClosedError
from broker_core.remoting.server import RemotingServer
from tests.unit.remoting.conftest import captured_requests, frame_of


async def echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
    return request.response(ext_fields={"echo": request.ext_fields.get("n", "")}, body=request.body)


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    server = RemotingServer(max_frame_size=64 * 1024)
    server.register(RequestCode.HEART_BEAT, echo)
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    yield client
    await client.close()


async def eventually(predicate, timeout: float = 2.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def read_frames(reader: asyncio.StreamReader, count: int) -> list[RemotingCommand]:
    decoder, got = FrameDecoder(), []
    async with asyncio.timeout(2):
        while len(got) < count:
            data = await reader.read(65536)
            assert data, "the server closed the connection"
            got += decoder.feed(data)
    return got


async def test_it_answers_200_concurrent_requests_on_one_connection_out_of_order(
    server: RemotingServer, client: RemotingClient
) -> None:
    finished: list[int] = []

    async def slow_echo(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        n = int(request.ext_fields["n"])
        await asyncio.sleep((200 - n) * 0.0005)  # later requests finish first
        finished.append(n)
        return request.response(ext_fields={"echo": str(n)})

    server.register(RequestCode.PULL_MESSAGE, slow_echo)
    requests = [RemotingCommand.request(RequestCode.PULL_MESSAGE, {"n": str(n)}) for n in range(200)]
    responses = await asyncio.gather(*(client.invoke(server.address, r) for r in requests))
    assert [r.ext_fields["echo"] for r in responses] == [str(n) for n in range(200)]
    assert [r.opaque for r in responses] == [r.opaque for r in requests]
    assert finished != sorted(finished)
    assert len(server.connections) == 1


async def test_it_answers_an_unknown_code_with_request_code_not_supported(
    server: RemotingServer, client: RemotingClient
) -> None:
    response = await client.invoke(server.address, RemotingCommand.request(999))
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == "request type 999 not supported"


async def test_it_answers_a_failing_handler_with_system_error_and_stays_up(
    server: RemotingServer, client: RemotingClient
) -> None:
    def broken(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        raise RuntimeError("the disk is on fire")

    async def broken_later(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        await asyncio.sleep(0)
        raise KeyError("no such queue")

    server.register(RequestCode.SEND_MESSAGE, broken)
    server.register(RequestCode.PULL_MESSAGE, broken_later)
    sync_failure = await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE))
    assert (sync_failure.code, sync_failure.remark) == (ResponseCode.SYSTEM_ERROR, "the disk is on fire")
    async_failure = await client.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE))
    assert async_failure.code == ResponseCode.SYSTEM_ERROR and "no such queue" in (async_failure.remark or "")
    ok = await client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT, {"n": "1"}))
    assert (ok.code, ok.ext_fields) == (ResponseCode.SUCCESS, {"echo": "1"})


async def test_it_answers_a_response_error_with_its_own_code(
    server: RemotingServer, client: RemotingClient
) -> None:
    def no_route(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        raise TopicNotExistError("No topic route info in name server for the topic: T")

    server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, no_route)
    response = await client.invoke(
        server.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    )
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark == "No topic route info in name server for the topic: T"


async def test_it_runs_plain_handlers_and_sends_nothing_for_none(server: RemotingServer) -> None:
    seen: list[int] = []

    def quiet(request: RemotingCommand, conn: Connection) -> None:
        seen.append(request.opaque)

    server.register(RequestCode.END_TRANSACTION, quiet)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(encode(RemotingCommand(RequestCode.END_TRANSACTION, opaque=1)))
    writer.write(encode(RemotingCommand(RequestCode.HEART_BEAT, opaque=2)))
    [response] = await read_frames(reader, 1)
    assert response.opaque == 2 and seen == [1]
    writer.close()


async def test_it_never_answers_a_oneway_request(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(encode(RemotingCommand(RequestCode.HEART_BEAT, opaque=1, flag=2)))
    writer.write(encode(RemotingCommand(999, opaque=2, flag=2)))
    writer.write(encode(RemotingCommand(RequestCode.HEART_BEAT, opaque=3)))
    [response] = await read_frames(reader, 1)
    assert response.opaque == 3
    writer.close()


async def test_it_answers_a_cpp_request_in_json_with_string_ext_fields(server: RemotingServer) -> None:
    def send_ok(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        return request.response(
            ext_fields={"msgId": "7F00000100004DC70000000000000000", "queueId": 0, "queueOffset": 7}
        )  # type: ignore[dict-item]

    server.register(RequestCode.SEND_MESSAGE, send_ok)
    send = next(
        line
        for line in captured_requests("producer-consumer-all.jsonl")
        if '"code":10,' in line["header_raw"]
    )
    frame, _ = frame_of(send)
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">I", len(frame)) + frame)
    prefix = await reader.readexactly(8)
    total, word = struct.unpack(">II", prefix)
    assert word >> 24 == 0  # JSON, as the C++ client requires
    header = await reader.readexactly(word)
    assert (
        b'"extFields":{"msgId":"7F00000100004DC70000000000000000","queueId":"0","queueOffset":"7"}' in header
    )
    assert total == 4 + word
    writer.close()


async def test_it_answers_a_binary_request_in_binary(server: RemotingServer) -> None:
    request = RemotingCommand(
        RequestCode.HEART_BEAT, "JAVA", 401, 12, ext_fields={"n": "5"}, serialize_type=SerializeType.ROCKETMQ
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(encode(request))
    prefix = await reader.readexactly(4)
    rest = await reader.readexactly(struct.unpack(">I", prefix)[0])
    assert rest[0] == SerializeType.ROCKETMQ
    response = decode(rest)
    assert (response.opaque, response.ext_fields, response.serialize_type) == (
        12,
        {"echo": "5"},
        SerializeType.ROCKETMQ,
    )
    writer.close()


async def test_it_disconnects_a_client_sending_garbage_and_keeps_serving_others(
    server: RemotingServer, client: RemotingClient
) -> None:
    assert (await client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT))).code == 0
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">II", 9, 5) + b"nope!")
    async with asyncio.timeout(2):
        assert await reader.read() == b""  # EOF: the server hung up
    writer.close()
    for n in range(3):
        response = await client.invoke(
            server.address, RemotingCommand.request(RequestCode.HEART_BEAT, {"n": str(n)})
        )
        assert response.ext_fields == {"echo": str(n)}
    await eventually(lambda: len(server.connections) == 1)


async def test_it_forgets_a_client_that_sends_half_a_frame_and_vanishes(server: RemotingServer) -> None:
    frame = encode(RemotingCommand(RequestCode.HEART_BEAT, body=b"x" * 1000))
    _, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(frame[: len(frame) // 2])
    await writer.drain()
    await eventually(lambda: len(server.connections) == 1)
    [conn] = server.connections
    await eventually(lambda: conn._decoder.buffered == len(frame) // 2)
    writer.close()
    await eventually(lambda: not server.connections)
    assert conn.closed


async def test_it_closes_on_an_oversized_length_prefix_without_waiting_for_the_frame(
    server: RemotingServer,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">I", 0x7FFFFFF0) + b"\x00" * 100)  # claims ~2 GB, sends 100 bytes
    async with asyncio.timeout(2):
        assert await reader.read() == b""
    writer.close()
    await eventually(lambda: not server.connections)


async def test_it_bounds_a_partial_frame_by_the_max_frame_size(server: RemotingServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(struct.pack(">I", 64 * 1024))  # 4 bytes over the server's 64 KiB limit
    async with asyncio.timeout(2):
        assert await reader.read() == b""
    writer.close()


async def test_it_cancels_running_handlers_and_fails_their_callers_on_close(client: RemotingClient) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def forever(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return request.response()

    server = RemotingServer()
    server.register(RequestCode.PULL_MESSAGE, forever)
    await server.start()
    call = asyncio.ensure_future(
        client.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=10)
    )
    await started.wait()
    await server.close()
    assert cancelled.is_set()
    assert not server.connections
    with pytest.raises(ConnectionClosedError):
        await call


async def test_it_pauses_reading_from_a_connection_past_its_inflight_limit(client: RemotingClient) -> None:
    gate = asyncio.Event()
    running: list[str] = []

    async def held(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        running.append(request.ext_fields["wave"])
        await gate.wait()
        return request.response()

    def wave(name: str) -> list[asyncio.Future[RemotingCommand]]:
        return [
            asyncio.ensure_future(
                client.invoke(
                    server.address,
                    RemotingCommand.request(RequestCode.PULL_MESSAGE, {"wave": name}),
                    timeout=5,
                )
            )
            for _ in range(20)
        ]

    server = RemotingServer(max_inflight_per_connection=10)
    server.register(RequestCode.PULL_MESSAGE, held)
    await server.start()
    try:
        first = wave("first")
        await eventually(lambda: len(running) >= 10)
        await asyncio.sleep(0.05)
        second = wave("second")
        await asyncio.sleep(0.1)
        assert "second" not in running  # reading paused: the second wave waits in the socket
        gate.set()
        assert all(r.code == 0 for r in await asyncio.gather(*first, *second))
        assert len(running) == 40
    finally:
        await server.close()


async def test_it_answers_the_good_frames_that_came_with_a_bad_one_then_hangs_up(
    server: RemotingServer,
) -> None:
    good = []
    for n in range(3):
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {"n": str(n)})
        request.opaque = n + 1
        good.append(encode(request))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"".join(good) + struct.pack(">II", 9, 5) + b"nope!")  # one read, garbage last
    answers = await read_frames(reader, 3)
    assert [a.ext_fields["echo"] for a in answers] == ["0", "1", "2"]
    async with asyncio.timeout(2):
        assert await reader.read() == b""
    writer.close()


async def test_it_closes_idle_connections_but_not_busy_or_talking_ones() -> None:
    release = asyncio.Event()

    async def hold(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        await release.wait()
        return request.response()

    server = RemotingServer(idle_timeout=0.5)
    server.register(RequestCode.HEART_BEAT, echo)
    server.register(RequestCode.PULL_MESSAGE, hold)
    await server.start()
    idle, busy, chatty = RemotingClient(), RemotingClient(), RemotingClient()
    try:
        assert (await idle.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT))).code == 0
        held = asyncio.ensure_future(
            busy.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=5)
        )
        for _ in range(15):  # 1.5 s of a request every 0.1 s
            await chatty.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT))
            await asyncio.sleep(0.1)
        assert not idle.connections  # closed by the server
        assert chatty.connections and busy.connections and not held.done()
        release.set()
        assert (await held).code == 0
    finally:
        for client in (idle, busy, chatty):
            await client.close()
        await server.close()


async def test_it_answers_from_a_future_a_plain_handler_returns_once_it_is_done(
    client: RemotingClient,
) -> None:
    # SendProcessor's SYNC_FLUSH path: the answer waits for the disk, without a task per send.
    pending: list[tuple[RemotingCommand, asyncio.Future[RemotingCommand | None]]] = []

    def later(request: RemotingCommand, conn: Connection) -> asyncio.Future[RemotingCommand | None]:
        future: asyncio.Future[RemotingCommand | None] = asyncio.get_running_loop().create_future()
        pending.append((request, future))
        return future

    server = RemotingServer()
    server.register(RequestCode.SEND_MESSAGE, later)
    await server.start()
    try:

        def send(n: int) -> asyncio.Future[RemotingCommand]:
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"n": str(n)})
            return asyncio.ensure_future(client.invoke(server.address, request, timeout=5))

        calls = [send(n) for n in range(6)]
        await eventually(lambda: len(pending) == 6)
        [conn] = server.connections
        assert conn._inflight == 6 and len(server._dispatcher.tasks) == 6  # counted as running
        assert not any(call.done() for call in calls)
        _request, fails = pending[1]
        fails.set_exception(RuntimeError("the disk went away"))
        for request, future in pending[:1] + pending[2:]:
            future.set_result(request.response(ext_fields={"n": request.ext_fields["n"]}))
        answers = await asyncio.gather(*calls)
        assert [a.ext_fields.get("n") for a in answers] == ["0", None, "2", "3", "4", "5"]
        assert answers[1].code == ResponseCode.SYSTEM_ERROR and "the disk went away" in (
            answers[1].remark or ""
        )
        assert not server._dispatcher.tasks and conn._inflight == 0
    finally:
        await server.close()


async def test_it_drops_an_unanswered_future_at_close_and_fails_its_caller(client: RemotingClient) -> None:
    futures: list[asyncio.Future[RemotingCommand | None]] = []

    def never(request: RemotingCommand, conn: Connection) -> asyncio.Future[RemotingCommand | None]:
        futures.append(asyncio.get_running_loop().create_future())
        return futures[-1]

    server = RemotingServer()
    server.register(RequestCode.SEND_MESSAGE, never)
    await server.start()
    call = asyncio.ensure_future(
        client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), timeout=10)
    )
    await eventually(lambda: bool(futures))
    await server.close()
    assert futures[0].cancelled()
    assert not server._dispatcher.tasks
    with pytest.raises(ConnectionClosedError):
        await call
