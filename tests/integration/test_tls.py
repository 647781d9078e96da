"""TLS on the remoting protocol: RocketMQ's tlsMode on our nameserver and broker, our clients
with ``tls_enable``.  Certificates are made here, at run time: a CA, a server certificate
for 127.0.0.1 and a client certificate, all signed by the CA.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.errors import ConfigError
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.tls import client_context
from broker_core.testing import run_broker, run_namesrv
from tests.tlscerts import make_pki, server_tls

from .clusterhelpers import started, wait_until_routed
from .test_admin_cli import cli, failed
from .test_push_consumer import Collector, until

TOPIC = "TlsTopic"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
async def cluster(
    tmp_path: Path, pki: dict[str, str], request: pytest.FixtureRequest
) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    mode, more = getattr(request, "param", ("enforcing", {}))
    async with (
        run_namesrv(**server_tls(pki, mode, **more)) as ns,
        run_broker(
            tmp_path / "store", ns.address, tls_enable=True, **server_tls(pki, mode, **more)
        ) as broker,
    ):
        broker.topics.update(TopicConfig(TOPIC, 2, 2, 6))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield ns, broker


async def ask(addr: str, tls: ssl.SSLContext | None) -> int:
    """A GET_BROKER_CONFIG (or, to a nameserver, GET_ROUTEINFO) answer's code over one connection."""
    client = RemotingClient(tls=tls)
    try:
        request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        return (await client.invoke(addr, request, timeout=3.0)).code
    finally:
        await client.close()


def tls_config(ns: NamesrvServer, pki: dict[str, str], **more: Any) -> ClientConfig:
    return ClientConfig(
        namesrv_addr=ns.address,
        client_ip="127.0.0.1",
        tls_enable=True,
        tls_client_trust_cert_path=pki["ca"],
        **more,
    )


