"""Broker sets and replication in the console, against a real nameserver, a SYNC_MASTER and
its SLAVE (child processes on loopback): the API and the dashboard show the set, the slave
connected and caught up; a slave that stops shows disconnected and gets a replication alert
from the periodic check, resolved once it is back; a master that stops leaves its set
"master down".  The answer's fields are the ones the OpenAPI document describes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.testing import cli_server
from console.alerts import rules, services
from console.alerts.models import Alert
from console.clusters import replication
from tests.servers import wait_for

pytestmark = pytest.mark.django_db

URL = "/api/clusters/default/broker-sets/"
NAME = "broker-r"
TOPIC = "Replicated"
SLAVE_ALERT = "broker-r-slave-1"


class HaSet:
    """A nameserver, a SYNC_MASTER and a SLAVE sharing ``brokerName`` broker-r, each a child
    process; the slave (and the master) can be stopped and the slave started again on the
    same address."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.stack = contextlib.ExitStack()
        self.stops: dict[str, contextlib.ExitStack] = {}
        (work / "namesrv.conf").write_text("listenPort = 0\n")
        _, self.namesrv = self.stack.enter_context(
            cli_server("namesrv", work / "namesrv.conf", log=work / "namesrv.log")
        )
        self.master = self.start("master", brokerId=0, brokerRole="SYNC_MASTER", listenPort=0)
        self.slave = self.start("slave", brokerId=1, brokerRole="SLAVE", listenPort=0)

    def start(self, name: str, **settings: Any) -> str:
        conf = {
            "brokerClusterName": "HaCluster",
            "brokerName": NAME,
            "brokerIP1": "127.0.0.1",
            "namesrvAddr": self.namesrv,
            "storePathRootDir": self.work / name,
            "mappedFileSizeCommitLog": 1024 * 1024,
            "warmMappedFileEnable": "false",
            "autoCreateTopicEnable": "true",
            **settings,
        }
        path = self.work / f"{name}.conf"
        path.write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
        stack = contextlib.ExitStack()
        _, addr = stack.enter_context(cli_server("broker", path, log=self.work / f"{name}.log"))
        self.stops[name] = stack
        return str(addr)

    def stop(self, name: str) -> None:
        self.stops.pop(name).close()

    def restart_slave(self) -> None:
        port = self.slave.rsplit(":", 1)[1]
        assert self.start("slave", brokerId=1, brokerRole="SLAVE", listenPort=port) == self.slave

    def close(self) -> None:
        for stack in self.stops.values():
            stack.close()
        self.stack.close()


@pytest.fixture
def ha_set(tmp_path: Path, settings: Any, console_redis: Any) -> Iterator[HaSet]:
    """The set, managed by this process's console as the ``default`` cluster; the slaves an
    earlier test's check remembered are forgotten."""
    found = HaSet(tmp_path)
    try:
        settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": found.namesrv}
        console_redis.delete(replication.SEEN_KEY.format(cluster="default"))
        yield found
    finally:
        found.close()
        # What the check remembered of this set must not reach later tests' checks.
        console_redis.delete(replication.SEEN_KEY.format(cluster="default"))


@pytest.fixture
def schema(personas: dict[str, Client]) -> dict[str, Any]:
    response = personas["viewer"].get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def fields(schema: dict[str, Any], component: str) -> set[str]:
    return set(schema["components"]["schemas"][component]["properties"])


def described(schema: dict[str, Any], body: dict[str, Any]) -> None:
    """Every field of a broker-sets answer is one the document names."""
    assert set(body) == fields(schema, "BrokerSetsOut")
    for broker_set in body["brokerSets"]:
        assert set(broker_set) == fields(schema, "BrokerSetOut")
        for slave in broker_set["slaves"]:
            assert set(slave) == fields(schema, "ReplicaOut")


def the_set(client: Client) -> dict[str, Any]:
    response = client.get(URL)
    assert response.status_code == 200, response.content
    (found,) = [s for s in response.json()["brokerSets"] if s["brokerName"] == NAME]
    return found


