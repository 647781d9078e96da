"""Topic message types in the console against a real broker that checks them: the API and
the pages show a topic's message type and set it on create and update; a test message of
the wrong type comes back refused with the broker's words."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from console.audit.models import AuditEntry

from .conftest import Servers, run_servers

pytestmark = pytest.mark.django_db

API = "/api/clusters/default/topics/"
PAGES = "/clusters/default/"


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A broker that refuses a message whose type is not its topic's."""
    with run_servers(tmp_path_factory.mktemp("typed-servers"), enableTopicMessageTypeCheck="true") as found:
        yield found


def row(client: Client, name: str) -> dict[str, Any]:
    (found,) = [t for t in client.get(API + f"?search={name}").json()["results"] if t["name"] == name]
    return found


def test_the_api_sets_shows_and_changes_a_topics_message_type(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    operator, viewer = personas["operator"], personas["viewer"]
    created = operator.post(
        API, {"name": "TypedFifo", "messageType": "FIFO"}, content_type="application/json"
    )
    assert created.status_code == 201 and created.json()["messageType"] == "FIFO"
    assert AuditEntry.objects.get(action="topic.create", target="TypedFifo").after["messageType"] == "FIFO"
    assert operator.post(API, {"name": "TypedPlain"}, content_type="application/json").status_code == 201
    assert viewer.get(API + "TypedFifo/").json()["messageType"] == "FIFO"
    assert row(viewer, "TypedFifo")["messageType"] == "FIFO"
    assert row(viewer, "TypedPlain")["messageType"] == "NORMAL"

    # An update that names no type keeps it; one that does changes it.
    kept = operator.put(
        API + "TypedFifo/", {"readQueueNums": 2, "writeQueueNums": 2}, content_type="application/json"
    )
    assert kept.status_code == 200 and "messageType" not in kept.json()
    assert viewer.get(API + "TypedFifo/").json()["messageType"] == "FIFO"
    changed = operator.put(
        API + "TypedFifo/",
        {"readQueueNums": 2, "writeQueueNums": 2, "messageType": "DELAY"},
        content_type="application/json",
    )
    assert changed.status_code == 200 and changed.json()["messageType"] == "DELAY"
    assert viewer.get(API + "TypedFifo/").json()["messageType"] == "DELAY"

    for bad in ("MIXED", "fifo", "LIFO"):
        refused = operator.put(API + "TypedFifo/", {"messageType": bad}, content_type="application/json")
        assert refused.status_code == 400 and "messageType" in refused.json()["fields"], refused.json()
    assert (
        viewer.put(API + "TypedFifo/", {"messageType": "NORMAL"}, content_type="application/json").status_code
        == 403
    )


def test_a_test_message_of_the_wrong_type_is_refused_in_the_brokers_words(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    operator = personas["operator"]
    operator.post(API, {"name": "TypedDelay", "messageType": "DELAY"}, content_type="application/json")
    refused = operator.post(API + "TypedDelay/messages/", {"body": "now"}, content_type="application/json")
    assert refused.status_code == 400
    assert refused.json()["brokerCodeName"] == "MESSAGE_ILLEGAL"
    assert refused.json()["remark"] == (
        "TopicMessageType validate failed, the expected type is DELAY, but actual type is NORMAL"
    )
    sent = operator.post(
        API + "TypedDelay/messages/", {"body": "later", "delayLevel": 1}, content_type="application/json"
    )
    assert sent.status_code == 201


def test_the_pages_show_and_set_the_message_type(on_servers: Servers, personas: dict[str, Client]) -> None:
    operator = personas["operator"]
    list_page = operator.get(PAGES + "topics/").content.decode()
    assert '<select name="messageType"' in list_page and "<th>Message type</th>" in list_page
    operator.post(PAGES + "topics-new/", {"name": "PagedTxn", "queues": "2", "messageType": "TRANSACTION"})
    detail = operator.get(PAGES + "topics/PagedTxn/").content.decode()
    assert '<span id="message-type">TRANSACTION</span>' in detail
    assert "<option selected>TRANSACTION</option>" in detail  # the update form starts from it
    # The list's Type column sorts topics (an application's), the next one is the message type.
    assert (
        "<td>NORMAL</td><td>TRANSACTION</td>"
        in operator.get(PAGES + "topics/?search=PagedTxn").content.decode()
    )
    operator.post(
        PAGES + "topics/PagedTxn/update/",
        {"readQueueNums": "2", "writeQueueNums": "2", "perm": "RW", "messageType": "NORMAL"},
    )
    assert personas["viewer"].get(API + "PagedTxn/").json()["messageType"] == "NORMAL"
    assert (
        "<td>NORMAL</td><td>NORMAL</td>" in operator.get(PAGES + "topics/?search=PagedTxn").content.decode()
    )
