"""With ``enableACL`` the proxy checks the v5 clients' signatures against plain_acl.yml, and
signs its requests to brokers with aclEnable as the client's account
(``enableAclRpcHookForClusterMode``), so the brokers apply that account's permissions."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import grpc
import pytest

from broker_core.errors import ConfigError
from broker_core.model.topicconfig import TopicConfig
from broker_core.proxy.config import ProxyConfig, load_proxy_config
from broker_core.proxy.server import ProxyServer
from broker_core.proxy.stubs import load
from broker_core.testing import run_broker, run_namesrv

from .children import V5_PYTHON, run_v5

TOPIC = "GuardedV5"
ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: writer
    secretKey: writer-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - GuardedV5=PUB
  - accessKey: onlooker
    secretKey: onlooker-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - GuardedV5=SUB
"""

pytestmark = pytest.mark.skipif(
    not V5_PYTHON.exists(), reason=".venv-v5 is made by `python3 manage.py` setup"
)


async def test_signatures_are_checked_and_the_brokers_judge_the_account(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    acl_file = store / "config" / "plain_acl.yml"
    acl_file.write_text(ACL)
    async with run_namesrv() as ns, run_broker(store, ns.address, acl_enable=True) as broker:
        broker.topics.update(TopicConfig(TOPIC, 2, 2, attributes={"message.type": "MIXED"}))
        await broker.registration.register_all()  # type: ignore[union-attr]
        proxy = ProxyServer(
            ProxyConfig(
                namesrv_addr=ns.address, grpc_server_port=0, enable_acl=True, plain_acl_file=str(acl_file),
                enable_acl_rpc_hook_for_cluster_mode=True,
            )
        )  # fmt: skip
        await proxy.start()
        try:

            async def send_as(key: str, secret: str) -> list[dict[str, object]]:
                env = {"V5_ACCESS_KEY": key, "V5_SECRET_KEY": secret}
                return await run_v5(
                    "producer_child.py", proxy.address, TOPIC, "2", home=tmp_path / key, env=env
                )

            allowed = await send_as("writer", "writer-secret-1")
            expected = ["normal"] * 2 + ["fifo"] * 4 + ["timer"]
            assert [line["kind"] for line in allowed if "message_id" in line] == expected
            wrong = await send_as("writer", "not-the-secret")
            # Refused at its first call (the route; the client reports it so): nothing sent.
            assert wrong and all("error" in line for line in wrong), wrong
            nobody = await send_as("", "")
            assert all("error" in line for line in nobody) and nobody, nobody
            # On the wire: the protocol's UNAUTHORIZED status, with the reason.
            pb, svc, grpc_svc = load()
            async with grpc.aio.insecure_channel(proxy.address) as channel:
                stub = grpc_svc.MessagingServiceStub(channel)
                when = "20261126T080000Z"
                sig = hmac.new(b"writer-secret-1", when.encode(), hashlib.sha1).hexdigest()
                for secret_sig, reason in ((sig, None), ("00" * 20, "does not match")):
                    metadata = (
                        ("x-mq-date-time", when),
                        (
                            "authorization",
                            "MQv2-HMAC-SHA1 Credential=writer, SignedHeaders=x-mq-date-time, "
                            f"Signature={secret_sig}",
                        ),
                    )
                    route = await stub.QueryRoute(
                        svc.QueryRouteRequest(topic=pb.Resource(name=TOPIC)), metadata=metadata, timeout=5
                    )
                    if reason is None:
                        assert route.status.code == pb.OK and len(route.message_queues) == 2
                    else:
                        assert route.status.code == pb.UNAUTHORIZED and reason in route.status.message
            onlooker = await send_as("onlooker", "onlooker-secret")  # signed right, but may not PUB
            sends = [line for line in onlooker if line["kind"] in ("normal", "fifo")]
            assert sends and all("error" in line for line in sends), onlooker
        finally:
            await proxy.close()
        assert (
            broker.store is not None
            and broker.store.get_max_offset_in_queue(TOPIC, 0)
            + broker.store.get_max_offset_in_queue(TOPIC, 1)
            == 6
        )


def test_enable_acl_without_a_plain_acl_file_is_refused_at_start(tmp_path: Path) -> None:
    conf = tmp_path / "rmq-proxy.json"
    conf.write_text(json.dumps({"enableACL": True, "rocketmqHome": str(tmp_path)}))
    with pytest.raises(ConfigError, match="enableACL is true but .*plain_acl.yml is not a file"):
        load_proxy_config(conf)
    conf.write_text(json.dumps({"enableACL": "maybe"}))
    with pytest.raises(ConfigError, match="enableACL must be true or false"):
        load_proxy_config(conf)