def replication_events(events: list[services.Event]) -> list[tuple[str, str]]:
    return [(e.kind, e.alert.group) for e in events if e.alert.kind == Alert.REPLICATION]


def test_the_answer_is_described_field_by_field(schema: dict[str, Any]) -> None:
    operation = schema["paths"]["/api/clusters/{cluster}/broker-sets/"]["get"]
    content = operation["responses"]["200"]["content"]["application/json"]
    assert content["schema"]["$ref"].endswith("/BrokerSetsOut")
    assert {"brokerSets", "maxBehindBytes", "maxBehindSeconds"} <= fields(schema, "BrokerSetsOut")
    assert {"master", "role", "slaveReadEnable", "state", "slaves"} <= fields(schema, "BrokerSetOut")
    assert {
        "addr", "brokerId", "connected", "ackedOffset", "behindBytes", "behindMs", "inSync",
        "lastReportMs", "problems", "error",
    } <= fields(schema, "ReplicaOut")  # fmt: skip
    components = schema["components"]["schemas"]

    def choices(component: str, field: str) -> list[str]:
        return list(components[components[component]["properties"][field]["$ref"].rsplit("/", 1)[1]]["enum"])

    assert set(choices("BrokerSetOut", "state")) == set(replication.STATES)
    assert Alert.REPLICATION in choices("AlertOut", "kind")


def test_a_slave_that_stops_is_shown_disconnected_alerted_and_resolved_when_back(
    ha_set: HaSet, personas: dict[str, Client], schema: dict[str, Any]
) -> None:
    viewer = personas["viewer"]
    wait_for(lambda: (s := the_set(viewer))["slaves"] and s["slaves"][0]["connected"], 30, "the slave linked")
    producer = Producer("ha-producer", ha_set.namesrv).start()
    try:
        for i in range(20):
            producer.send(Message(TOPIC, b"replicated %d " % i * 20))
    finally:
        producer.shutdown()
    # A SYNC_MASTER answers a send once the slave holds it: nothing behind.
    caught_up = wait_for(
        lambda: (s := the_set(viewer))["slaves"][0]["ackedOffset"] == s["maxOffset"] and s,
        30,
        "the slave's acknowledgement of the master's end",
    )
    body = viewer.get(URL).json()
    described(schema, body)
    assert body["maxBehindBytes"] == 64 << 20 and body["maxBehindSeconds"] == 30
    assert caught_up["master"] == ha_set.master and caught_up["role"] == "SYNC_MASTER"
    assert caught_up["cluster"] == "HaCluster" and caught_up["slaveReadEnable"] is False
    assert caught_up["state"] == replication.OK and caught_up["error"] is None and caught_up["haAddr"]
    (slave,) = caught_up["slaves"]
    assert slave["addr"] == ha_set.slave and slave["brokerId"] == 1 and slave["registered"]
    assert slave["connected"] and slave["inSync"] and slave["error"] is None and not slave["problems"]
    assert slave["behindBytes"] == 0 and slave["behindMs"] == 0 and slave["lagging"] is False
    assert slave["ackedOffset"] == slave["maxOffset"] == caught_up["maxOffset"] > 0
    assert slave["lastReportMs"] > 0
    page = viewer.get("/clusters/default/").content.decode()
    assert 'id="broker-sets"' in page and f'data-slave="{ha_set.slave}"' in page
    assert "SYNC_MASTER" in page and "replica flagged" not in page

    # The periodic check: nothing to say, and it remembers the slave.
    events: list[services.Event] = []
    summary = services.check_all(events.append)
    assert replication_events(events) == [] and summary.unknown == []
    assert [(s["brokerName"], s["brokerId"]) for s in replication.remembered_slaves("default")] == [(NAME, 1)]

    # The slave stops: the nameservers drop it at once; the set still shows it, disconnected.
    ha_set.stop("slave")
    gone = wait_for(
        lambda: (s := the_set(viewer))["slaves"] and not s["slaves"][0]["connected"] and s,
        30,
        "the slave shown disconnected",
    )
    (slave,) = gone["slaves"]
    assert slave["addr"] == ha_set.slave and slave["brokerId"] == 1 and not slave["registered"]
    assert slave["error"] and ha_set.slave in slave["error"]
    assert any("not listed by the nameservers" in p for p in slave["problems"])
    assert gone["state"] == replication.SLAVE_DISCONNECTED and gone["master"] == ha_set.master
    described(schema, viewer.get(URL).json())
    page = viewer.get("/clusters/default/").content.decode()
    assert "replica flagged" in page and "disconnected" in page

    summary = services.check_all(events.append)
    assert replication_events(events) == [("raised", SLAVE_ALERT)]
    alert = Alert.objects.get(kind=Alert.REPLICATION, resolved_at__isnull=True)
    assert alert.group == SLAVE_ALERT and alert.cluster == "default"
    assert f"slave {ha_set.slave} disconnected from its master" in alert.message
    # Checked again while it is down: the one alert stays open, nothing new is raised.
    services.check_all(events.append)
    assert replication_events(events) == [("raised", SLAVE_ALERT)]
    listed = viewer.get("/api/clusters/default/alerts/?kind=replication&state=open").json()
    assert [a["group"] for a in listed["results"]] == [SLAVE_ALERT]
    alerts_page = viewer.get("/clusters/default/alerts/").content.decode()
    assert SLAVE_ALERT in alerts_page and "/clusters/default/#broker-sets" in alerts_page

    # Back on the same address: connected and caught up, and the alert resolves.
    ha_set.restart_slave()
    back = wait_for(
        lambda: (s := the_set(viewer))["slaves"][0]["connected"] and s["slaves"][0]["behindBytes"] == 0 and s,
        30,
        "the slave linked again",
    )
    assert back["state"] == replication.OK and back["slaves"][0]["registered"]
    services.check_all(events.append)
    assert replication_events(events) == [("raised", SLAVE_ALERT), ("resolved", SLAVE_ALERT)]
    alert.refresh_from_db()
    assert not alert.is_open and "connected, 0 B" in alert.resolution

    # The master stops: the set is "master down", its slave shown with its own status.
    ha_set.stop("master")
    down = wait_for(
        lambda: (s := the_set(viewer))["master"] is None and not s["slaves"][0]["connected"] and s,
        30,
        "the set without its master",
    )
    assert down["state"] == replication.MASTER_DOWN and down["role"] is None
    (slave,) = down["slaves"]
    assert slave["registered"] and slave["error"] is None and slave["maxOffset"] == caught_up["maxOffset"]
    described(schema, viewer.get(URL).json())
    services.check_all(events.append)
    assert replication_events(events)[-1] == ("raised", SLAVE_ALERT)
    assert "master down" in Alert.objects.get(kind=Alert.REPLICATION, resolved_at__isnull=True).message


