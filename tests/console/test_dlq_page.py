"""The DLQ pages against a real nameserver and broker (issue 15): a group that never
dead-lettered says so in words; the cluster's overview counts every group's dead letters as
the broker does; a group's page shows the total and pages through it, keeps the table when
Resend is pressed with nothing selected, and "select all" resends every dead letter through
the same task, one outcome per message."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from broker_core.broker.topics import TopicConfig
from broker_core.client.consumer.push import PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.errors import AdminError
from broker_core.remoting.codes import ResponseCode
from console.core.brokers import admin_call
from console.core.models import LongTask
from console.dlq.tasks import long_resend_dlq
from tests.listeners import AlwaysFails
from tests.servers import wait_for

from .conftest import Servers

TOPIC = "DeadLetterTopic"
GROUP = "failing-group"
DEAD = 150  # more than one page of 100
PAGE = f"/clusters/default/groups/{GROUP}/dlq/"
API = f"/api/clusters/default/groups/{GROUP}/dlq/"


def text_of(response: Any) -> str:
    """What a person reads on the page: its text without tags, spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", response.content.decode()).split()).replace(" .", ".")


def stored(namesrv_addr: str, topic: str) -> int:
    """What the broker stores of ``topic`` (max - min offset over its queues)."""
    return int(admin_call(namesrv_addr, lambda admin: admin.topic_stats(topic)).total_messages)


def dead_lettered(namesrv_addr: str) -> int:
    """What GROUP's DLQ stores so far: 0 until the broker has created it (the first message
    dead-lettered creates the topic, a moment after the consumer starts failing)."""
    try:
        return stored(namesrv_addr, f"%DLQ%{GROUP}")
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return 0


@pytest.fixture(scope="module")
def dead_letters(servers: Servers) -> Iterator[int]:
    """DEAD messages of TOPIC dead-lettered by GROUP (its consumer gone again, so nothing
    comes back from a resend to change the counts)."""
    admin_call(
        servers.namesrv_addr,
        lambda admin: admin.create_or_update_topic(TopicConfig(TOPIC, 2, 2), broker_addr=servers.broker_addr),
    )
    producer = Producer("dlq-page-producer", servers.namesrv_addr).start()
    try:
        for i in range(DEAD):
            producer.send(Message(TOPIC, f"dead {i}".encode(), tags="T", keys=f"k{i}"))
    finally:
        producer.shutdown()
    consumer = (
        PushConsumer(
            GROUP, servers.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", max_reconsume_times=0
        )
        .subscribe(TOPIC)
        .register_listener(AlwaysFails())
        .start()
    )
    try:
        wait_for(lambda: dead_lettered(servers.namesrv_addr) == DEAD, 60, "every message dead-lettered")
    finally:
        consumer.shutdown()
    yield DEAD


@pytest.mark.django_db
def test_a_group_that_never_dead_lettered_shows_no_dead_letters(
    on_servers: Servers, console_redis: Any, personas: dict[str, Client]
) -> None:
    page = personas["viewer"].get("/clusters/default/groups/calm-group/dlq/")
    assert page.status_code == 200
    text = text_of(page)
    assert "No dead letters: calm-group has never given up on a message" in text
    assert "%DLQ%calm-group does not exist yet" in text
    assert "GET_ROUTEINFO_BY_TOPIC" not in text and "TOPIC_NOT_EXIST" not in text
    retries = text_of(personas["viewer"].get("/clusters/default/groups/calm-group/dlq/?kind=retry"))
    assert "No retries: calm-group" in retries and "%RETRY%calm-group" in retries
    api = personas["viewer"].get("/api/clusters/default/groups/calm-group/dlq/")
    assert api.status_code == 200
    body = api.json()
    assert body["messages"] == [] and body["never"] is True and body["topic"] == "%DLQ%calm-group"
    paged = personas["viewer"].get("/api/clusters/default/groups/calm-group/dlq/?page=1").json()
    assert paged["never"] is True and paged["total"] == 0 and paged["messages"] == []


