"""The RocketMQ 5 clients a proxy serves: who they are, their Telemetry streams, and their
registration with the brokers.

A v5 client talks only to the proxy, so the brokers would not know it: the console's
connection lists, a group's members and a transaction's check-back all need it.  As
RocketMQ's proxy does, each client's Heartbeat RPC becomes a HEART_BEAT to every master of
the cluster, sent over the proxy's own connection, with the client's id and group(s) and,
in Quiver's extra heartbeat keys, its protocol (``gRPC``), SDK version and address; its
language is the remoting language code of the SDK's (from the Telemetry settings' user
agent, else the ``x-mq-language`` header).  NotifyClientTermination unregisters it.

Producers are registered in one producer group, ``PROXY_PRODUCER_GROUP``: the group the
proxy's sends carry (PGROUP), so a broker's transaction check-back for a v5 producer's
half message reaches the proxy, which hands it to a producer of that topic over its
Telemetry stream (``TelemetrySession.push``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.proxy.convert import filter_of
from broker_core.proxy.stubs import load
from broker_core.remoting.codes import LanguageCode, RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import UnregisterClientRequestHeader

log = logging.getLogger(__name__)

pb, svc, _grpc = load()

# The producer group of every send the proxy makes (v5 producers have none).
PROXY_PRODUCER_GROUP = "PROXY_V5_PRODUCER"
PROTOCOL = "gRPC v2"
CLUSTER_TTL_S = 30.0

# v2 Language -> the remoting LanguageCode name the broker records.
_LANGUAGES = {
    pb.JAVA: "JAVA",
    pb.CPP: "CPP",
    pb.DOT_NET: "DOTNET",
    pb.GOLANG: "GO",
    pb.RUST: "RUST",
    pb.PYTHON: "PYTHON",
    pb.PHP: "PHP",
    pb.NODE_JS: "NODE_JS",
    pb.RUBY: "RUBY",
}
_CONSUMER_TYPES = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER)


def remoting_language(name: str) -> str:
    """A language name as a remoting LanguageCode name (OTHER when it has none)."""
    name = name.upper().replace(".", "").replace("GOLANG", "GO").replace("DOT_NET", "DOTNET")
    return name if name in LanguageCode.__members__ else "OTHER"


@dataclass
class TelemetrySession:
    """One open Telemetry stream: what the server pushes to the client goes in ``outbox``."""

    client_id: str
    outbox: asyncio.Queue[Any]
    topics: frozenset[str] = frozenset()

    def push(self, command: Any) -> None:
        self.outbox.put_nowait(command)


@dataclass
class V5Client:
    client_id: str
    client_type: int = pb.CLIENT_TYPE_UNSPECIFIED
    group: str = ""
    language: str = "OTHER"
    version: str = ""
    addr: str = ""
    # topic -> (expression, expression type: TAG or SQL92)
    subscriptions: dict[str, tuple[str, str]] = field(default_factory=dict)
    sessions: list[TelemetrySession] = field(default_factory=list)

    @property
    def is_consumer(self) -> bool:
        return self.client_type in _CONSUMER_TYPES

    def heartbeat_body(self) -> bytes:
        body: dict[str, Any] = {
            "clientID": self.client_id,
            "producerDataSet": [],
            "consumerDataSet": [],
            "clientProtocol": PROTOCOL,
            "clientVersion": self.version,
            "clientAddr": self.addr,
        }
        if self.is_consumer and self.group:
            body["consumerDataSet"].append(
                {
                    "groupName": self.group,
                    "consumeType": "CONSUME_POP"
                    if self.client_type != pb.PULL_CONSUMER
                    else "CONSUME_ACTIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": topic, "subString": expression, "subVersion": 0, "expressionType": kind}
                        for topic, (expression, kind) in sorted(self.subscriptions.items())
                    ],
                    "unitMode": False,
                }
            )
        elif self.client_type == pb.PRODUCER:
            body["producerDataSet"].append({"groupName": PROXY_PRODUCER_GROUP})
        return orjson.dumps(body)


class ClientRegistry:
    """The v5 clients of one proxy, by client id."""

    def __init__(self, admin: AdminClient, cluster: str) -> None:
        self.admin = admin
        self.cluster = cluster
        self.clients: dict[str, V5Client] = {}
        self._masters: tuple[dict[str, str], float] | None = None

    def client(self, metadata: dict[str, str]) -> V5Client:
        """The client a call's metadata names (made on first sight)."""
        client_id = metadata.get("x-mq-client-id", "")
        client = self.clients.get(client_id)
        if client is None:
            client = self.clients[client_id] = V5Client(client_id)
        if metadata.get("x-mq-language") and client.language == "OTHER":
            client.language = remoting_language(metadata["x-mq-language"])
        if metadata.get("x-mq-client-version") and not client.version:
            client.version = metadata["x-mq-client-version"]
        return client

    def learn_settings(self, client: V5Client, settings: Any) -> None:
        """What a client's Telemetry settings say of it: type, language, topics, group."""
        if settings.HasField("client_type"):
            client.client_type = settings.client_type
        if settings.HasField("user_agent"):
            language = _LANGUAGES.get(settings.user_agent.language)
            if language is not None:
                client.language = language
            if settings.user_agent.version:
                client.version = settings.user_agent.version
        if settings.HasField("subscription"):
            client.group = settings.subscription.group.name or client.group
            client.subscriptions = {
                entry.topic.name: filter_of(entry.expression) for entry in settings.subscription.subscriptions
            }

    def producer_session(self, topic: str) -> TelemetrySession | None:
        """An open Telemetry stream of a producer that publishes ``topic`` (the latest)."""
        found = None
        for client in self.clients.values():
            if client.client_type != pb.PRODUCER:
                continue
            for session in client.sessions:
                if topic in session.topics:
                    found = session
        return found

    # -- the brokers --------------------------------------------------------------------------

    async def _master_addrs(self) -> dict[str, str]:
        if self._masters is None or time.monotonic() - self._masters[1] > CLUSTER_TTL_S:
            info = await self.admin.cluster_info()
            self._masters = (info.master_addrs(self.cluster), time.monotonic())
        return self._masters[0]

    async def broker_name_of(self, addr: str) -> str | None:
        for name, master in (await self._master_addrs()).items():
            if master == addr:
                return name
        self._masters = None
        for name, master in (await self._master_addrs()).items():
            if master == addr:
                return name
        return None

    async def register(self, client: V5Client, via: AdminClient) -> None:
        """HEART_BEAT for ``client`` to every master of the cluster (failures logged: the
        next heartbeat tries again)."""
        try:
            masters = await self._master_addrs()
        except AdminError as exc:
            log.warning("cannot register v5 client %s: %s", client.client_id, exc)
            return
        body = client.heartbeat_body()
        for addr in masters.values():
            request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
            request.language = client.language
            try:
                response = await via.requests.raw(addr, request)
            except AdminError as exc:
                log.warning("heartbeat of v5 client %s to %s failed: %s", client.client_id, addr, exc)
                continue
            if response.code != ResponseCode.SUCCESS:
                log.warning(
                    "%s refused the heartbeat of v5 client %s: %s", addr, client.client_id, response.remark
                )

    async def unregister(self, client_id: str, via: AdminClient) -> None:
        client = self.clients.pop(client_id, None)
        if client is None:
            return
        header = UnregisterClientRequestHeader(
            client_id,
            producer_group=PROXY_PRODUCER_GROUP if client.client_type == pb.PRODUCER else None,
            consumer_group=client.group if client.is_consumer and client.group else None,
        )
        try:
            masters = await self._master_addrs()
        except AdminError:
            return
        for addr in masters.values():
            request = RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_fields())
            try:
                await via.requests.raw(addr, request)
            except AdminError as exc:
                log.info("unregistering v5 client %s at %s failed: %s", client_id, addr, exc)
