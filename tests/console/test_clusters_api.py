"""Clusters and brokers over REST, against a real nameserver and broker."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from console.audit.models import AuditEntry
from nameserver.models import Cluster
from tests.servers import wait_for

from .conftest import Servers

pytestmark = pytest.mark.django_db


def test_the_cluster_list_shows_each_persona_its_role(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    roles = {
        name: [(c["name"], c["role"]) for c in personas[name].get("/api/clusters/").json()["clusters"]]
        for name in ("admin", "operator", "viewer", "outsider")
    }
    assert roles == {
        "admin": [("default", "admin")],
        "operator": [("default", "operator")],
        "viewer": [("default", "viewer")],
        "outsider": [],
    }
    assert personas["anonymous"].get("/api/clusters/").status_code == 403


def test_brokers_come_with_their_figures_and_outsiders_get_nothing(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    body = personas["viewer"].get("/api/clusters/default/brokers/").json()
    (broker,) = body["brokers"]
    assert broker["addr"] == on_servers.broker_addr and broker["brokerName"] == "broker-a"
    assert broker["cluster"] == "ConsoleCluster" and broker["role"] == "master"
    assert broker["version"].startswith("Quiver") and broker["error"] is None
    assert broker["putTps"] is not None and 0 <= broker["diskUsedPercent"] <= 100
    assert broker["lastHeartbeat"] > 0 and broker["lastHeartbeat"] >= broker["bootTimestamp"]
    assert body["unreadable"] == []
    assert personas["outsider"].get("/api/clusters/default/brokers/").status_code == 403
    assert personas["viewer"].get("/api/clusters/nope/brokers/").status_code == 404


def test_a_cluster_whose_nameservers_do_not_answer_is_a_503_naming_them(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    Cluster.objects.create(name="gone", namesrv_addr="127.0.0.1:1")
    response = personas["admin"].get("/api/clusters/gone/brokers/")
    assert response.status_code == 503
    body = response.json()
    assert body["error"] == "broker_unreachable" and "127.0.0.1:1" in body["detail"]


def test_broker_config_is_read_by_viewers_and_changed_by_admins_with_an_audit_row(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    url = f"/api/clusters/default/brokers/{on_servers.broker_addr}/config/"
    config = personas["viewer"].get(url).json()["config"]
    assert config["brokerName"] == "broker-a"
    change = {"changes": {"autoCreateTopicEnable": "false"}}
    assert personas["viewer"].put(url, change, content_type="application/json").status_code == 403
    assert personas["operator"].put(url, change, content_type="application/json").status_code == 403
    response = personas["admin"].put(url, change, content_type="application/json")
    assert response.status_code == 200 and response.json()["config"]["autoCreateTopicEnable"] == "false"
    row = AuditEntry.objects.get(action="broker.config.update")
    assert row.username == "admin" and row.result == "ok" and row.target == on_servers.broker_addr
    assert row.before == {"autoCreateTopicEnable": "true"} and row.after == {"autoCreateTopicEnable": "false"}
    # A setting the broker refuses: a 4xx/5xx with the broker's words, and an error row.
    bad = personas["admin"].put(url, {"changes": {"deleteWhen": "25"}}, content_type="application/json")
    assert bad.status_code == 502 and bad.json()["brokerCodeName"] == "SYSTEM_ERROR"
    assert "deleteWhen" in bad.json()["remark"]
    assert AuditEntry.objects.filter(action="broker.config.update", result="error").count() == 1
    personas["admin"].put(
        url, {"changes": {"autoCreateTopicEnable": "true"}}, content_type="application/json"
    )
    assert personas["admin"].put(url, {"changes": {}}, content_type="application/json").status_code == 400


def test_the_settings_page_changes_a_broker_as_the_api_does_with_the_same_audit_row(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    # One service changes the broker for both surfaces: the page's row holds before and after too.
    page = f"/clusters/default/brokers/{on_servers.broker_addr}/config/"
    changed = personas["admin"].post(page, {"key": "autoCreateTopicEnable", "value": "false"}, follow=True)
    assert b"is now" in changed.content
    row = AuditEntry.objects.get(action="broker.config.update")
    assert row.username == "admin" and row.result == "ok" and row.target == on_servers.broker_addr
    assert row.before == {"autoCreateTopicEnable": "true"} and row.after == {"autoCreateTopicEnable": "false"}
    refused = personas["admin"].post(page, {"key": "deleteWhen", "value": "99"}, follow=True)
    assert b"not changed" in refused.content and b"SYSTEM_ERROR" in refused.content
    assert AuditEntry.objects.filter(action="broker.config.update", result="error").count() == 1
    personas["admin"].post(page, {"key": "autoCreateTopicEnable", "value": "true"})
    url = f"/api/clusters/default/brokers/{on_servers.broker_addr}/config/"
    assert personas["viewer"].get(url).json()["config"]["autoCreateTopicEnable"] == "true"


def test_health_checks_pass_on_a_healthy_cluster(on_servers: Servers, personas: dict[str, Client]) -> None:
    body = personas["viewer"].get("/api/clusters/default/health/").json()
    checks = {c["check"]: c for c in body["checks"]}
    assert checks["brokers answer"]["ok"] and checks["every broker has a master"]["ok"]


def test_only_superusers_change_the_cluster_list(on_servers: Servers, personas: dict[str, Client]) -> None:
    new = {"name": "east", "namesrv_addr": "10.0.0.1:9876;10.0.0.2:9876"}
    assert (
        personas["operator"].post("/api/clusters/", new, content_type="application/json").status_code == 403
    )
    assert personas["admin"].post("/api/clusters/", new, content_type="application/json").status_code == 201
    bad = personas["admin"].post(
        "/api/clusters/", {"name": "x", "namesrv_addr": "nope"}, content_type="application/json"
    )
    assert bad.status_code == 400 and "namesrv_addr" in bad.json()["fields"]
    assert personas["admin"].delete("/api/clusters/east/").status_code == 204
    assert [r.action for r in AuditEntry.objects.order_by("id")] == ["cluster.create", "cluster.delete"]


def test_the_openapi_schema_and_docs_are_served_without_a_cdn(personas: dict[str, Client]) -> None:
    schema = personas["viewer"].get("/api/schema/")
    assert schema.status_code == 200 and b"/api/clusters/{cluster}/brokers/" in schema.content
    docs = personas["viewer"].get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn" not in docs.content.lower() and b"swagger-ui" in docs.content
    # Signed-in users only, as every endpoint (issue 15): the docs page sends to the login.
    assert personas["anonymous"].get("/api/schema/").status_code in (401, 403)
    away = personas["anonymous"].get("/api/docs/")
    assert away.status_code == 302 and away["Location"].startswith("/login")


class Undecided:
    """A transaction listener that never decides: its half messages stay pending."""

    def execute_local_transaction(self, msg: object, arg: object) -> object:
        from broker_core.client.producer.transaction import LocalTransactionState

        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, msg: object) -> object:
        from broker_core.client.producer.transaction import LocalTransactionState

        return LocalTransactionState.UNKNOW


def test_the_delayed_backlog_and_pending_half_messages_are_shown(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    from broker_core.client.message import Message
    from broker_core.client.producer.transaction import TransactionProducer

    op = personas["operator"]
    op.post("/api/clusters/default/topics/", {"name": "Later"}, content_type="application/json")
    sent = op.post(
        "/api/clusters/default/topics/Later/messages/",
        {"body": "in 2 h", "delayLevel": 18},
        content_type="application/json",
    )
    assert sent.status_code == 201
    producer = TransactionProducer(
        "tx-producers", on_servers.namesrv_addr, transaction_listener=Undecided()
    ).start()
    due = int(time.time() * 1000) + 3_600_000
    try:
        producer.send_message_in_transaction(Message("Later", b"undecided"))
        producer.send(Message("Later", b"timer in 1 h", properties={"TIMER_DELIVER_MS": str(due)}))
    finally:
        producer.shutdown()

    def status() -> dict:
        (broker,) = personas["viewer"].get("/api/clusters/default/schedule/").json()["brokers"]
        ready = (
            broker["pendingHalfMessages"]
            and broker["delayLevels"][17]["waiting"]
            and broker["timers"]["nextDueMs"]  # set once the broker's timer has read it
        )
        return broker if ready else {}

    broker = wait_for(status, 10, "the delayed and half messages")
    level = broker["delayLevels"][17]
    assert level["level"] == 18 and level["delayMs"] == 7_200_000
    assert level["nextDueMs"] - broker["timestampMs"] > 7_000_000
    assert broker["timers"] == {"waiting": 1, "nextDueMs": due}
    (half,) = [h for h in broker["halfMessages"] if h["producerGroup"] == "tx-producers"]
    assert half["topic"] == "Later" and half["ageMs"] >= 0
    assert personas["outsider"].get("/api/clusters/default/schedule/").status_code == 403


def test_the_audit_log_is_searchable_and_scoped(on_servers: Servers, personas: dict[str, Client]) -> None:
    personas["operator"].post(
        "/api/clusters/default/topics/", {"name": "AuditMe"}, content_type="application/json"
    )
    personas["admin"].post(
        "/api/clusters/", {"name": "west", "namesrv_addr": "10.1.1.1:9876"}, content_type="application/json"
    )
    mine = personas["viewer"].get("/api/audit/?target=AuditMe").json()
    assert [r["action"] for r in mine["results"]] == ["topic.create"] and mine["results"][0][
        "user"
    ] == "operator"
    # Rows are scoped by cluster: the viewer may view every cluster, the outsider none.
    assert personas["viewer"].get("/api/audit/?action=cluster.create").json()["count"] == 1
    assert personas["outsider"].get("/api/audit/").json()["count"] == 0
    assert personas["viewer"].get("/api/audit/?since=yesterday").status_code == 400
    page = personas["viewer"].get("/audit/?target=AuditMe")
    assert page.status_code == 200 and b"topic.create" in page.content
    assert personas["anonymous"].get("/audit/").status_code == 302


def test_a_broker_without_acl_says_so(on_servers: Servers, personas: dict[str, Client]) -> None:
    response = personas["viewer"].get("/api/clusters/default/acl/")
    assert response.status_code == 502 and "aclEnable = false" in response.json()["remark"]


def test_traffic_per_minute_comes_from_the_offset_history(
    on_servers: Servers, personas: dict[str, Client], settings: object, tmp_path: object
) -> None:
    import datetime as dt

    from broker_core.client.adminmodels import OffsetSnapshot
    from console.maintenance import history

    settings.QUIVER = {**settings.QUIVER, "HISTORY_DIR": tmp_path}  # type: ignore[attr-defined]
    t0 = int(dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC).timestamp() * 1000)

    def snap(ts: int, boot: int, orders: int, audit: int) -> OffsetSnapshot:
        body = {
            "brokerName": "broker-a",
            "timestampMs": ts,
            "bootTimestamp": boot,
            "queues": [],
            "topicPuts": {"Orders": orders, "Audit": audit},
            "groupGets": [],
        }
        return OffsetSnapshot.from_json(body)

    # Totals since boot: +30 and +5 in the first minute, then a restart (counting again from 0).
    for ts, boot, orders, audit in (
        (t0, 1, 100, 10),
        (t0 + 30_000, 1, 130, 15),
        (t0 + 60_000, 2, 7, 0),
        (t0 + 90_000, 2, 27, 1),
    ):
        history.append_snapshot(tmp_path, snap(ts, boot, orders, audit), "default", on_servers.broker_addr)  # type: ignore[arg-type]
    body = personas["viewer"].get("/api/clusters/default/traffic/?date=2026-11-20&by=topic").json()
    assert body["series"]["Orders"] == [[t0, 30], [t0 + 60_000, 20]]
    assert body["top"][0] == {"name": "Orders", "messages": 50}
    per_broker = personas["viewer"].get("/api/clusters/default/traffic/?date=2026-11-20").json()["series"]
    assert per_broker == {"broker-a": [[t0, 35], [t0 + 60_000, 21]]}
    assert personas["viewer"].get("/api/clusters/default/traffic/?date=someday").status_code == 400


def test_what_came_before_the_first_snapshot_of_the_day_is_counted(
    on_servers: Servers, personas: dict[str, Client], settings: object, tmp_path: object
) -> None:
    """A topic's first burst before the platform's first snapshot is not lost: the broker
    reports each counter's total when the day began (its morning), and a broker that booted
    that day counted everything that day."""
    import datetime as dt

    from broker_core.client.adminmodels import OffsetSnapshot
    from console.maintenance import history

    settings.QUIVER = {**settings.QUIVER, "HISTORY_DIR": tmp_path}  # type: ignore[attr-defined]
    t0 = int(dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC).timestamp() * 1000)
    midnight = int(dt.datetime(2026, 11, 21, tzinfo=dt.UTC).timestamp() * 1000)
    rows = [
        # booted yesterday; Orders had 900 at midnight, 1,000 at the first snapshot (100 today)
        (
            "broker-a",
            {
                "brokerName": "broker-a",
                "bootTimestamp": 5,
                "topicPuts": {"Orders": 1000, "%DLQ%g": 30},
                "topicPutsMorning": {"Orders": 900},
            },
        ),
        # booted today, from a broker that does not report mornings: all of its 40 came today
        ("broker-b", {"brokerName": "broker-b", "bootTimestamp": midnight + 1, "topicPuts": {"Orders": 40}}),
        # booted yesterday, no morning reported: unknown, only a baseline for the next row
        ("broker-c", {"brokerName": "broker-c", "bootTimestamp": 5, "topicPuts": {"Orders": 70}}),
    ]
    for ts in (t0, t0 + 60_000):
        for addr, body in rows:
            grown = {t: n + (ts - t0) // 60_000 for t, n in body["topicPuts"].items()}  # +1 a minute
            snapshot = OffsetSnapshot.from_json(
                {**body, "timestampMs": ts, "queues": [], "groupGets": [], "topicPuts": grown}
            )
            history.append_snapshot(tmp_path, snapshot, "default", addr)  # type: ignore[arg-type]
    body = personas["viewer"].get("/api/clusters/default/traffic/?date=2026-11-21&by=topic").json()
    assert body["series"]["Orders"] == [[t0, 100 + 40], [t0 + 60_000, 3]]
    assert body["series"]["%DLQ%g"] == [
        [t0, 30],
        [t0 + 60_000, 1],
    ]  # a counter missing from the morning began today
    assert body["asOf"] == t0 + 60_000
