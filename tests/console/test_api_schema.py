"""The OpenAPI document describes what the topic and group endpoints return and take: their
answers' fields and their query parameters, and a real answer has no field it does not name."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

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
