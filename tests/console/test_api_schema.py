"""The OpenAPI document describes what the topic, group, DLQ, message and alert endpoints
return and take: their answers' fields and their query parameters, and a real answer has no
field it does not name."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from broker_core.broker.topics import TopicConfig
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from console.alerts.models import Alert
from console.core.brokers import admin_call

from .conftest import Servers

pytestmark = pytest.mark.django_db

API = "/api/clusters/default/"


@pytest.fixture
def schema(personas: dict[str, Client]) -> dict[str, Any]:
    response = personas["viewer"].get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def fields(schema: dict[str, Any], component: str) -> set[str]:
    return set(schema["components"]["schemas"][component]["properties"])


def answer(schema: dict[str, Any], path: str, method: str, status: str = "200") -> str:
    """The component an operation's answer is declared as."""
    content = schema["paths"][path][method]["responses"][status]["content"]["application/json"]
    return content["schema"]["$ref"].rsplit("/", 1)[1]


def test_the_topic_and_group_answers_are_described_field_by_field(schema: dict[str, Any]) -> None:
    topics = "/api/clusters/{cluster}/topics/"
    assert answer(schema, topics, "get") == "TopicPageOut"
    assert {"name", "type", "readQueueNums", "perm", "order"} <= fields(schema, "TopicRowOut")
    assert answer(schema, topics + "{topic}/", "get") == "TopicDetailOut"
    assert {"route", "queues", "consumers", "storedToday"} <= fields(schema, "TopicDetailOut")
    assert {"msgId", "offsetMsgId", "queueOffset"} <= fields(
        schema, answer(schema, topics + "{topic}/messages/", "post", "201")
    )
    assert answer(schema, topics + "{topic}/", "delete", "409") == "TopicDeleteUnconfirmedOut"
    groups = "/api/clusters/{cluster}/groups/"
    assert {"group", "lag", "secondsBehind", "consumeTps", "online"} <= fields(schema, "GroupRowOut")
    assert {"totalLag", "queues", "configs", "connection"} <= fields(
        schema, answer(schema, groups + "{group}/", "get")
    )
    assert "retryMaxTimes" in fields(schema, "GroupConfigOut")
    reset = answer(schema, groups + "{group}/offsets/reset/", "post")
    assert "queues" in fields(schema, reset) and "resultOffset" in fields(schema, "PlannedQueueOut")


def test_the_query_parameters_are_described(schema: dict[str, Any]) -> None:
    def params(path: str) -> set[str]:
        return {p["name"] for p in schema["paths"][path]["get"].get("parameters", []) if p["in"] == "query"}

    assert {"search", "type", "page", "page_size"} <= params("/api/clusters/{cluster}/topics/")
    assert {"search", "system", "sort", "page"} <= params("/api/clusters/{cluster}/groups/")
    assert "timestamp" in params("/api/clusters/{cluster}/topics/{topic}/offset-by-time/")
    assert {"begin", "end", "tags", "limit", "cursor"} <= params(
        "/api/clusters/{cluster}/topics/{topic}/browse/"
    )


def test_real_answers_have_only_described_fields(
    on_servers: Servers, personas: dict[str, Client], schema: dict[str, Any]
) -> None:
    op = personas["operator"]
    op.post(API + "topics/", {"name": "Described"}, content_type="application/json")
    op.post(API + "groups/", {"name": "described-group"}, content_type="application/json")
    listed = op.get(API + "topics/?type=all").json()
    assert set(listed) <= fields(schema, "TopicPageOut")
    assert all(set(row) <= fields(schema, "TopicRowOut") for row in listed["results"])
    detail = op.get(API + "topics/Described/").json()
    assert set(detail) <= fields(schema, "TopicDetailOut")
    assert all(set(q) <= fields(schema, "TopicQueueOut") for q in detail["queues"])
    groups = op.get(API + "groups/?system=true").json()
    assert all(set(row) <= fields(schema, "GroupRowOut") for row in groups["results"])
    group = op.get(API + "groups/described-group/").json()
    assert set(group) <= fields(schema, "GroupDetailOut")


def test_the_dlq_message_and_alert_answers_are_described_field_by_field(schema: dict[str, Any]) -> None:
    cluster = "/api/clusters/{cluster}/"
    assert answer(schema, cluster + "dlq/", "get") == "DlqOverviewOut"
    assert {"group", "deadLetters", "oldestStoreTimestamp"} <= fields(schema, "DlqGroupOut")
    dlq = cluster + "groups/{group}/dlq/"
    assert answer(schema, dlq, "get") == "DlqPageOut"
    assert {"never", "messages", "total", "spans", "cursor"} <= fields(schema, "DlqPageOut")
    assert answer(schema, dlq + "resend/", "post", "202") == "ResendQueuedOut"
    assert answer(schema, dlq + "resend/", "post", "409") == "ResendRefusedOut"
    assert answer(schema, "/api/dlq/resend/", "post", "202") == "ResendQueuedOut"
    messages = cluster + "messages/"
    assert answer(schema, cluster + "topics/{topic}/browse/", "get") == "BrowsePageOut"
    assert {"msgId", "uniqKey", "storeTimestamp", "bodySize"} <= fields(schema, "MessageSummaryOut")
    assert answer(schema, messages + "search/", "get") == "SearchOut"
    assert answer(schema, messages + "by-key/", "get") == "ByKeyOut"
    assert answer(schema, messages + "{msg_id}/", "get") == "MessageDetailOut"
    assert answer(schema, messages + "{msg_id}/trace/", "get") == "TraceOut"
    assert answer(schema, messages + "{msg_id}/resend/", "post") == "ConsumerResendOut"
    assert {"properties", "body", "consumedBy"} <= fields(schema, "MessageDetailOut")
    assert answer(schema, cluster + "alerts/", "get") == "ClusterAlertPageOut"
    assert answer(schema, cluster + "alerts/{alert_id}/", "get") == "AlertOut"
    assert answer(schema, "/api/alerts/", "get") == "AlertPageOut"


