"""Consumer groups over REST against a real broker and a real consumer: the list with lag in
messages and seconds, per-queue progress, offset resets with preview, config, delete."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.test import Client

from broker_core.client.consumer.push import PushConsumer
from console.audit.models import AuditEntry
from tests.listeners import Counter
from tests.servers import wait_for

from .conftest import Servers, online_client

pytestmark = pytest.mark.django_db

GROUPS = "/api/clusters/default/groups/"
_runs = iter(range(1_000_000))


@pytest.fixture
def names() -> tuple[str, str]:
    """A topic and a group of this test's own (the servers are shared by the module)."""
    n = next(_runs)
    return f"GroupTopic{n}", f"billing{n}"


def send(client: Client, topic: str, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        url = f"/api/clusters/default/topics/{topic}/messages/"
        assert client.post(url, {"body": f"m-{i}"}, content_type="application/json").status_code == 201


@pytest.fixture
def billing(
    on_servers: Servers, personas: dict[str, Client], names: tuple[str, str]
) -> Iterator[dict[str, Client]]:
    """The group consumed 10 messages of its topic (while online), then 5 more arrived."""
    topic, group = names
    operator = personas["operator"]
    body = {"name": topic, "readQueueNums": 2, "writeQueueNums": 2}
    operator.post("/api/clusters/default/topics/", body, content_type="application/json")
    send(operator, topic, 10)
    got = Counter()
    consumer = (
        PushConsumer(group, on_servers.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        .subscribe(topic)
        .register_listener(got)
        .start()
    )
    try:
        wait_for(lambda: got.count() == 10, 30, "the first ten messages")
        online = wait_for(
            lambda: [
                g
                for g in personas["viewer"].get(GROUPS).json()["results"]
                if g["group"] == group and g["online"]
            ],
            30,
            "billing online in the list",
        )
        assert online[0]["clients"] == 1 and online[0]["messageModel"] == "CLUSTERING"
    finally:
        consumer.shutdown()  # commits its offsets
    send(operator, topic, 5, start=10)
    yield personas


def billing_row(client: Client, group: str) -> dict:
    (row,) = [g for g in client.get(GROUPS + "?search=bill").json()["results"] if g["group"] == group]
    return row


def test_the_list_shows_lag_in_messages_and_seconds(
    billing: dict[str, Client], names: tuple[str, str]
) -> None:
    topic, group = names
    time.sleep(0.05)  # the waiting messages are a little older than the snapshot
    row = wait_for(
        lambda: (r := billing_row(billing["viewer"], group))["lag"] == 5 and not r["online"] and r,
        30,
        "lag 5",
    )
    assert topic in row["topics"]
    assert row["secondsBehind"] > 0 and row["clients"] == 0
    assert billing["outsider"].get(GROUPS).status_code == 403
    ranked = billing["viewer"].get(GROUPS + "?sort=-lag").json()["results"]
    assert ranked[0]["lag"] >= ranked[-1]["lag"]
    assert billing["viewer"].get(GROUPS + "?sort=bogus").status_code == 400


def test_a_group_shows_per_queue_progress(billing: dict[str, Client], names: tuple[str, str]) -> None:
    topic, group = names
    detail = billing["viewer"].get(GROUPS + f"{group}/").json()
    queues = [q for q in detail["queues"] if q["topic"] == topic]
    assert sum(q["lag"] for q in queues) == 5 and sum(q["brokerOffset"] for q in queues) == 15
    assert detail["online"] is False and detail["connection"] is None
    assert billing["viewer"].get(GROUPS + "nobody-here/").status_code == 404


def test_offsets_reset_with_a_preview_first_and_a_result_after(
    billing: dict[str, Client], names: tuple[str, str]
) -> None:
    topic, group = names
    url = GROUPS + f"{group}/offsets/"
    to_start = {"topic": topic, "mode": "earliest"}
    preview = billing["viewer"].post(url + "preview/", to_start, content_type="application/json").json()
    assert {q["newOffset"] for q in preview["queues"]} == {0}
    assert sum(q["delta"] for q in preview["queues"]) == -10
    assert billing_row(billing["viewer"], group)["lag"] in (5, None)  # a preview changes nothing
    assert (
        billing["viewer"].post(url + "reset/", to_start, content_type="application/json").status_code == 403
    )
    done = billing["operator"].post(url + "reset/", to_start, content_type="application/json").json()
    assert done["ok"] and [q["resultOffset"] for q in done["queues"]] == [0, 0]
    row = AuditEntry.objects.get(action="group.offsets.reset")
    assert (
        row.target == f"{group}@{topic}" and sum(row.before.values()) == 10 and sum(row.after.values()) == 0
    )
    queue = preview["queues"][0]
    exact = {
        "topic": topic,
        "mode": "exact",
        "offsets": [{**{k: queue[k] for k in ("brokerName", "queueId")}, "offset": 1}],
    }
    result = billing["operator"].post(url + "reset/", exact, content_type="application/json").json()
    assert result["queues"][0]["resultOffset"] == 1
    too_far = {**exact, "offsets": [{**exact["offsets"][0], "offset": 10_000}]}
    bad = billing["operator"].post(url + "reset/", too_far, content_type="application/json")
    assert bad.status_code == 400 and "outside" in bad.json()["detail"]
    latest = billing["operator"].post(
        url + "reset/", {"topic": topic, "mode": "latest"}, content_type="application/json"
    )
    assert latest.json()["ok"]
    assert (
        billing["operator"]
        .post(url + "preview/", {"topic": topic, "mode": "timestamp"}, content_type="application/json")
        .status_code
        == 400
    )


def test_subscription_group_config_and_delete_after_the_impact_check(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    body = {"name": "audit-readers", "retryMaxTimes": 3, "consumeBroadcastEnable": False}
    assert personas["viewer"].post(GROUPS, body, content_type="application/json").status_code == 403
    created = personas["operator"].post(GROUPS, body, content_type="application/json")
    assert created.status_code == 201 and created.json()["config"]["retryMaxTimes"] == 3
    detail = personas["viewer"].get(GROUPS + "audit-readers/").json()
    assert detail["configs"]["broker-a"]["retryMaxTimes"] == 3
    assert personas["operator"].delete(GROUPS + "audit-readers/").status_code == 403
    check = personas["admin"].delete(GROUPS + "audit-readers/")
    assert check.status_code == 409 and check.json()["impact"]["safe"] is True
    assert personas["admin"].delete(GROUPS + "audit-readers/?confirm=audit-readers").status_code == 204
    assert personas["viewer"].get(GROUPS + "audit-readers/").status_code == 404
    assert [r.action for r in AuditEntry.objects.order_by("id")] == ["group.create", "group.delete"]


def test_an_online_clients_running_info(
    on_servers: Servers, personas: dict[str, Client], names: tuple[str, str]
) -> None:
    topic, group = names
    with online_client(on_servers, personas, topic, group) as client_id:
        info = wait_for(
            lambda: (
                (r := personas["viewer"].get(GROUPS + f"{group}/clients/{client_id}/")).status_code == 200
                and r
            ),
            30,
            "the running info",
        ).json()["runningInfo"]
        assert '"PROP_CONSUME_TYPE"' in info and '"mqTable"' in info and topic in info
        # The group's page says which client holds each of its queues.
        queues = wait_for(
            lambda: [
                q
                for q in personas["viewer"].get(GROUPS + f"{group}/").json()["queues"]
                if q["topic"] == topic and q.get("clientId")
            ],
            30,
            "queues with their client",
        )
        assert {q["clientId"] for q in queues} == {client_id}
        page = personas["viewer"].get(f"/clusters/default/groups/{group}/clients/{client_id}/")
        assert page.status_code == 200 and b"PROP_CONSUME_TYPE" in page.content


def test_group_thresholds_are_kept_per_cluster(on_servers: Servers, personas: dict[str, Client]) -> None:
    url = GROUPS + "watched/monitor/"
    assert personas["viewer"].get(url).status_code == 404
    assert personas["viewer"].put(url, {"minClients": 2}, content_type="application/json").status_code == 403
    saved = personas["operator"].put(url, {"minClients": 2, "maxLag": 1000}, content_type="application/json")
    assert saved.status_code == 200 and saved.json()["maxLag"] == 1000
    assert (
        personas["operator"].put(url, {"minClients": -1}, content_type="application/json").status_code == 400
    )
    listed = personas["viewer"].get("/api/clusters/default/monitors/").json()["monitors"]
    assert [(m["group"], m["minClients"]) for m in listed] == [("watched", 2)]
    assert personas["operator"].delete(url).status_code == 204
    assert personas["operator"].delete(url).status_code == 404
    assert AuditEntry.objects.filter(action__startswith="group.monitor").count() == 2  # a 404 changed nothing


def test_a_preview_for_a_group_the_cluster_does_not_know_is_refused_like_the_reset(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    """Issue 15: the preview answered 200 with a plan while the reset itself was a 404."""
    url = GROUPS + "no-such-group/offsets/"
    body = {"topic": "AnyTopic", "mode": "earliest"}
    preview = personas["viewer"].post(url + "preview/", body, content_type="application/json")
    assert preview.status_code == 404
    assert "there is no consumer group 'no-such-group' in this cluster" in preview.json()["detail"]
    reset = personas["operator"].post(url + "reset/", body, content_type="application/json")
    assert reset.status_code == 404
