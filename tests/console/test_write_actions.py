"""The console's write actions (console/<app>/services.py) against a real broker: each checks
the actor's right itself, writes one audit row whichever surface asks, and the page and the
API agree on what the row says."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.test import Client, RequestFactory

from console.audit.models import AuditEntry
from console.core.actions import NotConfirmed
from console.groups import services as groups
from console.topics import services as topics
from nameserver.clusters import find_cluster

from .conftest import Servers

pytestmark = pytest.mark.django_db

API = "/api/clusters/default/"
PAGES = "/clusters/default/"


def actor(name: str) -> HttpRequest:
    """A request made by the persona ``name`` (as a page or the API would pass it on)."""
    request = RequestFactory().post("/")
    request.user = get_user_model().objects.get(username=name)
    return request


def test_an_action_checks_the_actors_right_itself(on_servers: Servers, personas: dict[str, Client]) -> None:
    cluster = find_cluster("default")
    with pytest.raises(PermissionDenied):
        topics.create_topic(actor("viewer"), cluster, topics.TopicSpec("NotByViewers"))
    with pytest.raises(PermissionDenied):
        topics.delete_topic(actor("operator"), cluster, "TBW102", "TBW102")
    with pytest.raises(PermissionDenied):
        groups.reset_offsets(actor("viewer"), cluster, "g", groups.ResetSpec("TBW102", "latest"))
    assert not AuditEntry.objects.exists()
    assert "NotByViewers" not in [
        t["name"] for t in personas["viewer"].get(API + "topics/").json()["results"]
    ]


def test_an_unconfirmed_delete_does_nothing_and_records_nothing(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    cluster = find_cluster("default")
    topics.create_topic(actor("admin"), cluster, topics.TopicSpec("KeptTopic", 2, 2))
    with pytest.raises(NotConfirmed):
        topics.delete_topic(actor("admin"), cluster, "KeptTopic", "keptTopic")
    with pytest.raises(NotConfirmed):
        groups.delete_group(actor("admin"), cluster, "kept-group", "")
    assert [r.action for r in AuditEntry.objects.all()] == ["topic.create"]
    assert personas["viewer"].get(API + "topics/KeptTopic/").status_code == 200


def test_the_page_and_the_api_write_the_same_audit_row(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    op = personas["operator"]
    op.post(PAGES + "topics-new/", {"name": "ByPage", "queues": "2"})
    op.post(
        API + "topics/",
        {"name": "ByApi", "readQueueNums": 2, "writeQueueNums": 2},
        content_type="application/json",
    )
    by_page, by_api = (AuditEntry.objects.get(action="topic.create", target=t) for t in ("ByPage", "ByApi"))
    assert by_page.after == {**by_api.after, "name": "ByPage"} and by_page.result == by_api.result == "ok"
    op.post(PAGES + "groups-new/", {"name": "page-made", "consumeEnable": "on"})
    op.post(API + "groups/", {"name": "api-made"}, content_type="application/json")
    made = {r.target: r.action for r in AuditEntry.objects.filter(target__in=["page-made", "api-made"])}
    assert made == {"page-made": "group.create", "api-made": "group.create"}


def test_a_refused_test_message_is_an_error_row_on_both_surfaces(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    op = personas["operator"]
    body = {"name": "ReadOnly", "readQueueNums": 1, "writeQueueNums": 1, "perm": "R-"}
    assert op.post(API + "topics/", body, content_type="application/json").status_code == 201
    page = op.post(PAGES + "topics/ReadOnly/send/", {"body": "x"}, follow=True)
    assert b"not sent" in page.content
    api = op.post(API + "topics/ReadOnly/messages/", {"body": "x"}, content_type="application/json")
    assert api.status_code >= 400 and api.json()["error"]
    rows = AuditEntry.objects.filter(action="topic.send", target="ReadOnly")
    assert [r.result for r in rows] == ["error", "error"]
