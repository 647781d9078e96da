"""The websockets: live cluster figures and a topic's live tail, against a real broker."""

from __future__ import annotations

from typing import Any

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from console.core.models import ClusterAccess
from console.routing import websocket_urlpatterns

from .conftest import Servers

pytestmark = pytest.mark.django_db(transaction=True)


def app() -> Any:
    return URLRouter(websocket_urlpatterns)


async def connect(path: str, user: Any) -> tuple[WebsocketCommunicator, bool]:
    communicator = WebsocketCommunicator(app(), path)
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return communicator, connected


@pytest.fixture
def viewer(db: None) -> Any:
    user = get_user_model().objects.create_user("watcher", password="pw-watch-123")
    ClusterAccess.objects.create(user=user, cluster="*", role="viewer")
    return user


async def test_live_figures_reach_viewers_only(on_servers: Servers, viewer: Any) -> None:
    from asgiref.sync import sync_to_async

    communicator, connected = await connect("/ws/clusters/default/live/", viewer)
    assert connected
    first = await communicator.receive_json_from(timeout=15)
    assert first["brokers"] == 1 and first["unreadable"] == [] and first["putTps"] is not None
    await communicator.disconnect()
    outsider = await sync_to_async(get_user_model().objects.create_user)("nobody", password="pw-nobody-123")
    refused, ok = await connect("/ws/clusters/default/live/", outsider)
    assert not ok


async def test_the_tail_sends_what_arrives(
    on_servers: Servers, viewer: Any, personas: dict[str, Any]
) -> None:
    from asgiref.sync import sync_to_async

    op = personas["operator"]
    post = sync_to_async(op.post)
    await post("/api/clusters/default/topics/", {"name": "Tailed"}, content_type="application/json")
    communicator, connected = await connect("/ws/clusters/default/topics/Tailed/tail/", viewer)
    assert connected
    await post(
        "/api/clusters/default/topics/Tailed/messages/",
        {"body": "new one", "keys": "k-tail"},
        content_type="application/json",
    )
    got = await communicator.receive_json_from(timeout=15)
    assert [m["keys"] for m in got["messages"]] == ["k-tail"] and got["skipped"] == 0
    await communicator.disconnect()


def test_producer_connections_of_a_group_that_is_not_online_is_a_404(
    on_servers: Servers, personas: dict[str, Any]
) -> None:
    response = personas["viewer"].get("/api/clusters/default/producers/nobody-produces/")
    assert response.status_code == 404 and "not online" in response.json()["detail"]
