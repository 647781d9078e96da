"""``broker_core.proxy.server``: the proxy's gRPC server itself (no client library needed)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.server import ProxyServer
from broker_core.proxy.stubs import load


async def test_a_second_proxy_on_a_port_in_use_fails_to_start() -> None:
    """grpc turns SO_REUSEPORT on by default: without the server's option a second proxy
    would bind the same port and quietly take part of the new connections."""
    first = ProxyServer(ProxyConfig(namesrv_addr="127.0.0.1:9", grpc_server_port=0))
    await first.start()
    try:
        port = first.port
        assert port > 0
        second = ProxyServer(ProxyConfig(namesrv_addr="127.0.0.1:9", grpc_server_port=port))
        with pytest.raises(OSError, match=f"cannot listen on .*:{port}"):
            await second.start()
        await second.close()
    finally:
        await first.close()


async def test_a_burst_of_calls_waits_its_turn_rather_than_being_cancelled() -> None:
    """5,000 calls at once (a consumer acking each message of a backlog without waiting
    does this): grpc's default cancels new calls once 3,000 wait for the servicer, and the
    v5 clients do not retry an ack (its message would come back)."""
    pb, svc, grpc_svc = load()
    proxy = ProxyServer(ProxyConfig(namesrv_addr="127.0.0.1:9", grpc_server_port=0))
    await proxy.start()
    try:
        async with grpc.aio.insecure_channel(proxy.address) as channel:
            stub = grpc_svc.MessagingServiceStub(channel)
            calls = [stub.RecallMessage(svc.RecallMessageRequest(), timeout=60) for _ in range(5000)]
            answers = await asyncio.gather(*calls, return_exceptions=True)
        failed = [a for a in answers if isinstance(a, Exception)]
        assert not failed, f"{len(failed)} calls failed, e.g. {failed[0]}"
    finally:
        await proxy.close()