@pytest.mark.django_db
def test_the_overview_of_a_cluster_without_dead_letters_says_so(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    answer = personas["viewer"].get("/api/clusters/default/dlq/")
    assert answer.status_code == 200
    assert answer.json() == {"groups": [], "total": 0, "groupsWithDeadLetters": 0}
    page = personas["viewer"].get("/clusters/default/dlq/")
    assert page.status_code == 200
    text = text_of(page)
    assert "No dead letters: no consumer group of this cluster has given up on a message yet." in text
    assert 'href="/clusters/default/dlq/" aria-current="page">Dead letters</a>' in page.content.decode()


@pytest.mark.django_db
def test_the_overview_counts_every_groups_dead_letters_as_the_broker_does(
    on_servers: Servers, dead_letters: int, personas: dict[str, Client]
) -> None:
    broker_count = stored(on_servers.namesrv_addr, f"%DLQ%{GROUP}")
    assert broker_count == dead_letters
    body = personas["viewer"].get("/api/clusters/default/dlq/").json()
    assert body["total"] == broker_count and body["groupsWithDeadLetters"] == 1
    [row] = body["groups"]
    assert row["group"] == GROUP and row["topic"] == f"%DLQ%{GROUP}" and row["deadLetters"] == broker_count
    assert 0 < row["oldestStoreTimestamp"] <= row["newestStoreTimestamp"]
    page = personas["viewer"].get("/clusters/default/dlq/")
    text = text_of(page)
    assert f"{broker_count} dead letters in 1 group." in text
    assert f'href="{PAGE}" class="dlq-link">read and resend</a>' in page.content.decode()
    # The group's page and the REST page agree with the overview.
    assert personas["viewer"].get(API + "?page=1").json()["total"] == broker_count


@pytest.mark.django_db
def test_the_group_page_shows_the_total_and_pages_through_every_dead_letter(
    on_servers: Servers, dead_letters: int, personas: dict[str, Client]
) -> None:
    first = personas["operator"].get(PAGE)
    assert first.status_code == 200
    html, text = first.content.decode(), text_of(first)
    assert f"{dead_letters} dead letters, showing 1–100 (page 1 of 2)." in text
    assert html.count('name="msgId"') == 100
    assert f"Select all {dead_letters} dead letters (every page)" in text
    # The Resend button comes before the table (and again after it).
    assert (
        html.index('id="resend-button"')
        < html.index('id="dead-letters"')
        < html.index('id="resend-button-bottom"')
    )
    assert 'rel="next"' in html and "page=2" in html
    second = personas["operator"].get(PAGE + "?page=2")
    assert f"{dead_letters} dead letters, showing 101–150 (page 2 of 2)." in text_of(second)
    assert second.content.decode().count('name="msgId"') == dead_letters - 100
    pages = [personas["viewer"].get(API + f"?page={n}").json() for n in (1, 2)]
    assert [(p["first"], p["last"], p["pages"]) for p in pages] == [(1, 100, 2), (101, 150, 2)]
    ids = [m["msgId"] for p in pages for m in p["messages"]]
    assert len(set(ids)) == dead_letters
    assert {m["tags"] for p in pages for m in p["messages"]} == {"T"}
    # A tag or key narrows the rows of the page, not the total.
    narrowed = text_of(personas["viewer"].get(PAGE + "?page=1&key=k7"))
    assert (
        f"{dead_letters} dead letters, showing 1–100 (page 1 of 2); of these, 1 match key “k7”." in narrowed
    )


@pytest.mark.django_db
def test_resend_with_nothing_selected_keeps_the_table_and_the_page(
    on_servers: Servers, dead_letters: int, console_redis: Any, personas: dict[str, Client]
) -> None:
    refused = personas["operator"].post(PAGE + "resend/", {"kind": "dlq", "page": "2"})
    assert refused.status_code == 400
    html, text = refused.content.decode(), text_of(refused)
    assert "Select at least one message to resend" in text
    assert 'id="dead-letters"' in html and html.count('name="msgId"') == dead_letters - 100
    assert "showing 101–150 (page 2 of 2)" in text
    # A bad target topic is refused the same way, the ticked message still ticked.
    some = personas["viewer"].get(API + "?page=2").json()["messages"][0]["msgId"]
    wrong = personas["operator"].post(
        PAGE + "resend/", {"kind": "dlq", "page": "2", "msgId": some, "targetTopic": "NoSuchTopic"}
    )
    assert wrong.status_code == 400
    assert "Nothing was resent: the target topic NoSuchTopic cannot be used" in text_of(wrong)
    assert f'value="{some}" aria-label="select {some}" checked' in wrong.content.decode()
    assert LongTask.objects.count() == 0
    assert personas["viewer"].post(PAGE + "resend/", {"kind": "dlq", "msgId": some}).status_code == 403


@pytest.mark.django_db
def test_select_all_resends_every_dead_letter_through_the_resend_task(
    on_servers: Servers, dead_letters: int, console_redis: Any, personas: dict[str, Client]
) -> None:
    page = personas["operator"].get(PAGE)
    spans = re.search(r'name="spans" value="([^"]*)"', page.content.decode())
    assert spans is not None
    before = stored(on_servers.namesrv_addr, TOPIC)
    sent = personas["operator"].post(
        PAGE + "resend/",
        {"kind": "dlq", "page": "1", "all": "1", "spans": spans.group(1).replace("&quot;", '"')},
    )
    assert sent.status_code == 302 and "/tasks/" in sent["Location"]
    row = LongTask.objects.get()
    assert row.kind == "dlq_resend"
    assert row.title == f"Resend all {dead_letters} dead letters of {GROUP} to their original topic (default)"
    # The queued task, run here as the worker would: every dead letter back in its topic.
    result = long_resend_dlq(**row.params)
    assert result["note"] == f"{dead_letters} resent, 0 failed"
    assert result["done"] == result["total"] == dead_letters
    assert len(result["result"]) == dead_letters and all(o["ok"] for o in result["result"])
    assert all(o["detail"].startswith(f"{TOPIC}@") for o in result["result"])
    wait_for(lambda: stored(on_servers.namesrv_addr, TOPIC) == before + dead_letters, 20, "the resent ones")
    # The same over REST: {"all": true} queues the task for every stored dead letter.
    answer = personas["operator"].post(API + "resend/", {"all": True}, content_type="application/json")
    assert answer.status_code == 202, answer.content
    assert answer.json()["messages"] == dead_letters
    assert personas["operator"].post(API + "resend/", {}, content_type="application/json").status_code == 400
    none = personas["operator"].post(
        "/api/clusters/default/groups/calm-group/dlq/resend/", {"all": True}, content_type="application/json"
    )
    assert none.status_code == 409 and "calm-group has no dead letters to resend" in none.json()["detail"]