def test_real_dlq_message_and_alert_answers_have_only_described_fields(
    on_servers: Servers, console_redis: Any, personas: dict[str, Client], schema: dict[str, Any]
) -> None:
    """A message stored in a group's ``%DLQ%`` topic (sent there, as the broker would put it)
    read through every DLQ and message endpoint, and an alert through the alert endpoints."""

    op = personas["operator"]
    admin_call(
        on_servers.namesrv_addr,
        lambda admin: admin.create_or_update_topic(
            TopicConfig("%DLQ%described-dlq", 1, 1), broker_addr=on_servers.broker_addr
        ),
    )
    producer = Producer("described-producer", on_servers.namesrv_addr).start()
    try:
        sent = producer.send(Message("%DLQ%described-dlq", b'{"a": 1}', tags="T", keys="described-key"))
    finally:
        producer.shutdown()

    overview = op.get(API + "dlq/").json()
    assert set(overview) <= fields(schema, "DlqOverviewOut")
    assert any(row["group"] == "described-dlq" for row in overview["groups"])
    assert all(set(row) <= fields(schema, "DlqGroupOut") for row in overview["groups"])
    for asked in ("?page=1", "", "?kind=retry", "?page=1&kind=retry"):
        page = op.get(API + "groups/described-dlq/dlq/" + asked).json()
        assert set(page) <= fields(schema, "DlqPageOut"), asked
        assert all(set(m) <= fields(schema, "MessageSummaryOut") for m in page["messages"])
    assert op.get(API + "groups/described-dlq/dlq/?page=1").json()["messages"]
    queued = op.post(API + "groups/described-dlq/dlq/resend/", {"all": True}, content_type="application/json")
    assert queued.status_code == 202 and set(queued.json()) <= fields(schema, "ResendQueuedOut")
    refused = op.post(
        API + "groups/calm-described/dlq/resend/", {"all": True}, content_type="application/json"
    )
    assert refused.status_code == 409 and set(refused.json()) <= fields(schema, "ResendRefusedOut")

    browsed = op.get(API + "topics/%25DLQ%25described-dlq/browse/?begin=0").json()
    assert set(browsed) <= fields(schema, "BrowsePageOut") and browsed["messages"]
    assert all(set(m) <= fields(schema, "MessageSummaryOut") for m in browsed["messages"])
    by_key = op.get(API + "messages/by-key/?topic=%25DLQ%25described-dlq&key=described-key").json()
    assert set(by_key) <= fields(schema, "ByKeyOut") and by_key["messages"]
    assert all(set(m) <= fields(schema, "MessageSummaryOut") for m in by_key["messages"])
    found = op.get(API + "messages/search/?q=described-key&topic=%25DLQ%25described-dlq").json()
    assert set(found) <= fields(schema, "SearchOut") and found["messages"]
    assert all(set(m) <= fields(schema, "FoundMessageOut") for m in found["messages"])
    detail = op.get(API + f"messages/{sent.offset_msg_id}/").json()
    assert set(detail) <= fields(schema, "MessageDetailOut")
    assert set(detail["body"]) <= fields(schema, "BodyViewsOut")
    assert all(set(t) <= fields(schema, "ConsumedByOut") for t in detail["consumedBy"])
    # No trace records in that topic: the answer's own fields (records are checked in test_messages_api).
    traced = op.get(API + f"messages/{sent.offset_msg_id}/trace/?traceTopic=%25DLQ%25described-dlq")
    assert traced.status_code == 200 and set(traced.json()) <= fields(schema, "TraceOut")

    alert = Alert.objects.create(
        cluster="default", group="described-group", kind=Alert.LAG, threshold=10, value=12.5,
        last_value=12.5, message="12.5 messages behind", raised_at=timezone.now(),
    )  # fmt: skip
    listed = op.get(API + "alerts/").json()
    assert set(listed) <= fields(schema, "ClusterAlertPageOut") and listed["results"]
    assert all(set(row) <= fields(schema, "AlertOut") for row in listed["results"])
    one = op.get(API + f"alerts/{alert.pk}/").json()
    assert set(one) <= fields(schema, "AlertOut") and set(one["webhook"]) <= fields(schema, "AlertWebhookOut")
    assert set(op.get("/api/alerts/").json()) <= fields(schema, "AlertPageOut")