async def test_enforcing_serves_tls_clients_and_closes_plain_ones(
    cluster: tuple[NamesrvServer, BrokerController], pki: dict[str, str]
) -> None:
    ns, broker = cluster
    # Our producer and push consumer over TLS, the server checked against the CA.
    collector = Collector()
    from broker_core.client.consumer.push import PushConsumer

    push = PushConsumer(
        "tls-group",
        config=tls_config(ns, pki, instance_name="c"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    push.subscribe(TOPIC).register_listener(collector)
    async with started(Producer("tls-producer", config=tls_config(ns, pki, instance_name="p"))) as producer:
        for i in range(10):
            result = await asyncio.to_thread(producer.send, Message(TOPIC, f"secret-{i}".encode()))
            assert result.status.value == "SEND_OK"
        async with started(push):
            await until(lambda: len(collector.bodies()) == 10)
    assert set(collector.bodies()) == {f"secret-{i}".encode() for i in range(10)}

    # A plain client gets nothing: the server closes its connection.  Over TLS it is
    # answered (the broker serves no routes, and says so).
    answers = {ns.address: ResponseCode.SUCCESS, broker.address: ResponseCode.REQUEST_CODE_NOT_SUPPORTED}
    for addr, answer in answers.items():
        with pytest.raises(RemotingError):
            await ask(addr, None)
        assert await ask(addr, client_context(trust_cert_path=pki["ca"])) == answer


@pytest.mark.parametrize("cluster", [("permissive", {})], indirect=True)
async def test_permissive_takes_tls_and_plain_clients_on_one_port(
    cluster: tuple[NamesrvServer, BrokerController], pki: dict[str, str]
) -> None:
    ns, _broker = cluster
    assert await ask(ns.address, None) == ResponseCode.SUCCESS
    assert await ask(ns.address, client_context()) == ResponseCode.SUCCESS  # RocketMQ's default: no check
    plain = ClientConfig(namesrv_addr=ns.address, client_ip="127.0.0.1", instance_name="plain")
    async with started(Producer("plain-producer", config=plain)) as producer:
        result = await asyncio.to_thread(producer.send, Message(TOPIC, b"in the clear"))
        assert result.status.value == "SEND_OK"


async def test_disabled_closes_a_tls_handshake(tmp_path: Path, pki: dict[str, str]) -> None:
    async with run_namesrv() as ns:
        with pytest.raises(RemotingError):
            await ask(ns.address, client_context())
        assert await ask(ns.address, None) == ResponseCode.TOPIC_NOT_EXIST


async def test_a_server_that_requires_client_certificates_refuses_a_client_without_one(
    pki: dict[str, str],
) -> None:
    auth = {"tls_server_need_client_auth": "require", "tls_server_trust_cert_path": pki["ca"]}
    async with run_namesrv(**server_tls(pki, "enforcing", **auth)) as ns:
        with pytest.raises(RemotingError):
            await ask(ns.address, client_context(trust_cert_path=pki["ca"]))
        signed = {"cert_path": pki["client"], "key_path": pki["client_key"]}
        answer = await ask(ns.address, client_context(trust_cert_path=pki["ca"], **signed))
        assert answer == ResponseCode.TOPIC_NOT_EXIST  # answered: the topic is unknown there


def test_a_tls_setting_that_cannot_work_is_refused_at_start(pki: dict[str, str], tmp_path: Path) -> None:
    from broker_core.config import BrokerConfig, NamesrvConfig

    with pytest.raises(ConfigError, match="needs tlsServerCertPath"):
        BrokerConfig(tls_mode="enforcing")
    with pytest.raises(ConfigError, match="tlsMode must be disabled, permissive or enforcing"):
        NamesrvConfig(tls_mode="strict")
    with pytest.raises(ConfigError, match="no such file"):
        NamesrvConfig(**server_tls(pki, "permissive", tls_server_key_path=str(tmp_path / "missing.key")))
    with pytest.raises(ConfigError, match="tlsServerTrustCertPath"):
        NamesrvConfig(**server_tls(pki, "enforcing", tls_server_need_client_auth="require"))
    # The broker's own connections out: settings that could not work, or would do nothing.
    with pytest.raises(ConfigError, match="tlsClientCertPath is set but tlsEnable is false"):
        BrokerConfig(tls_client_cert_path=pki["client"], tls_client_key_path=pki["client_key"])
    with pytest.raises(ConfigError, match="cannot load the client's TLS"):
        BrokerConfig(tls_enable=True, tls_client_trust_cert_path=str(tmp_path / "missing-ca.pem"))
    with pytest.raises(ConfigError, match="needs its certificate"):
        BrokerConfig(tls_enable=True, tls_client_key_path=pki["client_key"])


async def test_a_broker_registers_with_a_nameserver_that_checks_client_certificates(
    tmp_path: Path, pki: dict[str, str]
) -> None:
    """RocketMQ's tls.client.* for the broker's connections out: it checks the nameserver's
    certificate and shows its own to one that requires it."""
    auth = server_tls(
        pki, "enforcing", tls_server_need_client_auth="require", tls_server_trust_cert_path=pki["ca"]
    )
    mine = {"tls_client_cert_path": pki["client"], "tls_client_key_path": pki["client_key"]}
    async with (
        run_namesrv(**auth) as ns,
        run_broker(
            tmp_path / "store", ns.address, tls_enable=True, tls_client_trust_cert_path=pki["ca"], **mine
        ) as broker,
    ):
        broker.topics.update(TopicConfig(TOPIC, 2, 2, 6))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
    # Without a certificate of its own, the nameserver closes its connections: no route.
    async with (
        run_namesrv(**auth) as ns,
        run_broker(tmp_path / "store2", ns.address, tls_enable=True) as broker,
    ):
        broker.topics.update(TopicConfig(TOPIC, 2, 2, 6))
        broker.topics_changed()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(3):
                await wait_until_routed(ns, TOPIC)


async def test_quiver_admin_connects_over_tls_with_its_options_or_the_environment(
    cluster: tuple[NamesrvServer, BrokerController], pki: dict[str, str]
) -> None:
    ns, _broker = cluster
    n = ("-n", ns.address)
    plain = await cli("topicList", *n)
    assert plain.code == 1 and plain.err.startswith("error: "), plain
    by_flags = await cli("topicList", *n, "--tls", "--tlsTrustCertPath", pki["ca"])
    assert by_flags.code == 0 and TOPIC in by_flags.out.split(), by_flags
    by_env = await cli(
        "topicList", *n, env={"QUIVER_TLS_ENABLE": "true", "QUIVER_TLS_TRUST_CERT_PATH": pki["ca"]}
    )
    assert by_env.code == 0 and TOPIC in by_env.out.split(), by_env
    assert failed(await cli("topicList", *n, "--tlsCertPath", pki["client"]), "need --tls")
    assert failed(
        await cli("topicList", *n, "--tls", "--tlsTrustCertPath", "/nonexistent.pem"), "cannot load"
    )
