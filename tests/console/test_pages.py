"""The console's pages against a real broker, as each persona: what renders, what is refused."""

from __future__ import annotations

import pytest
from django.test import Client

from console.audit.models import AuditEntry
from tests.servers import wait_for

from .conftest import Servers

pytestmark = pytest.mark.django_db

C = "/clusters/default/"


@pytest.fixture
def topic(on_servers: Servers, personas: dict[str, Client]) -> str:
    op = personas["operator"]
    op.post(
        "/api/clusters/default/topics/",
        {"name": "PageTopic", "readQueueNums": 2, "writeQueueNums": 2},
        content_type="application/json",
    )
    return "PageTopic"


def test_pages_render_for_viewers_and_refuse_outsiders(topic: str, personas: dict[str, Client]) -> None:
    for url in (
        C,
        C + "topics/",
        C + f"topics/{topic}/",
        C + "groups/",
        C + f"topics/{topic}/messages/",
        "/audit/",
        "/",
    ):
        response = personas["viewer"].get(url)
        assert response.status_code == 200, url
    assert personas["outsider"].get(C).status_code == 403
    assert personas["outsider"].get(C + "topics/").status_code == 403
    assert personas["anonymous"].get(C).status_code == 302
    assert personas["viewer"].get("/clusters/nope/").status_code == 404
    assert personas["outsider"].get("/clusters/nope/").status_code == 403  # not told whether it exists
    dashboard = personas["viewer"].get(C).content.decode()
    assert "broker-a" in dashboard and 'id="live-put-tps"' in dashboard and "echarts.min.js" in dashboard
    assert personas["viewer"].get(C + "topics/NoSuchTopic/").status_code == 404


def test_sending_from_the_topic_page_is_for_operators(topic: str, personas: dict[str, Client]) -> None:
    page = personas["viewer"].get(C + f"topics/{topic}/").content.decode()
    assert 'id="send-form"' not in page
    assert personas["viewer"].post(C + f"topics/{topic}/send/", {"body": "x"}).status_code == 403
    done = personas["operator"].post(
        C + f"topics/{topic}/send/", {"body": "from the page", "tags": "T", "properties": "a=1"}, follow=True
    )
    assert b"sent as" in done.content
    assert AuditEntry.objects.filter(action="topic.send", result="ok").count() == 1
    wait_for(
        lambda: (
            b"from the page" in personas["viewer"].get(C + f"topics/{topic}/messages/").content
            or personas["viewer"].get(C + f"topics/{topic}/").context["detail"]["totalMessages"]
        ),
        10,
        "the message",
    )
    listing = personas["viewer"].get(C + f"topics/{topic}/messages/").content.decode()
    msg_id = listing.split('class="msg-link" href="/clusters/default/messages/')[1].split("/")[0]
    detail = personas["viewer"].get(C + f"messages/{msg_id}/").content.decode()
    assert "from the page" in detail and "text in utf-8" in detail and '"a"' not in detail


def test_the_reset_preview_and_apply_partials(
    on_servers: Servers, topic: str, personas: dict[str, Client]
) -> None:
    group = "page-group"
    body = {"name": group}
    personas["operator"].post("/api/clusters/default/groups/", body, content_type="application/json")
    preview = personas["viewer"].post(
        C + f"groups/{group}/reset/preview/", {"topic": topic, "mode": "latest"}
    )
    assert preview.status_code == 200 and b'id="reset-preview"' in preview.content
    assert (
        personas["viewer"]
        .post(C + f"groups/{group}/reset/apply/", {"topic": topic, "mode": "latest"})
        .status_code
        == 403
    )
    applied = personas["operator"].post(
        C + f"groups/{group}/reset/apply/", {"topic": topic, "mode": "latest"}
    )
    assert b'id="reset-result"' in applied.content
    bad = personas["operator"].post(
        C + f"groups/{group}/reset/apply/", {"topic": topic, "mode": "timestamp", "timestamp": "soon"}
    )
    assert b"give the time" in bad.content


