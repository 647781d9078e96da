"""The API-token page (issue 15): create a token in the console, use it, replace it, revoke it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from console.audit.models import AuditEntry


def api_status(key: str) -> int:
    return Client().get("/api/clusters/", HTTP_AUTHORIZATION=f"Token {key}").status_code


@pytest.mark.django_db
def test_a_user_creates_uses_replaces_and_revokes_a_token(personas: dict[str, Client], settings: Any) -> None:
    viewer = personas["viewer"]
    page = viewer.get("/account/token/").content.decode()
    assert "You have no token." in page and "Create a token" in page
    assert 'href="/account/token/"' in viewer.get("/").content.decode(), "the header links to it"

    created = viewer.post("/account/token/", {"action": "create"}).content.decode()
    key = re.search(r'id="new-token" value="([0-9a-f]{40})"', created).group(1)  # type: ignore[union-attr]
    assert "Copy it now: it is not shown again." in created
    assert api_status(key) == 200
    assert key not in viewer.get("/account/token/").content.decode(), "shown once"

    replaced = viewer.post("/account/token/", {"action": "create"}).content.decode()
    new_key = re.search(r'id="new-token" value="([0-9a-f]{40})"', replaced).group(1)  # type: ignore[union-attr]
    assert new_key != key and api_status(key) in (401, 403) and api_status(new_key) == 200

    revoked = viewer.post("/account/token/", {"action": "revoke"}).content.decode()
    assert "Your token is revoked" in revoked and "You have no token." in revoked
    assert api_status(new_key) in (401, 403)
    assert viewer.post("/account/token/", {"action": "steal"}).status_code == 400
    assert personas["anonymous"].get("/account/token/").status_code == 302
    actions = list(AuditEntry.objects.filter(username="viewer").values_list("action", flat=True))
    assert actions.count("token.create") == 2 and actions.count("token.revoke") == 1
    assert not any(key in (e.target or "") for e in AuditEntry.objects.all()), "the key is never recorded"
