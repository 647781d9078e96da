"""Every page at a desktop's width and at a phone's (390 px): nothing widens the page past
the screen, the navigation is there, and a screenshot of each is kept as a test artifact
(``QUIVER_ARTIFACTS``, default ``test-artifacts/`` in the checkout) for a person to look at."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from tests.servers import wait_for

from .conftest import REPO, Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"
API = "/api/clusters/default"
WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}


def artifacts() -> Path:
    path = Path(os.environ.get("QUIVER_ARTIFACTS") or REPO / "test-artifacts") / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def pages(console: Console) -> dict[str, str]:
    """Name -> path of every page a person opens, with real things on them (the group
    ``fit-group`` online, with dead letters)."""
    wait_for(lambda: console.api("GET", f"{API}/groups/fit-group/dlq/")["total"] == 3, 60, "3 dead letters")
    client_id = console.api("GET", f"{API}/groups/fit-group/")["connection"]["connectionSet"][0]["clientId"]
    msg_id = console.api("GET", f"{API}/topics/FitTopic/browse/")["messages"][0]["msgId"]
    return {
        "home": "/",
        "dashboard": C + "/",
        "topics": C + "/topics/",
        "topic": C + "/topics/FitTopic/",
        "browse": C + "/topics/FitTopic/messages/",
        "message": C + f"/messages/{msg_id}/?topic=FitTopic",
        "search": C + "/messages/search/?q=no-such-key",
        "groups": C + "/groups/",
        "group": C + "/groups/fit-group/",
        "client": C + f"/groups/fit-group/clients/{client_id}/",
        "dead-letters": C + "/dlq/",
        "group-dlq": C + "/groups/fit-group/dlq/",
        "alerts": C + "/alerts/",
        "reports": C + "/reports/",
        "maintenance": "/maintenance/",
        "audit": "/audit/",
        "health": "/health/",
        "api-token": "/account/token/",
    }


def test_every_page_fits_a_desktop_and_a_phone(console: Console, page: Any) -> None:
    shots = artifacts()
    make_topic(console, "FitTopic", 3)
    consumer = (
        PushConsumer(
            "fit-group",
            console.namesrv_addr,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            max_reconsume_times=0,
        )
        .subscribe("FitTopic")
        .register_listener(lambda msgs: ConsumeStatus.RECONSUME_LATER)
        .start()
    )
    try:
        too_wide = visit(console, page, pages(console), shots)
    finally:
        consumer.shutdown()
    assert too_wide == []


def visit(console: Console, page: Any, paths: dict[str, str], shots: Path) -> list[str]:
    """Open each page at each width; screenshot it; say which ones are wider than the window."""
    too_wide = []
    for name, path in paths.items():
        for device, (width, height) in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": height})
            page.goto(console.url + path)
            page.wait_for_load_state("networkidle")
            assert page.locator("header.topbar nav a", has_text="Dashboard").count() == 1, (
                f"{name}: no cluster menu"
            )
            scroll_width = page.evaluate("document.documentElement.scrollWidth")
            if scroll_width > width:
                too_wide.append(f"{name} at {device}: {scroll_width} px wide in a {width} px window")
            page.screenshot(path=str(shots / f"{name}-{device}.png"), full_page=True)
    return too_wide
