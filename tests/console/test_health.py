"""The console answers its health check and renders its home page."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_it_reports_healthy(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == "ok"


@pytest.mark.django_db
def test_it_refuses_to_change_health(client: Client) -> None:
    assert client.post("/healthz").status_code == 405


@pytest.mark.django_db
def test_it_renders_the_home_page_to_signed_in_users_only(client: Client) -> None:
    from django.contrib.auth import get_user_model

    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    client.force_login(get_user_model().objects.create_user("u", password="pw-u-12345"))
    response = client.get("/")
    assert response.status_code == 200
    assert [t.name for t in response.templates][:2] == ["core/home.html", "base.html"]
    assert b"console/console.css" in response.content
    assert b"<h1>Quiver</h1>" in response.content
