"""The proxy process: a grpc.aio server for RocketMQ 5 clients, over an admin client to the
cluster (``start()`` / ``address`` / ``close()``, like the nameserver and the broker)."""

from __future__ import annotations

import logging

import grpc

from broker_core.client.admin import AdminClient
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.service import MessagingService, grpc_svc

log = logging.getLogger(__name__)

# A client's request larger than this is refused by gRPC itself (a 4 MiB body plus headers).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class ProxyServer:
    """Serves ``apache.rocketmq.v2.MessagingService`` for one cluster."""

    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self.admin = AdminClient(config.namesrv_addrs)
        self._server: grpc.aio.Server | None = None
        self._service: MessagingService | None = None
        self.port = config.grpc_server_port

    @property
    def address(self) -> str:
        return f"{self.config.grpc_server_host}:{self.port}"

    async def start(self) -> None:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ]
        )
        self.port = server.add_insecure_port(f"{self.config.grpc_server_host}:{self.config.grpc_server_port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {self.config.grpc_server_host}:{self.config.grpc_server_port}")
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
