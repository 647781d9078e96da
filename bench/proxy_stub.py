"""A do-nothing ``apache.rocketmq.v2.MessagingService``: the ceiling of a RocketMQ 5 client.

    .venv/bin/python bench/proxy_stub.py [--server aio|uvloop|sync] [--port 0]

bench/proxy.py runs the official Python client against this as well as against the proxy:
what the client and the gRPC hop cost with no broker and no proxy logic behind them.  It
prints ``listening on HOST:PORT`` once it serves (as our servers do), then answers at once:

- QueryRoute: 8 READ_WRITE queues of broker ``stub`` at its own address, every type accepted;
- Telemetry: the client's Settings back, with a producer's backoff policy;
- Heartbeat, NotifyClientTermination: OK;
- SendMessage: OK per message, its id, offset 0;
- ReceiveMessage: status, delivery time and ``batch_size`` ready-made 1 KiB messages (MD5
  digest, tag, keys, a receipt handle the size of the proxy's) every time;
- AckMessage: OK per entry.

``--server``: grpc.aio on asyncio's default loop (the proxy's setting), grpc.aio on uvloop,
or grpcio's synchronous server with a pool of 8 threads: the same handlers each way.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker_core.proxy.convert import duration, timestamp  # noqa: E402
from broker_core.proxy.stubs import load  # noqa: E402

pb, svc, grpc_svc = load()

BODY = b"x" * 1024
HANDLE = "stub-handle-" + "0" * 90  # about the length of the proxy's encoded receipt handles
TYPES = [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]


def ok() -> Any:
    return pb.Status(code=pb.OK, message="OK")


class Answers:
    """The ready answers, shared by the async and the sync servicer."""

    def __init__(self, host: str, port: int) -> None:
        self.endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=port)])
        self.offset = 0
        digest = pb.Digest(type=pb.MD5, checksum=hashlib.md5(BODY).hexdigest().upper())  # noqa: S324
        self.message = pb.Message(
            topic=pb.Resource(name="stub"),
            body=BODY,
            system_properties=pb.SystemProperties(
                message_id="0" * 32,
                tag="T",
                keys=["k1"],
                body_digest=digest,
                body_encoding=pb.IDENTITY,
                message_type=pb.NORMAL,
                born_timestamp=timestamp(0),
                born_host="127.0.0.1",
                store_timestamp=timestamp(0),
                store_host="127.0.0.1:10911",
                receipt_handle=HANDLE,
                queue_id=0,
                queue_offset=0,
                invisible_duration=duration(60_000),
                delivery_attempt=1,
            ),
        )

    def route(self, request: Any) -> Any:
        queues = [
            pb.MessageQueue(
                topic=request.topic,
                id=i,
                permission=pb.READ_WRITE,
                broker=pb.Broker(name="stub", id=0, endpoints=self.endpoints),
                accept_message_types=TYPES,
            )
            for i in range(8)
        ]
        return svc.QueryRouteResponse(status=ok(), message_queues=queues)

    def settings(self, command: Any) -> Any:
        answer = pb.Settings()
        answer.CopyFrom(command.settings)
        if not command.settings.HasField("subscription"):
            answer.publishing.max_body_size = 4 * 1024 * 1024
            answer.backoff_policy.CopyFrom(
                pb.RetryPolicy(
                    max_attempts=3,
                    exponential_backoff=pb.ExponentialBackoff(
                        initial=duration(10), max=duration(1000), multiplier=2.0
                    ),
                )
            )
        return svc.TelemetryCommand(status=ok(), settings=answer)

    def send(self, request: Any) -> Any:
        entries = [
            svc.SendResultEntry(status=ok(), message_id=m.system_properties.message_id, offset=0)
            for m in request.messages
        ]
        return svc.SendMessageResponse(status=ok(), entries=entries)

    def receive(self, request: Any) -> list[Any]:
        message = pb.Message()
        message.CopyFrom(self.message)
        message.topic.name = request.message_queue.topic.name
        out = [
            svc.ReceiveMessageResponse(status=ok()),
            svc.ReceiveMessageResponse(delivery_timestamp=timestamp(0)),
        ]
        out += [svc.ReceiveMessageResponse(message=message) for _ in range(request.batch_size or 1)]
        return out

    def ack(self, request: Any) -> Any:
        entries = [
            svc.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok())
            for e in request.entries
        ]
        return svc.AckMessageResponse(status=ok(), entries=entries)


_Servicer: Any = grpc_svc.MessagingServiceServicer


class AsyncStub(_Servicer):  # type: ignore[misc]
    def __init__(self, answers: Answers) -> None:
        self.a = answers

    async def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.a.route(request)

    async def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        return svc.HeartbeatResponse(status=ok())

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        return svc.NotifyClientTerminationResponse(status=ok())

    async def Telemetry(self, request_iterator: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:  # noqa: N802
        async for command in request_iterator:
            if command.HasField("settings"):
                yield self.a.settings(command)

    async def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.a.send(request)

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:  # noqa: N802
        for response in self.a.receive(request):
            yield response

    async def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.a.ack(request)


class SyncStub(_Servicer):  # type: ignore[misc]
    def __init__(self, answers: Answers) -> None:
        self.a = answers

    def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.a.route(request)

    def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        return svc.HeartbeatResponse(status=ok())

    def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        return svc.NotifyClientTerminationResponse(status=ok())

    def Telemetry(self, request_iterator: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        for command in request_iterator:
            if command.HasField("settings"):
                yield self.a.settings(command)

    def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.a.send(request)

    def ReceiveMessage(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        yield from self.a.receive(request)

    def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self.a.ack(request)


async def serve_aio(port: int) -> None:
    server = grpc.aio.server()
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    grpc_svc.add_MessagingServiceServicer_to_server(AsyncStub(Answers("127.0.0.1", bound)), server)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"listening on 127.0.0.1:{bound}", flush=True)
    await stop.wait()
    await server.stop(grace=0.5)


def serve_sync(port: int) -> None:
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    grpc_svc.add_MessagingServiceServicer_to_server(SyncStub(Answers("127.0.0.1", bound)), server)
    server.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"listening on 127.0.0.1:{bound}", flush=True)
    while not stop.wait(0.5):
        pass
    server.stop(grace=0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("aio", "uvloop", "sync"), default="aio")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.server == "sync":
        serve_sync(args.port)
    elif args.server == "uvloop":
        import uvloop

        uvloop.run(serve_aio(args.port))
    else:
        asyncio.run(serve_aio(args.port))


if __name__ == "__main__":
    main()
