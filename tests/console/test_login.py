"""Signing in: the page, the API token, and the throttle on repeated failures."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache() -> None:
    cache.clear()


def test_the_login_page_signs_in_and_refuses_a_guesser(client: Client) -> None:
    get_user_model().objects.create_user("ana", password="right-pw-123")
    assert client.get("/login/").status_code == 200
    for _ in range(5):
        assert client.post("/login/", {"username": "ana", "password": "wrong"}).status_code == 200
    locked = client.post("/login/", {"username": "ana", "password": "right-pw-123"})
    assert locked.status_code == 429 and b"too many failed sign-ins" in locked.content
    cache.clear()
    ok = client.post("/login/", {"username": "ana", "password": "right-pw-123"})
    assert ok.status_code == 302 and ok["Location"] == "/"


def test_the_api_gives_a_token_and_accepts_it(client: Client) -> None:
    get_user_model().objects.create_user("bo", password="right-pw-123")
    bad = client.post("/api/token/", {"username": "bo", "password": "nope"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"] == "invalid"
    token = client.post("/api/token/", {"username": "bo", "password": "right-pw-123"}).json()["token"]
    assert Client().get("/api/clusters/").status_code == 403
    assert Client(HTTP_AUTHORIZATION=f"Token {token}").get("/api/clusters/").status_code == 200
    for _ in range(5):
        client.post("/api/token/", {"username": "bo", "password": "nope"})
    assert client.post("/api/token/", {"username": "bo", "password": "right-pw-123"}).status_code == 429


def test_forms_need_their_csrf_token() -> None:
    strict = Client(enforce_csrf_checks=True)
    get_user_model().objects.create_user("cy", password="right-pw-123")
    assert strict.post("/login/", {"username": "cy", "password": "right-pw-123"}).status_code == 403
