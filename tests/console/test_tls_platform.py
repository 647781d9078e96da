"""The platform over TLS: a nameserver and a broker with ``tlsMode = enforcing``, and the
console (its REST API, hence the Celery jobs, which call the same admin client) and the
Spark reports' source connecting with ``QUIVER_TLS_*``.  Plain, the same calls fail."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from broker_core.client.config import ClientConfig
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from console.reports.runner import command
from spark_reports.options import ScanOptions
from spark_reports.planner import SourceUnavailableError, plan
from tests.servers import wait_for
from tests.tlscerts import make_pki

from .conftest import Servers, run_servers


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Servers, dict[str, str]]]:
    pki = make_pki(tmp_path_factory.mktemp("pki"))
    tls = {"tlsMode": "enforcing", "tlsServerCertPath": pki["server"], "tlsServerKeyPath": pki["server_key"]}
    with run_servers(tmp_path_factory.mktemp("tls-servers"), tls, tlsEnable="true", **tls) as servers:
        yield servers, pki


def test_the_console_and_the_reports_speak_tls_to_an_enforcing_cluster(
    tls_cluster: tuple[Servers, dict[str, str]], personas: dict[str, Client], settings: Any
) -> None:
    servers, pki = tls_cluster
    settings.QUIVER = {
        **settings.QUIVER,
        "NAMESRV_ADDR": servers.namesrv_addr,
        "TLS_ENABLE": True,
        "TLS_TRUST_CERT_PATH": pki["ca"],
    }
    made = personas["operator"].post(
        "/api/clusters/default/topics/", {"name": "TlsPlatform"}, content_type="application/json"
    )
    assert made.status_code in (200, 201), made.content
    names = wait_for(
        lambda: (
            {t["name"] for t in personas["viewer"].get("/api/clusters/default/topics/").json()["results"]}
            & {"TlsPlatform"}
        ),
        30,
        "the topic listed through TLS",
    )
    assert names == {"TlsPlatform"}

    # The report child gets the same TLS as source options, and the source connects with them.
    argv = command(_Run(), servers.namesrv_addr)
    assert argv[-4:] == [
        "--source-option",
        "tlsEnable=true",
        "--source-option",
        f"tlsTrustCertPath={pki['ca']}",
    ]
    tls = ClientConfig(
        namesrv_addr=servers.namesrv_addr, tls_enable=True, tls_client_trust_cert_path=pki["ca"]
    )
    producer = Producer("tls-platform-producer", config=tls).start()
    try:
        assert producer.send(Message("TlsPlatform", b"read by the report's source")).queue_offset == 0
    finally:
        producer.shutdown()
    source = {"namesrv": servers.namesrv_addr, "topics": "TlsPlatform"}
    ranges = plan(ScanOptions.parse({**source, "tlsEnable": "true", "tlsTrustCertPath": pki["ca"]}))
    assert [(r.queue.topic, r.size) for r in ranges] == [("TlsPlatform", 1)]
    with pytest.raises(SourceUnavailableError):  # plain, the enforcing nameserver closes on it
        plan(ScanOptions.parse(source))


class _Run:
    """The fields of a report run ``command`` reads."""

    kind = "traffic"
    cluster = "default"
    output = str(Path("/tmp/quiver-report-out"))
    since = 0
    until = 1
    topics: list[str] = []