def test_topics_are_created_and_deleted_from_the_pages(topic: str, personas: dict[str, Client]) -> None:
    assert personas["viewer"].post(C + "topics-new/", {"name": "FromPage"}).status_code == 403
    made = personas["operator"].post(C + "topics-new/", {"name": "FromPage", "queues": "2"}, follow=True)
    assert b"created FromPage" in made.content
    page = personas["admin"].get(C + "topics/FromPage/").content.decode()
    assert 'id="impact"' in page and "0 stored message(s)" in page
    assert 'id="impact"' not in personas["operator"].get(C + "topics/FromPage/").content.decode()
    assert (
        personas["operator"].post(C + "topics/FromPage/delete/", {"confirm": "FromPage"}).status_code == 403
    )
    unconfirmed = personas["admin"].post(C + "topics/FromPage/delete/", {"confirm": "nope"}, follow=True)
    assert b"type the topic" in unconfirmed.content
    gone = personas["admin"].post(C + "topics/FromPage/delete/", {"confirm": "FromPage"}, follow=True)
    assert b"deleted FromPage" in gone.content
    assert [r.action for r in AuditEntry.objects.filter(target="FromPage").order_by("id")] == [
        "topic.create",
        "topic.delete",
    ]


def test_the_dashboard_shows_delayed_backlog_and_recent_runs(
    topic: str, personas: dict[str, Client], console_redis: object
) -> None:
    page = personas["viewer"].get(C).content.decode()
    assert 'id="delayed"' in page and 'id="recent-runs"' in page and "unknown:" not in page


def test_a_groups_config_is_saved_from_its_page(topic: str, personas: dict[str, Client]) -> None:
    personas["operator"].post(
        "/api/clusters/default/groups/", {"name": "conf-group"}, content_type="application/json"
    )
    assert personas["viewer"].post(C + "groups/conf-group/config/", {"retryMaxTimes": "3"}).status_code == 403
    saved = personas["operator"].post(
        C + "groups/conf-group/config/", {"consumeEnable": "on", "retryMaxTimes": "3"}, follow=True
    )
    assert b"saved the group" in saved.content and b"retry max 3" in saved.content
    assert b"clustering only" in saved.content  # broadcasting left unticked


def test_find_by_key_and_the_resend_form(topic: str, personas: dict[str, Client]) -> None:
    op = personas["operator"]
    sent = op.post(
        f"/api/clusters/default/topics/{topic}/messages/",
        {"body": "keyed", "keys": "kk-1"},
        content_type="application/json",
    ).json()
    url = C + f"topics/{topic}/by-key/?key=kk-1"
    wait_for(
        lambda: sent["offsetMsgId"].encode() in personas["viewer"].get(url).content,
        10,
        "the key in the index",
    )
    assert (
        'id="resend-message"'
        not in personas["viewer"].get(C + f"messages/{sent['offsetMsgId']}/").content.decode()
    )
    assert (
        personas["viewer"]
        .post(C + f"messages/{sent['offsetMsgId']}/resend/", {"group": "g", "clientId": "c"})
        .status_code
        == 403
    )
    refused = op.post(
        C + f"messages/{sent['offsetMsgId']}/resend/",
        {"group": "nobody", "clientId": "1.2.3.4@1"},
        follow=True,
    )
    assert b"not resent" in refused.content
    assert AuditEntry.objects.filter(action="message.resend", result="error").count() == 1


