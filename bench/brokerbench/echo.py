"""The echo server (child role ``echo``): the broker's remoting layer with nothing behind it.

It answers sends and pulls at once with responses of the broker's shape and stores
nothing, and it is its own nameserver, so every load (raw frames, the official client,
ours) can run against it as against the broker: the broker/echo ratio is what storing
costs.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

from broker_core.model.message import MessageInner, encode_host
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand

from .frames import BATCH, BODY_BYTES, PULL_BATCH, QUEUES, TOPIC, send_properties


def echo_pull_body() -> bytes:
    """32 records shaped like the benchmark's stored messages (what a broker pull returns)."""
    body = b"q" * BODY_BYTES
    records = []
    for i in range(PULL_BATCH):
        msg = MessageInner(
            TOPIC,
            0,
            body,
            properties_raw=send_properties(b"%016X" % i),
            born_host="127.0.0.1:50000",
        )
        records.append(bytes(msg.encode(encode_host("127.0.0.1:10911"))))
    return b"".join(records)


def echo_as_nameserver(server: Any) -> None:
    """Let the echo server be its own nameserver: routes for TOPIC point at itself.

    So the official client can send to it as to a broker (heartbeats and other requests
    are simply acknowledged).
    """
    from broker_core.namesrv.processors import NamesrvProcessor
    from broker_core.namesrv.routeinfo import RouteInfoManager
    from broker_core.store.configfile import DataVersion

    routes = RouteInfoManager(clock_ms=lambda: time.time_ns() // 1_000_000)
    topic = {"readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
    routes.register_broker(
        "EchoCluster", server.address, "echo", 0, "", DataVersion(0, 0), {TOPIC: topic}, [], None
    )
    names = NamesrvProcessor(routes)
    server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, names.get_route)
    server.register_default(lambda request, conn: request.response(ResponseCode.SUCCESS))


def echo_main() -> None:
    """Child process: a RemotingServer that answers sends and pulls at once, storing nothing.

    Its answers have the broker's shape (a send's msgId/queueId/queueOffset fields, one
    msgId per batch item; a pull's 32 records and offsets), so the broker/echo ratio is
    what storing costs over the same remoting layer.
    """
    import uvloop

    from broker_core.remoting.server import RemotingServer

    msg_id = "7F0000010000" + "0" * 20
    pull_body = echo_pull_body()

    def on_send(request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        # SEND_MESSAGE (the C++ client) names its fields; SEND_MESSAGE_V2 and
        # SEND_BATCH_MESSAGE (ours, as Java's) use the one-letter names.
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or fields.get("batch") in ("1", "true")
        return request.response(
            ResponseCode.SUCCESS,
            None,
            ext_fields={
                "msgId": ",".join([msg_id] * BATCH) if batch else msg_id,
                "queueId": fields.get("queueId") or fields.get("e") or "0",
                "queueOffset": "0",
                "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true",
            },
        )

    def on_pull(request: RemotingCommand, conn: Any) -> RemotingCommand:
        offset = int(request.ext_fields.get("queueOffset") or 0)
        return request.response(
            ResponseCode.SUCCESS,
            None,
            ext_fields={
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": str(offset + PULL_BATCH),
                "minOffset": "0",
                "maxOffset": str(offset + PULL_BATCH),
            },
            body=pull_body,
        )

    async def serve() -> None:
        server = RemotingServer("127.0.0.1", 0)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            server.register(code, on_send)
        server.register(RequestCode.PULL_MESSAGE, on_pull)
        await server.start()
        echo_as_nameserver(server)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"listening on {server.address}", flush=True)
        await stop.wait()
        await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve())
