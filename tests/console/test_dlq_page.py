"""The DLQ page of a group that never dead-lettered a message says so in words (issue 15),
against a real nameserver and broker: no routing error in red, an empty state with a reason."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from .conftest import Servers


@pytest.mark.django_db
def test_a_group_that_never_dead_lettered_shows_no_dead_letters(
    on_servers: Servers, console_redis: Any, personas: dict[str, Client]
) -> None:
    page = personas["viewer"].get("/clusters/default/groups/calm-group/dlq/")
    assert page.status_code == 200
    text = " ".join(page.content.decode().split())
    assert "No dead letters: calm-group has never given up on a message" in text
    assert "%DLQ%calm-group does not exist yet" in text
    assert "GET_ROUTEINFO_BY_TOPIC" not in text and "TOPIC_NOT_EXIST" not in text
    retries = " ".join(
        personas["viewer"].get("/clusters/default/groups/calm-group/dlq/?kind=retry").content.decode().split()
    )
    assert "No retries: calm-group" in retries and "%RETRY%calm-group" in retries
    api = personas["viewer"].get("/api/clusters/default/groups/calm-group/dlq/")
    assert api.status_code == 200
    body = api.json()
    assert body["messages"] == [] and body["never"] is True and body["topic"] == "%DLQ%calm-group"
