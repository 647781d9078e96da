"""``apache.rocketmq.v2.MessagingService``: what each RPC asks of the brokers, and answers.

The proxy is a client of its cluster like any 4.x client: routes come from the nameservers
(cached, read again on a miss or a failed send), messages go to a broker set's master with
SEND_MESSAGE_V2.  What it serves:

- QueryRoute: the topic's queues as the nameservers route them, each on broker id 0 and at
  the proxy's own endpoints (clients only ever talk to the proxy), with the message types
  the topic's ``message.type`` accepts.
- Telemetry: the settings handshake; a producer's settings come back with RocketMQ's retry
  policy (3 attempts, 10 ms to 1 s backoff, times 2) and body limit, a consumer's with its
  group's FIFO flag and retry policy (``broker_core.proxy.consumption``).
- SendMessage: normal, FIFO (the message group is RocketMQ 5's ``__SHARDINGKEY`` property and
  picks the queue, so one group stays in order) and timer messages
  (``broker_core.proxy.convert`` maps the properties); a message of a type its topic does not
  take is refused when ``enableTopicMessageTypeCheck`` is on (RocketMQ's default).
- SendMessage of TRANSACTION messages (half messages), EndTransaction, and the brokers'
  check-backs relayed to a producer over Telemetry (``broker_core.proxy.transactions``).
- ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue,
  QueryAssignment: pop consumption (``broker_core.proxy.consumption``).
- UpdateOffset, GetOffset, QueryOffset, PullMessage: offsets and pulls by offset
  (``broker_core.proxy.offsets``).
- Heartbeat and NotifyClientTermination register and unregister the client with the
  brokers, so it shows in their connection lists (``broker_core.proxy.clients``).

RecallMessage and SyncLiteSubscription answer NOT_IMPLEMENTED with a sentence saying so, at
once: a client is never left waiting.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import grpc

from broker_core.client.admin import AdminClient
from broker_core.client.routes import TopicRoute
from broker_core.errors import AdminError
from broker_core.model.acl import Account
from broker_core.model.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_PREPARED_TYPE,
    encode_properties,
)
from broker_core.model.messagetype import (
    DELAY,
    FIFO,
    NORMAL,
    SENDABLE_TYPES,
    TRANSACTION,
    UNSPECIFIED,
    accepted_message_types,
    message_type_refusal,
)
from broker_core.model.topicconfig import PERM_READ, PERM_WRITE
from broker_core.proxy.auth import Authenticator, Unauthorized
from broker_core.proxy.clients import PROXY_PRODUCER_GROUP, ClientRegistry, TelemetrySession
from broker_core.proxy.commands import ClientCommands
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.consumption import Consumption
from broker_core.proxy.convert import MessageRefused, duration, status, stored_body, stored_properties
from broker_core.proxy.offsets import OffsetRpcs
from broker_core.proxy.stubs import load
from broker_core.proxy.transactions import TransactionId, Transactions
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader

log = logging.getLogger(__name__)

pb, svc, grpc_svc = load()

ROUTE_TTL_SECONDS = 30.0
# The largest body a producer may send (RocketMQ's maxMessageSize default, 4 MiB).
MAX_BODY_SIZE = 4 * 1024 * 1024
_V2_TYPES = {
    UNSPECIFIED: pb.MESSAGE_TYPE_UNSPECIFIED,
    NORMAL: pb.NORMAL,
    FIFO: pb.FIFO,
    DELAY: pb.DELAY,
    TRANSACTION: pb.TRANSACTION,
}


def _permission(perm: int) -> Any:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return pb.READ_WRITE
    return pb.READ if readable else pb.WRITE if writable else pb.NONE


_Servicer: Any = grpc_svc.MessagingServiceServicer


class MessagingService(_Servicer):  # type: ignore[misc]
    """The RPCs, over one admin client to the cluster."""

    def __init__(self, config: ProxyConfig, admin: AdminClient, endpoint: tuple[str, int]) -> None:
        self.config = config
        self.admin = admin
        self.endpoint = endpoint
        self._routes: dict[str, tuple[TopicRoute, float]] = {}
        self._types: dict[str, tuple[str | None, float]] = {}
        self._turn = itertools.count()
        self.authenticator = Authenticator(config.acl_file) if config.enable_acl else None
        # Per account (key and secret), a client that signs the brokers' requests as it.
        self._signed: dict[tuple[str, str], AdminClient] = {}
        self.consumption = Consumption(self._route, lambda: self._endpoints(None))
        self.offsets = OffsetRpcs(self._route)
        self.registry = ClientRegistry(admin, config.rocket_mq_cluster_name)
        self.transactions = Transactions(self._route, self.registry)
        self.commands = ClientCommands(self.registry)
        self._serve_brokers(admin)

    # -- who calls ------------------------------------------------------------------------------

    def _caller(self, context: grpc.aio.ServicerContext) -> tuple[Account | None, Any]:
        """(the calling account, None) when it may go on, else (None, the UNAUTHORIZED status).

        Without enableACL every call goes on as nobody in particular.
        """
        if self.authenticator is None:
            return None, None
        try:
            return self.authenticator.authenticate(context.invocation_metadata() or ()), None
        except Unauthorized as exc:
            return None, status(pb.UNAUTHORIZED, str(exc))

    def _broker_client(self, account: Account | None) -> AdminClient:
        """The client the brokers' requests go through: signed as ``account`` in RPC hook mode."""
        if account is None or not self.config.enable_acl_rpc_hook_for_cluster_mode:
            return self.admin
        key = (account.access_key, account.secret_key)
        client = self._signed.get(key)
        if client is None:
            client = self._signed[key] = AdminClient(
                self.config.namesrv_addrs,
                access_key=account.access_key,
                secret_key=account.secret_key,
                tls=self.admin.tls,  # the proxy's one context: its files are read once
            )
            self._serve_brokers(client)
        return client

    def _serve_brokers(self, client: AdminClient) -> None:
        """What brokers ask on the proxy's connections, for the v5 clients registered there."""
        client.serve(RequestCode.CHECK_TRANSACTION_STATE, self.transactions.on_check)
        client.serve(RequestCode.GET_CONSUMER_RUNNING_INFO, self.commands.running_info)
        client.serve(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.commands.consume_directly)

    async def close(self) -> None:
        for client in self._signed.values():
            await client.close()

    # -- routes ------------------------------------------------------------------------------

    async def _route(self, topic: str, *, fresh: bool = False) -> TopicRoute:
        cached = self._routes.get(topic)
        if cached is not None and not fresh and time.monotonic() - cached[1] < ROUTE_TTL_SECONDS:
            return cached[0]
        route = await self.admin.topic_route(topic)
        self._routes[topic] = (route, time.monotonic())
        return route

    async def _topic_type(self, topic: str, client: AdminClient, *, fresh: bool = False) -> str | None:
        """The topic's ``message.type`` (``broker_core.model.messagetype``), cached like
        routes; None when the brokers will not say (an ACL broker refusing the proxy's own
        unsigned read): then every type is accepted and left to the brokers."""
        cached = self._types.get(topic)
        if cached is not None and not fresh and time.monotonic() - cached[1] < ROUTE_TTL_SECONDS:
            return cached[0]
        try:
            topic_type: str | None = await client.topic_message_type(topic)
        except AdminError as exc:
            if exc.code != ResponseCode.NO_PERMISSION:
                raise
            log.warning("cannot read topic %s's message type: %s", topic, exc)
            topic_type = None
        self._types[topic] = (topic_type, time.monotonic())
        return topic_type

    def _endpoints(self, requested: Any) -> Any:
        if requested is not None and requested.addresses:
            return requested
        host, port = self.endpoint
        return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=port)])

    async def QueryRoute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        _account, denied = self._caller(context)
        if denied is not None:
            return svc.QueryRouteResponse(status=denied)
        topic = request.topic.name
        try:
            route = await self._route(topic, fresh=True)
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return svc.QueryRouteResponse(
                    status=status(pb.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
                )
            return svc.QueryRouteResponse(status=status(pb.INTERNAL_SERVER_ERROR, str(exc)))
        endpoints = self._endpoints(request.endpoints if request.HasField("endpoints") else None)
        try:
            topic_type = await self._topic_type(topic, self._broker_client(_account), fresh=True)
        except AdminError as exc:
            return svc.QueryRouteResponse(status=status(pb.INTERNAL_SERVER_ERROR, str(exc)))
        types = SENDABLE_TYPES if topic_type is None else accepted_message_types(topic_type)
        accepted = [_V2_TYPES[t] for t in types]
        masters = route.master_addrs()
        queues = [
            pb.MessageQueue(
                topic=request.topic,
                id=queue_id,
                permission=_permission(qd.perm),
                broker=pb.Broker(name=qd.broker_name, id=0, endpoints=endpoints),
                accept_message_types=accepted,
            )
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if qd.broker_name in masters
            for queue_id in range(max(qd.read_queue_nums, qd.write_queue_nums))
        ]
        return svc.QueryRouteResponse(status=status(pb.OK), message_queues=queues)

    # -- clients -----------------------------------------------------------------------------

    async def Heartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        """Keep the client registered with the brokers (``broker_core.proxy.clients``)."""
        account, denied = self._caller(context)
        if denied is not None:
            return svc.HeartbeatResponse(status=denied)
        client = self.registry.client(_metadata(context))
        if request.HasField("group") and request.group.name:
            client.group = request.group.name
        if request.client_type:
            client.client_type = request.client_type
        client.addr = _peer_addr(context.peer())
        await self.registry.register(client, self._broker_client(account))
        return svc.HeartbeatResponse(status=status(pb.OK))

    async def NotifyClientTermination(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.NotifyClientTerminationResponse(status=denied)
        client_id = _metadata(context).get("x-mq-client-id", "")
        await self.registry.unregister(client_id, self._broker_client(account))
        return svc.NotifyClientTerminationResponse(status=status(pb.OK))

    async def Telemetry(  # noqa: N802
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        """The settings handshake both ways (each Settings the client sends comes back
        completed), and what the proxy pushes to the client while the stream is open:
        transaction check-backs (``broker_core.proxy.transactions``)."""
        account, denied = self._caller(context)
        if denied is not None:
            yield svc.TelemetryCommand(status=denied)
            return
        broker_client = self._broker_client(account)
        client = self.registry.client(_metadata(context))
        session = TelemetrySession(client.client_id, asyncio.Queue())
        client.sessions.append(session)

        async def read() -> None:
            try:
                async for command in request_iterator:
                    if self.commands.on_result(command):
                        continue
                    if command.HasField("settings"):
                        self.registry.learn_settings(client, command.settings)
                        if command.settings.HasField("publishing"):
                            session.topics = frozenset(t.name for t in command.settings.publishing.topics)
                        settings = await self._settings(command.settings, broker_client)
                        session.push(svc.TelemetryCommand(status=status(pb.OK), settings=settings))
            finally:
                session.push(None)

        reader = asyncio.create_task(read())
        try:
            while (command := await session.outbox.get()) is not None:
                yield command
        finally:
            reader.cancel()
            client.sessions.remove(session)

    async def _settings(self, settings: Any, client: AdminClient) -> Any:
        answer = pb.Settings()
        answer.CopyFrom(settings)
        if settings.HasField("subscription"):
            await self.consumption.complete_settings(settings, answer, client)
        elif settings.HasField("publishing") or settings.client_type == pb.PRODUCER:
            # The Node client takes its body size limit from here (0 would refuse every send).
            answer.publishing.max_body_size = MAX_BODY_SIZE
            answer.publishing.validate_message_type = self.config.enable_topic_message_type_check
            answer.backoff_policy.CopyFrom(
                pb.RetryPolicy(
                    max_attempts=3,
                    exponential_backoff=pb.ExponentialBackoff(
                        initial=duration(10), max=duration(1000), multiplier=2.0
                    ),
                )
            )
        return answer

    # -- sends ------------------------------------------------------------------------------------

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.SendMessageResponse(status=denied)
        if not request.messages:
            return svc.SendMessageResponse(status=status(pb.BAD_REQUEST, "the request carries no message"))
        sender = self._broker_client(account)
        entries = []
        for message in request.messages:
            entries.append(await self._send_one(message, sender))
        worst = next((e.status for e in entries if e.status.code != pb.OK), status(pb.OK))
        return svc.SendMessageResponse(status=worst, entries=entries)

    async def _send_one(self, message: Any, sender: AdminClient) -> Any:
        system = message.system_properties
        message_id = system.message_id

        def refused(code: int, why: str) -> Any:
            return svc.SendResultEntry(status=status(code, why), message_id=message_id)

        topic = message.topic.name
        try:
            properties = stored_properties(message)
            body = stored_body(message)
        except MessageRefused as exc:
            return refused(exc.code, str(exc))
        transactional = system.message_type == pb.TRANSACTION
        if transactional:
            properties[PROPERTY_TRANSACTION_PREPARED] = "true"
            properties[PROPERTY_PRODUCER_GROUP] = PROXY_PRODUCER_GROUP
        group = properties.get(PROPERTY_SHARDING_KEY, "")
        if self.config.enable_topic_message_type_check:
            try:
                await self._route(topic)  # an unknown topic is TOPIC_NOT_FOUND, not a type
                topic_type = await self._topic_type(topic, sender)
                refusal = None if topic_type is None else message_type_refusal(topic, topic_type, properties)
            except AdminError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    return refused(pb.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
                return refused(pb.INTERNAL_SERVER_ERROR, str(exc))
            if refusal is not None:
                return refused(pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, refusal)
        for attempt in range(2):
            try:
                route = await self._route(topic, fresh=attempt > 0)
                return await self._send_to(
                    sender, route, topic, body, properties, group, message_id, transactional
                )
            except AdminError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    return refused(pb.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist")
                if attempt:
                    return refused(pb.INTERNAL_SERVER_ERROR, str(exc))
            except RemotingError as exc:
                if attempt:
                    return refused(pb.PROXY_TIMEOUT, f"no broker of {topic!r} answered: {exc}")
        return refused(pb.INTERNAL_SERVER_ERROR, "unreachable")  # pragma: no cover

    async def _send_to(
        self,
        sender: AdminClient,
        route: TopicRoute,
        topic: str,
        body: bytes,
        properties: dict[str, str],
        group: str,
        message_id: str,
        transactional: bool = False,
    ) -> Any:
        masters = route.master_addrs()
        writable = [
            (qd.broker_name, queue_id)
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if qd.broker_name in masters and qd.perm & PERM_WRITE
            for queue_id in range(qd.write_queue_nums)
        ]
        if not writable:
            raise AdminError(f"topic {topic!r} has no writable queue on a master")
        # A message group always picks the same queue (one group stays in order), like
        # RocketMQ's proxy; others take the queues in turn.
        pick = zlib.crc32(group.encode()) if group else next(self._turn)
        broker_name, queue_id = writable[pick % len(writable)]
        header = SendMessageRequestHeader(
            PROXY_PRODUCER_GROUP,
            topic,
            queue_id=queue_id,
            sys_flag=TRANSACTION_PREPARED_TYPE if transactional else 0,
            born_timestamp=int(time.time() * 1000),
            properties=encode_properties(properties).decode("utf-8"),
        )
        response = await sender.requests.send_message(masters[broker_name], header, body)
        if response.code != ResponseCode.SUCCESS:
            return svc.SendResultEntry(
                status=status(_send_code(response.code), response.remark or f"refused ({response.code})"),
                message_id=message_id,
            )
        answer = SendMessageResponseHeader.from_fields(response.ext_fields)
        entry = svc.SendResultEntry(status=status(pb.OK), message_id=message_id, offset=answer.queue_offset)
        if transactional:
            entry.transaction_id = TransactionId.of_send(
                broker_name, answer.msg_id, answer.queue_offset
            ).encode()
        return entry

    # -- consumers (broker_core.proxy.consumption) ------------------------------------------------

    async def QueryAssignment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        _account, denied = self._caller(context)
        if denied is not None:
            return svc.QueryAssignmentResponse(status=denied)
        return await self.consumption.query_assignment(request)

    async def ReceiveMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            yield svc.ReceiveMessageResponse(status=denied)
            return
        async for response in self.consumption.receive(request, self._broker_client(account)):
            yield response

    async def AckMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.AckMessageResponse(status=denied)
        return await self.consumption.ack(request, self._broker_client(account))

    async def ChangeInvisibleDuration(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.ChangeInvisibleDurationResponse(status=denied)
        return await self.consumption.change_invisible_duration(request, self._broker_client(account))

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.ForwardMessageToDeadLetterQueueResponse(status=denied)
        return await self.consumption.forward_to_dlq(request, self._broker_client(account))

    async def EndTransaction(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.EndTransactionResponse(status=denied)
        return await self.transactions.end(request, self._broker_client(account))

    # -- offsets and pulls by offset (broker_core.proxy.offsets) -------------------------------------

    async def UpdateOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.UpdateOffsetResponse(status=denied)
        return await self.offsets.update_offset(request, self._broker_client(account))

    async def GetOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.GetOffsetResponse(status=denied)
        return await self.offsets.get_offset(request, self._broker_client(account))

    async def QueryOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            return svc.QueryOffsetResponse(status=denied)
        return await self.offsets.query_offset(request, self._broker_client(account))

    async def PullMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        account, denied = self._caller(context)
        if denied is not None:
            yield svc.PullMessageResponse(status=denied)
            return
        async for response in self.offsets.pull(request, self._broker_client(account)):
            yield response

    # -- not served yet ---------------------------------------------------------------------------

    async def _unary_not_implemented(self, response_type: Any, rpc: str) -> Any:
        return response_type(status=status(pb.NOT_IMPLEMENTED, f"{rpc} is not served by this proxy yet"))

    async def RecallMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.RecallMessageResponse, "RecallMessage")

    async def SyncLiteSubscription(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.SyncLiteSubscriptionResponse, "SyncLiteSubscription")


def _send_code(code: int) -> int:
    """The v2 status of a broker's refusal of a send."""
    codes: dict[int, int] = {
        ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
        ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
        ResponseCode.MESSAGE_ILLEGAL: pb.BAD_REQUEST,
        ResponseCode.SERVICE_NOT_AVAILABLE: pb.INTERNAL_SERVER_ERROR,
        ResponseCode.FLUSH_DISK_TIMEOUT: pb.MASTER_PERSISTENCE_TIMEOUT,
        ResponseCode.FLUSH_SLAVE_TIMEOUT: pb.SLAVE_PERSISTENCE_TIMEOUT,
        ResponseCode.SLAVE_NOT_AVAILABLE: pb.HA_NOT_AVAILABLE,
    }
    return codes.get(code, int(pb.INTERNAL_SERVER_ERROR))


def _metadata(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {str(k): str(v) for k, v in (context.invocation_metadata() or ())}


def _peer_addr(peer: str) -> str:
    """``ipv4:127.0.0.1:5000`` (gRPC's peer form) -> ``127.0.0.1:5000``."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.replace("%5B", "[").replace("%5D", "]")
    return rest if kind == "ipv4" else peer