def test_outsiders_get_nothing(personas: dict[str, Client]) -> None:
    assert personas["outsider"].get(URL).status_code == 403
    assert personas["anonymous"].get(URL).status_code in (401, 403)
    assert personas["viewer"].get("/api/clusters/nope/broker-sets/").status_code == 404


def test_the_replication_verdicts() -> None:
    limit, ms = 64 << 20, 30_000
    down = rules.replication(False, None, None, limit, ms, "master down")
    assert down.state == rules.BREACHED and down.message == "disconnected from its master (master down)"
    far = rules.replication(True, 100 << 20, 1_000, limit, ms)
    assert far.state == rules.BREACHED and far.value == 100 << 20 and "100.0 MiB behind" in far.message
    late = rules.replication(True, 10, 31_000, limit, ms)
    assert late.state == rules.BREACHED and "31 s behind, above 30 s" in late.message
    assert rules.replication(True, 10, 30_000, limit, ms).state == rules.CLEAR  # at the limit is within
    assert rules.replication(True, None, None, limit, ms).state == rules.UNKNOWN
    # A limit that is off is not needed: the other decides.
    assert rules.replication(True, 10, None, limit, 0).state == rules.CLEAR
    limits = replication.LagLimits(limit, 0)
    assert limits.lagging(limit + 1, None) is True and limits.lagging(1, None) is False
    assert limits.lagging(None, 99_999) is None