def test_topic_update_and_group_delete_from_the_pages(topic: str, personas: dict[str, Client]) -> None:
    assert personas["viewer"].post(C + f"topics/{topic}/update/", {"readQueueNums": "3"}).status_code == 403
    done = personas["operator"].post(
        C + f"topics/{topic}/update/",
        {"readQueueNums": "3", "writeQueueNums": "3", "perm": "RW"},
        follow=True,
    )
    assert b"updated PageTopic" in done.content
    detail = personas["viewer"].get(f"/api/clusters/default/topics/{topic}/").json()
    assert (
        detail["route"]["queueDatas"][0]["writeQueueNums"] == 3
        or detail["route"]["queueDatas"][0]["readQueueNums"] == 3
    )
    personas["operator"].post(
        "/api/clusters/default/groups/", {"name": "doomed-group"}, content_type="application/json"
    )
    assert 'id="delete-group"' in personas["admin"].get(C + "groups/doomed-group/").content.decode()
    assert (
        personas["operator"].post(C + "groups/doomed-group/delete/", {"confirm": "doomed-group"}).status_code
        == 403
    )
    gone = personas["admin"].post(C + "groups/doomed-group/delete/", {"confirm": "doomed-group"}, follow=True)
    assert b"deleted doomed-group" in gone.content
    assert AuditEntry.objects.filter(action="group.delete", target="doomed-group", result="ok").count() == 1


def test_broker_settings_page_and_group_creation(
    on_servers: Servers, topic: str, personas: dict[str, Client]
) -> None:
    url = C + f"brokers/{on_servers.broker_addr}/config/"
    page = personas["viewer"].get(url).content.decode()
    assert "brokerName" in page and 'id="broker-config-form"' not in page
    assert (
        personas["operator"].post(url, {"key": "autoCreateTopicEnable", "value": "false"}).status_code == 403
    )
    changed = personas["admin"].post(url, {"key": "autoCreateTopicEnable", "value": "false"}, follow=True)
    assert b"is now" in changed.content
    refused = personas["admin"].post(url, {"key": "deleteWhen", "value": "99"}, follow=True)
    assert b"not changed" in refused.content
    personas["admin"].post(url, {"key": "autoCreateTopicEnable", "value": "true"})
    made = personas["operator"].post(
        C + "groups-new/", {"name": "from-page", "consumeEnable": "on"}, follow=True
    )
    assert b"saved the group" in made.content and b"from-page" in made.content
    bad = personas["operator"].post(C + "groups-new/", {"name": "bad name"}, follow=True)
    assert b"is not a group name" in bad.content


def test_a_reset_to_a_future_time_warns_that_it_skips_the_backlog_and_shows_totals(
    on_servers: Servers, topic: str, personas: dict[str, Client]
) -> None:
    """Issue 15: a time in the future previewed '+N per queue' with no warning and no totals."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    group = "guarded-group"
    personas["operator"].post(
        "/api/clusters/default/groups/", {"name": group}, content_type="application/json"
    )
    producer = Producer("guard-producer", on_servers.namesrv_addr).start()
    try:
        for i in range(6):
            producer.send(Message(topic, b"backlog %d" % i))
    finally:
        producer.shutdown()
    url = C + f"groups/{group}/reset/"
    start = personas["operator"].post(url + "apply/", {"topic": topic, "mode": "earliest"})
    assert b'id="reset-result"' in start.content
    future = {"topic": topic, "mode": "timestamp", "timestamp": "2099-01-01T00:00"}
    preview = " ".join(personas["viewer"].post(url + "preview/", future).content.decode().split())
    backlog = sum(
        q["maxOffset"] - q["minOffset"]
        for q in personas["viewer"].get(f"/api/clusters/default/topics/{topic}/").json()["queues"]
    )
    assert backlog >= 6
    assert "That time is in the future" in preview and f"skipping {backlog} message(s)" in preview
    assert 'id="reset-totals"' in preview and f"({backlog} skipped)" in preview
    earliest = " ".join(
        personas["viewer"]
        .post(url + "preview/", {"topic": topic, "mode": "earliest"})
        .content.decode()
        .split()
    )
    assert 'id="reset-warning"' not in earliest and 'id="reset-totals"' in earliest


def test_the_navigation_marks_the_page_you_are_on(topic: str, personas: dict[str, Client]) -> None:
    """Issue 15: no page was marked current."""
    import re

    def current(url: str) -> list[str]:
        page = personas["viewer"].get(url).content.decode()
        return re.findall(r'<a href="[^"]*" aria-current="page">([^<]+)</a>', page) + re.findall(
            r'id="alerts-link"[^>]*aria-current="page">(Alerts)', page
        )

    assert current(C) == ["Dashboard"]
    assert current(C + "topics/") == ["Topics"]
    assert current(C + f"topics/{topic}/") == ["Topics"], "a topic's page is under Topics"
    assert current(C + "groups/") == ["Groups"]
    assert current(C + "alerts/") == ["Alerts"]
    assert current("/maintenance/") == ["Maintenance"]


def test_an_unknown_topic_is_said_in_words(on_servers: Servers, personas: dict[str, Client]) -> None:
    """Issue 15: the page showed the nameserver's refusal (GET_ROUTEINFO_BY_TOPIC: TOPIC_NOT_EXIST)."""
    response = personas["viewer"].get(C + "topics/NoSuchTopic/")
    text = " ".join(response.content.decode().split())
    assert response.status_code == 404
    assert "There is no topic &#x27;NoSuchTopic&#x27; in this cluster." in text
    assert "TOPIC_NOT_EXIST" not in text and "GET_ROUTEINFO" not in text


