"""The proxy in front of a cluster that takes only TLS (``tlsMode = enforcing``): with its
``tlsEnable`` and ``tlsClient*`` settings it reaches the nameserver and brokers, and the
official RocketMQ 5 client's sends arrive; without them the cluster closes its connections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker_core.errors import ConfigError
from broker_core.model.message import decode_record
from broker_core.model.topicconfig import TopicConfig
from broker_core.proxy.config import ProxyConfig, load_proxy_config
from broker_core.proxy.server import ProxyServer
from broker_core.testing import run_broker, run_namesrv
from tests.integration.clusterhelpers import wait_until_routed
from tests.tlscerts import make_pki, server_tls

from .children import V5_MISSING, V5_PYTHON, run_v5
from .test_proxy_acl import ACL
from .test_proxy_acl import TOPIC as ACL_TOPIC

TOPIC = "OverTls"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.mark.skipif(not V5_PYTHON.exists(), reason=V5_MISSING)
async def test_the_proxy_reaches_an_enforcing_cluster_over_tls(tmp_path: Path, pki: dict[str, str]) -> None:
    auth = server_tls(
        pki, "enforcing", tls_server_need_client_auth="require", tls_server_trust_cert_path=pki["ca"]
    )
    mine = {
        "tls_enable": True,
        "tls_client_trust_cert_path": pki["ca"],
        "tls_client_cert_path": pki["client"],
        "tls_client_key_path": pki["client_key"],
    }
    async with (
        run_namesrv(**auth) as ns,
        run_broker(tmp_path / "store", ns.address, **auth, **mine) as broker,
    ):
        broker.topics.update(TopicConfig(TOPIC, 2, 2, attributes={"message.type": "MIXED"}))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        proxy = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0, **mine))
        await proxy.start()
        try:
            sent = await run_v5("producer_child.py", proxy.address, TOPIC, "3", home=tmp_path / "v5")
        finally:
            await proxy.close()
        normal = [line for line in sent if line["kind"] == "normal"]
        assert len(normal) == 3 and all("message_id" in line for line in normal), sent
        assert broker.store.wait_dispatched(10)
        stored = set()
        for queue_id in (0, 1):
            result = broker.store.get_message(TOPIC, queue_id, 0, 64)
            stored |= {decode_record(raw).uniq_key for raw in result.messages}
        assert {line["message_id"] for line in normal} <= stored


@pytest.mark.skipif(not V5_PYTHON.exists(), reason=V5_MISSING)
async def test_with_acl_the_proxys_signing_clients_speak_tls_too(tmp_path: Path, pki: dict[str, str]) -> None:
    # enableAclRpcHookForClusterMode: the proxy reaches the brokers through one client per
    # account, each signing as it; each must use the proxy's TLS too, or the enforcing
    # cluster drops it and the account's sends fail.
    auth = server_tls(pki, "enforcing")
    mine = {"tls_enable": True, "tls_client_trust_cert_path": pki["ca"]}
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    acl_file = store / "config" / "plain_acl.yml"
    acl_file.write_text(ACL)
    async with (
        run_namesrv(**auth) as ns,
        run_broker(store, ns.address, acl_enable=True, **auth, **mine) as broker,
    ):
        broker.topics.update(TopicConfig(ACL_TOPIC, 2, 2, attributes={"message.type": "MIXED"}))
        broker.topics_changed()
        await wait_until_routed(ns, ACL_TOPIC)
        config = ProxyConfig(
            namesrv_addr=ns.address,
            grpc_server_port=0,
            enable_acl=True,
            plain_acl_file=str(acl_file),
            enable_acl_rpc_hook_for_cluster_mode=True,
            **mine,
        )
        proxy = ProxyServer(config)
        await proxy.start()
        try:
            env = {"V5_ACCESS_KEY": "writer", "V5_SECRET_KEY": "writer-secret-1"}
            sent = await run_v5(
                "producer_child.py", proxy.address, ACL_TOPIC, "2", home=tmp_path / "v5", env=env
            )
        finally:
            await proxy.close()
    normal = [line for line in sent if line["kind"] == "normal"]
    assert len(normal) == 2 and all("message_id" in line for line in normal), sent


def test_proxy_tls_settings_that_cannot_work_are_refused_at_start(
    pki: dict[str, str], tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="tlsClientTrustCertPath is set but tlsEnable is false"):
        ProxyConfig(tls_client_trust_cert_path=pki["ca"])
    with pytest.raises(ConfigError, match="cannot load the client's TLS"):
        ProxyConfig(tls_enable=True, tls_client_cert_path=str(tmp_path / "missing.pem"))
    conf = tmp_path / "rmq-proxy.json"
    conf.write_text(
        json.dumps(
            {"namesrvAddr": "127.0.0.1:9876", "tlsEnable": "true", "tlsClientTrustCertPath": pki["ca"]}
        )
    )
    config, unknown = load_proxy_config(conf)
    assert unknown == [] and config.tls_enable and config.tls_client() is not None
