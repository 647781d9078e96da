"""The client over real sockets: connection reuse, timeouts, errors, server-to-client requests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.connection import Connection
from broker_core.remoting.errors import ConnectionClosedError, RemotingConnectError, RemotingTimeoutError
from broker_core.remoting.server import RemotingServer


@pytest.fixture
async def server() -> AsyncIterator[RemotingServer]:
    server = RemotingServer()
    server.register(RequestCode.HEART_BEAT, lambda request, conn: request.response(body=request.body))
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient(connect_timeout=1.0)
    yield client
    await client.close()


async def test_it_reuses_one_connection_for_many_invokes(
    server: RemotingServer, client: RemotingClient
) -> None:
    for n in range(20):
        response = await client.invoke(
            server.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=b"%d" % n)
        )
        assert response.body == b"%d" % n
    first_burst = [
        client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT)) for _ in range(50)
    ]
    assert all(r.code == 0 for r in await asyncio.gather(*first_burst))
    assert list(client.connections) == [server.address]
    assert len(server.connections) == 1


async def test_it_shares_one_connect_between_concurrent_first_invokes(server: RemotingServer) -> None:
    client = RemotingClient()
    try:
        calls = [
            client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT)) for _ in range(20)
        ]
        await asyncio.gather(*calls)
        assert len(server.connections) == 1
    finally:
        await client.close()


async def test_it_times_out_and_drops_the_late_response(
    server: RemotingServer, client: RemotingClient
) -> None:
    release = asyncio.Event()
    answered = asyncio.Event()

    async def slow(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        await release.wait()
        answered.set()
        return request.response(remark="late")

    server.register(RequestCode.PULL_MESSAGE, slow)
    with pytest.raises(RemotingTimeoutError):
        await client.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=0.1)
    release.set()
    await answered.wait()
    await asyncio.sleep(0.05)  # let the late response arrive and be dropped
    conn = client.connections[server.address]
    assert not conn.closed and conn._pending == {}
    response = await client.invoke(
        server.address, RemotingCommand.request(RequestCode.HEART_BEAT, body=b"next")
    )
    assert response.body == b"next" and response.remark is None


async def test_it_raises_connect_error_for_an_address_nobody_listens_on(client: RemotingClient) -> None:
    probe = RemotingServer()
    await probe.start()
    address = probe.address
    await probe.close()
    with pytest.raises(RemotingConnectError):
        await client.invoke(address, RemotingCommand.request(RequestCode.HEART_BEAT))
    with pytest.raises(RemotingConnectError):
        await client.invoke("not-an-address", RemotingCommand.request(RequestCode.HEART_BEAT))


async def test_it_fails_pending_requests_when_the_connection_closes(
    server: RemotingServer, client: RemotingClient
) -> None:
    async def hang_up(request: RemotingCommand, conn: Connection) -> None:
        conn.close()

    server.register(RequestCode.PULL_MESSAGE, hang_up)
    with pytest.raises(ConnectionClosedError):
        await client.invoke(server.address, RemotingCommand.request(RequestCode.PULL_MESSAGE), timeout=5)
    response = await client.invoke(
        server.address, RemotingCommand.request(RequestCode.HEART_BEAT)
    )  # reconnects
    assert response.code == ResponseCode.SUCCESS


async def test_it_answers_requests_the_server_sends_back(
    server: RemotingServer, client: RemotingClient
) -> None:
    notified: list[str] = []
    server_side: list[Connection] = []

    def remember(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        server_side.append(conn)
        return request.response()

    def running_info(request: RemotingCommand, conn: Connection) -> RemotingCommand:
        return request.response(body=b'{"group":"%s"}' % request.ext_fields["consumerGroup"].encode())

    def ids_changed(request: RemotingCommand, conn: Connection) -> None:
        notified.append(request.ext_fields["consumerGroup"])

    server.register(RequestCode.UNREGISTER_CLIENT, remember)
    client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
    client.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ids_changed)
    await client.invoke(server.address, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT))
    [conn] = server_side
    info = await conn.request(
        RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "G1"}), timeout=2
    )
    assert (info.code, info.body) == (ResponseCode.SUCCESS, b'{"group":"G1"}')
    assert conn.send_oneway(
        RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G2"})
    )
    async with asyncio.timeout(2):
        while not notified:
            await asyncio.sleep(0.01)
    assert notified == ["G2"]
    unknown = await conn.request(RemotingCommand.request(RequestCode.CONSUME_MESSAGE_DIRECTLY), timeout=2)
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


async def test_it_sends_oneway_requests_without_waiting(
    server: RemotingServer, client: RemotingClient
) -> None:
    got: list[RemotingCommand] = []
    server.register(RequestCode.UPDATE_CONSUMER_OFFSET, lambda request, conn: got.append(request))
    await client.invoke_oneway(
        server.address, RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, {"q": "1"})
    )
    async with asyncio.timeout(2):
        while not got:
            await asyncio.sleep(0.01)
    assert got[0].is_oneway and got[0].ext_fields == {"q": "1"}


async def test_it_refuses_work_after_close(server: RemotingServer) -> None:
    client = RemotingClient()
    await client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT))
    await client.close()
    assert client.connections == {}
    with pytest.raises(RemotingConnectError):
        await client.invoke(server.address, RemotingCommand.request(RequestCode.HEART_BEAT))