def test_an_unknown_group_is_said_in_words_and_offers_no_forms(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    """Issue 15: a nonexistent group's page still offered its save forms."""
    response = personas["operator"].get(C + "groups/no-such-group/")
    text = " ".join(response.content.decode().split())
    assert response.status_code == 404
    assert "There is no consumer group &#x27;no-such-group&#x27; in this cluster." in text
    for form in ('id="reset-form"', 'id="thresholds-form"', 'id="config-form"'):
        assert form not in text
    personas["operator"].post(
        "/api/clusters/default/groups/", {"name": "known-group"}, content_type="application/json"
    )
    known = personas["operator"].get(C + "groups/known-group/").content.decode()
    assert 'id="config-form"' in known and 'id="thresholds-form"' in known


def test_a_groups_page_shows_each_subscriptions_filter(
    on_servers: Servers, topic: str, personas: dict[str, Client]
) -> None:
    """A SQL92 subscriber (the admin turns ``enablePropertyFilter`` on from the broker's
    settings page first: off, the consumer cannot start) shows its expression and kind."""
    from broker_core.client.consumer.common import MessageSelector
    from broker_core.client.consumer.push import PushConsumer
    from broker_core.errors import BrokerRefusedError
    from tests.listeners import Counter

    selector = MessageSelector.by_sql("price > 100 AND region = 'eu'")
    consumer = PushConsumer("sql-page", on_servers.namesrv_addr).subscribe(topic, selector)
    with pytest.raises(BrokerRefusedError, match="does not support consumer to filter message by SQL92"):
        consumer.register_listener(Counter()).start()

    settings = C + f"brokers/{on_servers.broker_addr}/config/"
    turned = personas["admin"].post(settings, {"key": "enablePropertyFilter", "value": "true"}, follow=True)
    assert b"is now" in turned.content
    consumer = PushConsumer("sql-page", on_servers.namesrv_addr).subscribe(topic, selector)
    consumer.register_listener(Counter()).start()

    def listed() -> str | None:
        page = personas["viewer"].get(C + "groups/sql-page/").content.decode()
        return page if 'id="group-subscriptions"' in page else None

    try:
        page = wait_for(listed, 30, "the group's subscriptions on its page")
    finally:
        consumer.shutdown()
        personas["admin"].post(settings, {"key": "enablePropertyFilter", "value": "false"})
    assert "SQL92 (by properties)" in page
    assert "price &gt; 100 AND region = &#x27;eu&#x27;" in page
