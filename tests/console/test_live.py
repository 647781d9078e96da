"""The websockets: live cluster figures and a topic's live tail, against a real broker."""

from __future__ import annotations

import re
from typing import Any

import pytest
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from console.clusters.consumers import broker_cells
from console.core.models import ClusterAccess
from console.maintenance.templatetags.maintenance_extras import epoch_ms
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
    # Once the tail says it is ready, it has read every queue's end: what comes next is shown.
    assert await communicator.receive_json_from(timeout=15) == {"ready": True}
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


def page_cells(html: str, addr: str) -> dict[str, str]:
    """The cells of the dashboard's row of ``addr``, by their data-cell name, as text."""
    row = re.search(rf'<tr[^>]*data-broker="{re.escape(addr)}"[^>]*>(.*?)</tr>', html, re.S)
    assert row, "the broker's row is not on the page"
    cells = re.findall(r'<td data-cell="(\w+)"[^>]*>(.*?)</td>', row.group(1), re.S)
    return {name: re.sub(r"<[^>]+>", "", text).strip() for name, text in cells}


async def test_the_socket_writes_the_table_as_the_page_does(
    on_servers: Servers, viewer: Any, personas: dict[str, Any]
) -> None:
    """One sample drives the cards and the brokers table; its cells read as the page's own,
    thousands grouped."""
    from asgiref.sync import sync_to_async

    def produce(n: int) -> None:
        producer = Producer("live-table-producer", on_servers.namesrv_addr).start()
        try:
            for i in range(n):
                producer.send(Message("LiveTable", f"m{i}".encode()))
        finally:
            producer.shutdown()

    await sync_to_async(personas["operator"].post)(
        "/api/clusters/default/topics/", {"name": "LiveTable"}, content_type="application/json"
    )
    await sync_to_async(produce, thread_sensitive=False)(1005)
    communicator, connected = await connect("/ws/clusters/default/live/", viewer)
    assert connected
    for _ in range(20):  # the broker counts a put once it is dispatched: soon, not at once
        sample = await communicator.receive_json_from(timeout=15)
        html = (await sync_to_async(personas["viewer"].get)("/clusters/default/")).content.decode()
        [row] = sample["rows"]
        cells = page_cells(html, row["addr"])
        settled = "," in row["cells"]["putToday"]
        if settled and all(cells[name] == row["cells"][name] for name in ("putToday", "lastHeartbeat")):
            break
    await communicator.disconnect()
    assert "," in row["cells"]["putToday"] and sample["text"]["putToday"] == row["cells"]["putToday"]
    assert row["configUrl"] == f"/clusters/default/brokers/{row['addr']}/config/"
    shown = {k: v for k, v in cells.items() if k not in ("brokerName", "addr", "role")}
    assert shown.keys() == row["cells"].keys()
    for name in ("version", "putToday", "lastHeartbeat"):
        assert shown[name] == row["cells"][name], name
    assert [cells["brokerName"], cells["addr"], cells["role"]] == [
        row["brokerName"],
        row["addr"],
        row["role"],
    ]


def test_cells_are_formatted_like_the_page() -> None:
    row = {
        "version": None,
        "putTps": 1234.56,
        "getTps": None,
        "putToday": 1234567,
        "diskUsedPercent": 12.0,
        "uptime": None,
        "lastHeartbeat": 1_700_000_000_123,
    }
    assert broker_cells(row) == {
        "version": "unknown",
        "putTps": "1,234.6",
        "getTps": "unknown",
        "putToday": "1,234,567",
        "diskUsedPercent": "12.0%",
        "uptime": "",
        "lastHeartbeat": epoch_ms(1_700_000_000_123),
    }
