"""The proxy process: a grpc.aio server for RocketMQ 5 clients, over an admin client to the
cluster (``start()`` / ``address`` / ``close()``, like the nameserver and the broker).

Where the time goes (bench/proxy.py, py-spy on this 2-core VM): grpcio's own machinery, not
the handlers.  A do-nothing servicer (bench/proxy_stub.py) spends about 400 us of CPU per
unary RPC and about 90 us per streamed ReceiveMessage response; the handlers and the
remoting hop to the broker add 10-20 % to that.  So what a client costs is its number of
gRPC messages: a receive of 32 is 34 streamed responses, and the official Python client
acks each message with an AckMessage of its own.  What was measured here:

- the event loop: ``python -m broker_core proxy`` runs on uvloop (15-20 % less CPU per
  RPC than asyncio's default loop; grpc.aio works on any asyncio loop);
- grpc's synchronous server with a thread pool: no cheaper per RPC than grpc.aio (and the
  handlers are coroutines), so not used;
- server options ``grpc.http2.bdp_probe`` 0, ``grpc.optimization_target`` throughput or
  latency, and grpc-core experiments (``GRPC_EXPERIMENTS``): no change beyond the noise.

Options set for correctness:

- ``grpc.so_reuseport`` off: a second proxy on a port already served fails to start, as our
  other servers do (grpc turns SO_REUSEPORT on by default, and the second one would quietly
  take part of the new connections);
- ``grpc.server.max_pending_requests`` and its hard limit raised from grpc's 1,000 / 3,000
  to ``MAX_PENDING_CALLS``: past those, grpc cancels new calls before the servicer sees
  them.  The official Python client acking a backlog without waiting (two receiving
  threads, bench/proxy.py) had hundreds of its acks CANCELLED that way; it does not retry
  an ack, so each of those messages would have come back after its invisible time.  Now a
  burst waits its turn, each call within its own deadline.
"""

from __future__ import annotations

import logging

import grpc

from broker_core.client.admin import AdminClient
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.service import MessagingService, grpc_svc

log = logging.getLogger(__name__)

# A client's request larger than this is refused by gRPC itself (a 4 MiB body plus headers).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# Calls that may wait for the servicer before grpc cancels new ones (its default is 3,000).
MAX_PENDING_CALLS = 20_000

SERVER_OPTIONS = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # A port already in use is an error, not a port shared with another process.
    ("grpc.so_reuseport", 0),
    # A burst waits its turn (each call within its own deadline) rather than being cancelled.
    ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
    ("grpc.server.max_pending_requests_hard_limit", MAX_PENDING_CALLS),
)


class ProxyServer:
    """Serves ``apache.rocketmq.v2.MessagingService`` for one cluster."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.admin = AdminClient(config.namesrv_addrs, tls=config.tls_client())
        self._server: grpc.aio.Server | None = None
        self._service: MessagingService | None = None
        self.port = config.grpc_server_port

    @property
    def address(self) -> str:
        return f"{self.config.grpc_server_host}:{self.port}"

    async def start(self) -> None:
        server = grpc.aio.server(options=list(SERVER_OPTIONS))
        where = f"{self.config.grpc_server_host}:{self.config.grpc_server_port}"
        try:
            self.port = server.add_insecure_port(where)
        except RuntimeError as exc:  # grpcio raises when the bind fails (older ones answer 0)
            raise OSError(f"cannot listen on {where}: {exc}") from None
        if self.port == 0:
            raise OSError(f"cannot listen on {where}")
        service = MessagingService(self.config, self.admin, (self.config.grpc_server_host, self.port))
        grpc_svc.add_MessagingServiceServicer_to_server(service, server)
        self._service = service
        await server.start()
        self._server = server
        log.info("proxy for cluster %s serving gRPC on %s", self.config.rocket_mq_cluster_name, self.address)

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=1.0)
            self._server = None
        if self._service is not None:
            await self._service.close()
        await self.admin.close()
