"""Finding messages in a real Chromium: from the one box on every cluster page by the id
producers log (the client's UNIQ_KEY) and by key, browsing by tag, and the live tail's
readable times and links."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from broker_core.client.message import Message, SendResult
from broker_core.client.producer.producer import Producer
from tests.servers import wait_for

from .conftest import Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"
TOPIC = "SearchOrders"


@pytest.fixture(scope="module")
def orders(console: Console) -> dict[str, Any]:
    """Six orders sent by our producer, each with its own key and a shared one, tagged
    Paid or Open in turn; found by the index before the flows start."""
    make_topic(console, TOPIC, 0)
    token = uuid.uuid4().hex[:6]
    producer = Producer("search-producer", console.namesrv_addr).start()
    try:
        sent: list[SendResult] = [
            producer.send(
                Message(
                    TOPIC,
                    f"order body {i}".encode(),
                    tags="Paid" if i % 2 else "Open",
                    keys=[f"order-{token}-{i}", f"customer-{token}"],
                )
            )
            for i in range(6)
        ]
    finally:
        producer.shutdown()
    wait_for(
        lambda: (
            len(console.api("GET", f"/api/clusters/default/messages/search/?q=customer-{token}")["messages"])
            == 6
        ),
        20,
        "the orders in the index",
    )
    return {"token": token, "sent": sent}


def _find(page: Any, text: str) -> None:
    """Type ``text`` into the cluster page's search box and submit it."""
    page.fill("#msg-search-q", text)
    page.press("#msg-search-q", "Enter")


def test_find_a_message_by_the_id_its_producer_logged(
    console: Console, page: Any, orders: dict[str, Any]
) -> None:
    third: SendResult = orders["sent"][3]
    page.goto(console.url + C + "/")
    _find(page, third.msg_id)  # the client's id (UNIQ_KEY), no topic given
    body = page.locator("#body-text")
    body.wait_for()
    assert body.inner_text() == "order body 3"
    assert third.msg_id in page.locator("#message-meta").inner_text()
    assert TOPIC in page.locator("#message-meta").inner_text()


def test_find_a_message_by_key_and_several_by_a_shared_key(
    console: Console, page: Any, orders: dict[str, Any]
) -> None:
    token = orders["token"]
    page.goto(console.url + C + "/topics/")
    _find(page, f"order-{token}-4")
    page.locator("#body-text").wait_for()
    assert page.locator("#body-text").inner_text() == "order body 4"
    # A key six orders share: a list of them, each opening its message.
    _find(page, f"customer-{token}")
    results = page.locator("#search-results a.msg-link")
    results.first.wait_for()
    assert results.count() == 6
    assert "6 messages found" in page.locator("#search-count").inner_text()
    assert "Paid" in page.locator("#search-results").inner_text()
    results.first.click()
    page.locator("#body-text").wait_for()
    assert page.locator("#body-text").inner_text().startswith("order body ")
    # Nothing found: what was searched, and what to try.
    _find(page, f"no-order-{token}")
    none = page.locator("#search-none")
    none.wait_for()
    assert f"No message matches no-order-{token}" in none.inner_text() and "Try this:" in none.inner_text()
    assert "Searched for" in page.locator("#searched").inner_text()


def test_browse_by_tag_and_follow_the_live_tail(console: Console, page: Any, orders: dict[str, Any]) -> None:
    page.goto(console.url + C + f"/topics/{TOPIC}/messages/")
    assert "(UTC)" in page.locator("#browse-form").inner_text()
    page.fill("#browse-tags", "Paid")
    page.click("#browse-form button[type=submit]")
    page.wait_for_url(re.compile(r".*tags=Paid.*"))
    rows = page.locator("#messages tbody tr")
    assert rows.count() == 3
    assert all("Paid" in rows.nth(i).inner_text() for i in range(3))
    # Newest first: order 5 (Paid) heads the list.
    rows.first.locator("a.msg-link").click()
    page.locator("#body-text").wait_for()
    assert page.locator("#body-text").inner_text() == "order body 5"

    page.goto(console.url + C + f"/topics/{TOPIC}/messages/")
    page.click("#tail-button")
    # "waiting" is said once the socket has read where each queue ends: one message sent
    # after it is shown.
    page.locator("#tail-status").filter(has_text="waiting").wait_for()
    producer = Producer("tail-producer", console.namesrv_addr).start()
    rows = page.locator("#tail tbody tr")
    try:
        sent = [producer.send(Message(TOPIC, b"tailed order", tags="Paid"))]
    finally:
        producer.shutdown()
    assert wait_until(lambda: rows.count() == 1, 20), "the tail did not show the message"
    cells = rows.last.locator("td")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z", cells.nth(0).inner_text())
    assert cells.nth(1).inner_text() in {s.offset_msg_id for s in sent}
    assert "Paid" in rows.last.inner_text()
    cells.nth(1).locator("a").click()
    page.locator("#body-text").wait_for()
    assert page.locator("#body-text").inner_text() == "tailed order"


def wait_until(condition: Any, seconds: float) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (polled)."""
    try:
        wait_for(condition, seconds, "the condition")
    except AssertionError:
        return False
    return True
