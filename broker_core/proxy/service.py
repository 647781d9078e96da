"""``apache.rocketmq.v2.MessagingService``: what each RPC asks of the brokers, and answers.

The proxy is a client of its cluster like any 4.x client: routes come from the nameservers
(cached, read again on a miss or a failed send), messages go to a broker set's master with
SEND_MESSAGE_V2.  What it serves so far:

- QueryRoute: the topic's queues as the nameservers route them, each on broker id 0 and at
  the proxy's own endpoints (clients only ever talk to the proxy), with the message types
  the topic accepts (every type until topics carry RocketMQ 5's ``message.type``).
- Heartbeat and NotifyClientTermination: acknowledged.
- Telemetry: the settings handshake; the client's settings come back with the producer's
  retry policy (RocketMQ's: 3 attempts, 10 ms to 1 s backoff, times 2), which clients wait for.
- SendMessage: normal messages and FIFO messages (their message group is RocketMQ 5's
  ``__SHARDINGKEY`` property and picks the queue, so one group stays in order); tag, keys,
  the client's message id (UNIQ_KEY) and user properties are kept as a 4.x consumer reads them.

Every other RPC answers NOT_IMPLEMENTED with a sentence saying so, at once: a client is
never left waiting.  Timer and transactional sends are refused the same way until the
brokers hold timer messages and the proxy relays check-backs.
"""

from __future__ import annotations

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
from broker_core.model.message import encode_properties
from broker_core.model.topicconfig import PERM_READ, PERM_WRITE
from broker_core.proxy.auth import Authenticator, Unauthorized
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.stubs import load
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader

log = logging.getLogger(__name__)

pb, svc, grpc_svc = load()

ROUTE_TTL_SECONDS = 30.0
# The producer group the proxy's sends carry (v5 producers have none).
PROXY_PRODUCER_GROUP = "PROXY_V5_PRODUCER"
# RocketMQ 5's property for a FIFO message's group.
MESSAGE_GROUP_PROPERTY = "__SHARDINGKEY"
_ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)


def status(code: int, message: str = "OK") -> Any:
    return pb.Status(code=code, message=message)


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
        self._turn = itertools.count()
        self.authenticator = Authenticator(config.acl_file) if config.enable_acl else None
        # Per account (key and secret), a client that signs the brokers' requests as it.
        self._signed: dict[tuple[str, str], AdminClient] = {}

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
                self.config.namesrv_addrs, access_key=account.access_key, secret_key=account.secret_key
            )
        return client

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
        masters = route.master_addrs()
        queues = [
            pb.MessageQueue(
                topic=request.topic,
                id=queue_id,
                permission=_permission(qd.perm),
                broker=pb.Broker(name=qd.broker_name, id=0, endpoints=endpoints),
                accept_message_types=_ALL_TYPES,
            )
            for qd in sorted(route.queue_datas, key=lambda q: q.broker_name)
            if qd.broker_name in masters
            for queue_id in range(max(qd.read_queue_nums, qd.write_queue_nums))
        ]
        return svc.QueryRouteResponse(status=status(pb.OK), message_queues=queues)

    # -- clients -----------------------------------------------------------------------------

    async def Heartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        _account, denied = self._caller(context)
        return svc.HeartbeatResponse(status=denied or status(pb.OK))

    async def NotifyClientTermination(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        _account, denied = self._caller(context)
        return svc.NotifyClientTerminationResponse(status=denied or status(pb.OK))

    async def Telemetry(  # noqa: N802
        self, request_iterator: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        """The settings handshake: each Settings the client sends comes back completed."""
        _account, denied = self._caller(context)
        if denied is not None:
            yield svc.TelemetryCommand(status=denied)
            return
        async for command in request_iterator:
            if command.HasField("settings"):
                yield svc.TelemetryCommand(status=status(pb.OK), settings=self._settings(command.settings))

    @staticmethod
    def _settings(settings: Any) -> Any:
        answer = pb.Settings()
        answer.CopyFrom(settings)
        if settings.HasField("publishing") or settings.client_type == pb.PRODUCER:
            answer.backoff_policy.CopyFrom(
                pb.RetryPolicy(
                    max_attempts=3,
                    exponential_backoff=pb.ExponentialBackoff(
                        initial=_duration(0.01), max=_duration(1.0), multiplier=2.0
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

        if system.message_type == pb.TRANSACTION:
            return refused(pb.NOT_IMPLEMENTED, "transactional messages are not served by this proxy yet")
        if system.HasField("delivery_timestamp") or system.message_type == pb.DELAY:
            return refused(pb.NOT_IMPLEMENTED, "timer (delay) messages are not served by this proxy yet")
        topic = message.topic.name
        properties = dict(message.user_properties)
        if system.HasField("tag"):
            properties["TAGS"] = system.tag
        if system.keys:
            properties["KEYS"] = " ".join(system.keys)
        properties["UNIQ_KEY"] = message_id
        group = system.message_group if system.HasField("message_group") else ""
        if group:
            properties[MESSAGE_GROUP_PROPERTY] = group
        body = message.body
        if system.body_encoding == pb.GZIP:
            try:
                body = zlib.decompress(body, 31)
            except zlib.error as exc:
                return refused(pb.MESSAGE_CORRUPTED, f"the body says GZIP but does not inflate: {exc}")
        for attempt in range(2):
            try:
                route = await self._route(topic, fresh=attempt > 0)
                return await self._send_to(sender, route, topic, body, properties, group, message_id)
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
        return svc.SendResultEntry(status=status(pb.OK), message_id=message_id, offset=answer.queue_offset)

    # -- not served yet ---------------------------------------------------------------------------

    async def _unary_not_implemented(self, response_type: Any, rpc: str) -> Any:
        return response_type(status=status(pb.NOT_IMPLEMENTED, f"{rpc} is not served by this proxy yet"))

    async def QueryAssignment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.QueryAssignmentResponse, "QueryAssignment")

    async def AckMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.AckMessageResponse, "AckMessage")

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(
            svc.ForwardMessageToDeadLetterQueueResponse, "ForwardMessageToDeadLetterQueue"
        )

    async def UpdateOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.UpdateOffsetResponse, "UpdateOffset")

    async def GetOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.GetOffsetResponse, "GetOffset")

    async def QueryOffset(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.QueryOffsetResponse, "QueryOffset")

    async def EndTransaction(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.EndTransactionResponse, "EndTransaction")

    async def ChangeInvisibleDuration(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(
            svc.ChangeInvisibleDurationResponse, "ChangeInvisibleDuration"
        )

    async def RecallMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.RecallMessageResponse, "RecallMessage")

    async def SyncLiteSubscription(self, request: Any, context: grpc.aio.ServicerContext) -> Any:  # noqa: N802
        return await self._unary_not_implemented(svc.SyncLiteSubscriptionResponse, "SyncLiteSubscription")

    async def ReceiveMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        yield svc.ReceiveMessageResponse(
            status=status(
                pb.NOT_IMPLEMENTED, "ReceiveMessage (pop consumption) is not served by this proxy yet"
            )
        )

    async def PullMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:  # noqa: N802
        yield svc.PullMessageResponse(
            status=status(pb.NOT_IMPLEMENTED, "PullMessage is not served by this proxy yet")
        )


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


def _duration(seconds: float) -> Any:
    from google.protobuf.duration_pb2 import Duration

    whole = int(seconds)
    return Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))
