"""The loopback ceiling: a do-nothing uvloop server answering each frame, one at a time.

It is not a broker: it stores nothing and parses nothing but the 4-byte length prefix.
A child process of the scenario's child runs it; the client is a blocking socket that
writes one SEND_MESSAGE_V2 frame (as our producer encodes it, 1 KiB body) and reads the
answer (a send response of the broker's size).  What one Python thread gets that way is
the most any one-at-a-time request can get from this machine's loopback, kernel and two
processes' wake-ups: the sync-send figures of the brokers are read against it.  Only the
``sync`` scenario runs here (``workload.SCENARIOS_OF``).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import time
from typing import Any

from ..measure import loop
from ..workload import BODY, Settings, Unavailable


def frames() -> tuple[bytes, bytes]:
    """A send request and its answer, as our client and broker put them on the wire."""
    from broker_core.client.requests import send_message_request
    from broker_core.remoting.command import RemotingCommand, encode
    from broker_core.remoting.headers import SendMessageRequestHeader

    header = SendMessageRequestHeader(
        "PeersProducer", "quiver_peers_echo", "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
        "UNIQ_KEY\x017F00000100002A9F0000000000000001\x02WAIT\x01true", 0,
        unit_mode=False, max_reconsume_times=None, batch=False, broker_name="broker-a",
    )  # fmt: skip
    request = send_message_request(header, BODY)
    request.opaque = 1
    answer = RemotingCommand(
        0,
        opaque=1,
        flag=1,
        ext_fields={"msgId": "7F00000100002A9F00000000000ABCDE", "queueId": "3", "queueOffset": "12345"},
    )
    return encode(request), encode(answer)


def serve(port_out: Any, answer: bytes) -> None:
    """Child process: answer every whole frame with ``answer``, and nothing else."""
    import uvloop

    class Echo(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport
            self.buffer = b""
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def data_received(self, data: bytes) -> None:
            buffer = self.buffer + data if self.buffer else data
            while len(buffer) >= 4:
                end = 4 + int.from_bytes(buffer[:4], "big")
                if len(buffer) < end:
                    break
                buffer = buffer[end:]
                self.transport.write(answer)
            self.buffer = buffer

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0)
        port_out.send(server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    uvloop.run(main())


class EchoCeiling:
    """A uvloop echo and a blocking-socket client: the one-at-a-time round trip's ceiling."""

    creates_own_topic = True

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            import uvloop  # noqa: F401
        except ImportError as exc:
            raise Unavailable(f"uvloop not installed: {exc}") from None

    def describe(self) -> dict[str, Any]:
        import uvloop

        return {
            "server": f"a do-nothing uvloop {uvloop.__version__} server in its own process, "
            "answering each frame with a send response",
            "client": "a blocking socket in one thread: one 1 KiB send frame out, its answer in",
            "durability": "none: nothing is stored or parsed (the loopback round trip's ceiling)",
        }

    def create(self) -> None:
        pass

    def delete(self, name: str) -> None:
        pass

    def sync(self, s: Settings) -> dict[str, Any]:
        request, answer = frames()
        receiver, sender = multiprocessing.Pipe(duplex=False)
        server = multiprocessing.get_context("fork").Process(target=serve, args=(sender, answer), daemon=True)
        server.start()
        try:
            if not receiver.poll(30):
                raise Unavailable("the echo server did not start")
            sock = socket.create_connection(("127.0.0.1", receiver.recv()))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buffer = bytearray(65536)
            view = memoryview(buffer)
            size = len(answer)

            def one() -> int:
                sock.sendall(request)
                got = 0
                while got < size:
                    read = sock.recv_into(view[got:])
                    if not read:
                        raise ConnectionError("the echo server closed the connection")
                    got += read
                return 1

            try:
                return loop(s, one)
            finally:
                sock.close()
        finally:
            server.kill()
            server.join(5)

    def sync8(self, s: Settings) -> dict[str, Any]:
        raise Unavailable("the echo measures one-at-a-time round trips only")

    def batch(self, s: Settings) -> dict[str, Any]:
        raise Unavailable("the echo measures one-at-a-time round trips only")

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        raise Unavailable("the echo measures one-at-a-time round trips only")

    def latency(self, s: Settings) -> dict[str, Any]:
        raise Unavailable("the echo measures one-at-a-time round trips only")
