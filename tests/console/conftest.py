"""Console tests run against a real nameserver and broker (child processes on free ports),
as the personas the console knows: admin, operator, viewer and outsider."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from broker_core.testing import cli_server

PERSONAS = ("admin", "operator", "viewer", "outsider")


@dataclass
class Servers:
    namesrv_addr: str
    broker_addr: str
    store: Path


@contextlib.contextmanager
def run_servers(
    work: Path, namesrv_settings: dict[str, Any] | None = None, **broker_settings: Any
) -> Iterator[Servers]:
    """A nameserver and a broker (``broker-a``) as child processes, the store under ``work``;
    ``namesrv_settings`` and ``broker_settings`` add to or override their .conf files."""
    with contextlib.ExitStack() as stack:
        namesrv_conf = {"listenPort": 0, **(namesrv_settings or {})}
        (work / "namesrv.conf").write_text("".join(f"{k} = {v}\n" for k, v in namesrv_conf.items()))
        _, namesrv = stack.enter_context(
            cli_server("namesrv", work / "namesrv.conf", log=work / "namesrv.log")
        )
        conf = {
            "brokerClusterName": "ConsoleCluster",
            "brokerName": "broker-a",
            "brokerIP1": "127.0.0.1",
            "listenPort": 0,
            "namesrvAddr": namesrv,
            "storePathRootDir": work / "store",
            "mappedFileSizeCommitLog": 1024 * 1024,
            "warmMappedFileEnable": "false",
            "autoCreateTopicEnable": "true",
            **broker_settings,
        }
        (work / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
        _, broker = stack.enter_context(cli_server("broker", work / "broker.conf", log=work / "broker.log"))
        yield Servers(namesrv, broker, work / "store")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A nameserver and a broker for a module's tests."""
    with run_servers(tmp_path_factory.mktemp("console-servers")) as found:
        yield found


@pytest.fixture
def on_servers(servers: Servers, settings: Any) -> Servers:
    """This process's console manages the test cluster (as the ``default`` cluster)."""
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": servers.namesrv_addr}
    return servers


@pytest.fixture
def personas(db: None) -> dict[str, Client]:
    """A logged-in client per persona: admin (superuser), operator and viewer on every
    cluster, and an outsider with an account but no access."""
    from django.contrib.auth import get_user_model

    from console.core.models import ClusterAccess

    users = get_user_model().objects
    clients = {}
    for name in PERSONAS:
        if name == "admin":
            user = users.create_superuser(name, password=f"pw-{name}-123")
        else:
            user = users.create_user(name, password=f"pw-{name}-123")
        if name in ("operator", "viewer"):
            ClusterAccess.objects.create(user=user, cluster="*", role=name)
        clients[name] = Client()
        clients[name].force_login(user)
    clients["anonymous"] = Client()
    return clients


@contextlib.contextmanager
def online_client(servers: Servers, personas: dict[str, Client], topic: str, group: str) -> Iterator[str]:
    """``topic`` created and a push consumer of ``group`` on it, online until the block ends;
    yields its client id once the console's API lists it."""
    from broker_core.client.consumer.push import PushConsumer
    from tests.listeners import Counter
    from tests.servers import wait_for

    personas["operator"].post(
        "/api/clusters/default/topics/", {"name": topic}, content_type="application/json"
    )
    consumer = PushConsumer(group, servers.namesrv_addr).subscribe(topic).register_listener(Counter()).start()
    try:
        detail = wait_for(
            lambda: (
                (d := personas["viewer"].get(f"/api/clusters/default/groups/{group}/").json()).get(
                    "connection"
                )
                and d
            ),
            30,
            "the client online",
        )
        yield detail["connection"]["connectionSet"][0]["clientId"]
    finally:
        consumer.shutdown()
