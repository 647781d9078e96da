"""A schema-driven fuzz of the REST API (schemathesis over the console's own OpenAPI
schema), as a superuser against a real nameserver and broker: no input makes a 500."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.wsgi import application

from .conftest import Servers

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def token(db: None) -> str:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_superuser("fuzzer", password="pw-fuzzer-123")
    return Token.objects.create(user=user).key


def test_no_input_makes_a_server_error(on_servers: Servers, console_redis: Any, token: str) -> None:
    schema = schemathesis.openapi.from_wsgi(
        "/api/schema/", application, headers={"Authorization": f"Token {token}"}
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 30
    seen: set[str] = set()

    @given(data=st.data())
    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def call_one(data: st.DataObject) -> None:
        operation = data.draw(st.sampled_from(operations))
        case = data.draw(operation.as_strategy())
        response = case.call(headers={"Authorization": f"Token {token}"})
        seen.add(f"{case.method} {operation.path}")
        # 502/503/504 are the broker's refusal or absence, said as such; 500 would be ours.
        assert response.status_code != 500, (
            f"{case.method} {case.formatted_path} -> 500: {response.text[:500]}"
        )
        if response.status_code >= 400 and response.headers.get("Content-Type", "").startswith(
            "application/json"
        ):
            assert "error" in response.json(), (
                f"{case.method} {case.formatted_path}: error body without a code"
            )

    call_one()
    assert len(seen) > 20, "the fuzz reached too few operations"
