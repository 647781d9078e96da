"""Topics over REST against a real broker, as each persona: list and filter, create, read,
send a test message, find offsets by time, and delete only after the impact check."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from console.audit.models import AuditEntry
from tests.servers import wait_for

from .conftest import Servers

pytestmark = pytest.mark.django_db

BASE = "/api/clusters/default/topics/"


def create(client: Client, name: str, **extra: object) -> object:
    body = {"name": name, "readQueueNums": 4, "writeQueueNums": 4, **extra}
    return client.post(BASE, body, content_type="application/json")


def test_operators_create_topics_viewers_and_outsiders_cannot(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    assert create(personas["viewer"], "Nope").status_code == 403
    assert create(personas["outsider"], "Nope").status_code == 403
    response = create(personas["operator"], "Orders")
    assert response.status_code == 201 and response.json()["brokers"] == [on_servers.broker_addr]
    row = AuditEntry.objects.get(action="topic.create")
    assert row.username == "operator" and row.target == "Orders" and row.result == "ok"
    assert create(personas["operator"], "bad name!").status_code == 400
    assert create(personas["operator"], "Orders", readQueueNums=0).status_code == 400


def test_the_list_hides_system_topics_filters_and_pages(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    for name in ("Alpha", "Beta", "AlphaFifo"):
        create(personas["admin"], name, order=name.endswith("Fifo"))
    names = [t["name"] for t in personas["viewer"].get(BASE).json()["results"]]
    assert {"Alpha", "Beta", "AlphaFifo"} <= set(names)
    assert "TBW102" not in names and not any(n.startswith("%") for n in names)
    everything = personas["viewer"].get(BASE + "?type=all&page_size=500").json()["results"]
    assert {t["name"]: t["type"] for t in everything}["TBW102"] == "SYSTEM"
    found = personas["viewer"].get(BASE + "?search=alpha").json()
    assert sorted(t["name"] for t in found["results"]) == ["Alpha", "AlphaFifo"]
    fifo = personas["viewer"].get(BASE + "?type=FIFO").json()["results"]
    assert [t["name"] for t in fifo] == ["AlphaFifo"]
    paged = personas["viewer"].get(BASE + "?page=2&page_size=1").json()
    assert paged["page"] == 2 and len(paged["results"]) == 1 and paged["count"] >= 3
    assert personas["viewer"].get(BASE + "?type=WEIRD").status_code == 400
    assert personas["viewer"].get(BASE + "?page=x").status_code == 400


def test_a_topic_shows_its_route_queues_and_takes_test_messages(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    create(personas["operator"], "Payments")
    before = int(time.time() * 1000) - 1000
    sent = personas["operator"].post(
        BASE + "Payments/messages/",
        {"body": "hello", "tags": "TagA", "keys": "order-1", "properties": {"region": "eu"}},
        content_type="application/json",
    )
    assert sent.status_code == 201
    msg = sent.json()
    assert len(msg["msgId"]) == 32 and len(msg["offsetMsgId"]) == 32 and msg["queueOffset"] == 0
    assert (
        personas["viewer"]
        .post(BASE + "Payments/messages/", {"body": "x"}, content_type="application/json")
        .status_code
        == 403
    )
    # The consume queue is written just after the send is acknowledged: wait for it.
    detail = wait_for(
        lambda: (d := personas["viewer"].get(BASE + "Payments/").json())["totalMessages"] and d,
        10,
        "the message",
    )
    assert detail["type"] == "NORMAL" and detail["totalMessages"] == 1
    (queue,) = [q for q in detail["queues"] if q["messages"]]
    assert queue["queueId"] == msg["queueId"] and queue["earliestStoreTimestamp"] >= before
    assert detail["route"]["queueDatas"][0]["perm"] == "RW"
    offsets = personas["viewer"].get(BASE + f"Payments/offset-by-time/?timestamp={before}").json()["queues"]
    assert {q["queueId"]: q["offset"] for q in offsets}[msg["queueId"]] == 0
    assert personas["viewer"].get(BASE + "Payments/offset-by-time/").status_code == 400
    assert personas["viewer"].get(BASE + "NoSuchTopic/").status_code == 404


def test_deleting_needs_the_admin_role_and_a_confirmation_after_the_impact(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    create(personas["operator"], "Doomed")
    personas["operator"].post(
        BASE + "Doomed/messages/", {"body": "last words"}, content_type="application/json"
    )
    assert personas["operator"].delete(BASE + "Doomed/").status_code == 403
    wait_for(lambda: personas["viewer"].get(BASE + "Doomed/").json()["totalMessages"], 10, "the message")
    check = personas["admin"].delete(BASE + "Doomed/")
    assert check.status_code == 409 and check.json()["impact"]["messages"] == 1
    assert personas["viewer"].get(BASE + "Doomed/impact/").json()["safe"] is False
    gone = personas["admin"].delete(BASE + "Doomed/?confirm=Doomed")
    assert gone.status_code == 204
    row = AuditEntry.objects.get(action="topic.delete")
    assert row.before["messages"] == 1 and row.after == {"deletedOn": [on_servers.broker_addr]}
    assert "Doomed" not in [t["name"] for t in personas["viewer"].get(BASE).json()["results"]]


def test_a_bad_topic_name_is_refused_in_words_and_the_form_states_the_rule(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    """Issue 15: the form's pattern compiles in Chromium (``v`` flag), the rule is on the page,
    and a refusal is a sentence, not a serializer's repr."""
    import re

    page = personas["operator"].get("/clusters/default/topics/").content.decode()
    pattern = re.search(r'name="name" required pattern="([^"]+)"', page)
    assert pattern is not None and pattern.group(1) == r"[%\|a-zA-Z0-9_\-]{1,127}"
    assert "Letters, digits, %, |, _ and -, at most 127 characters (no spaces)." in page
    refused = personas["operator"].post("/clusters/default/topics-new/", {"name": "my topic"}, follow=True)
    text = refused.content.decode()
    assert "&#x27;my topic&#x27; was not created: name: a topic name has letters, digits" in text
    assert "ErrorDetail" not in text
    api = create(personas["operator"], "my topic")
    assert api.status_code == 400 and "a topic name has letters, digits" in str(api.json())
