"""What a user does in the console, in a real Chromium against the whole platform."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from tests.servers import wait_for

from .conftest import Console

pytestmark = pytest.mark.slow
C = "/clusters/default"


def make_topic(console: Console, name: str, messages: int) -> None:
    console.api(
        "POST", "/api/clusters/default/topics/", {"name": name, "readQueueNums": 2, "writeQueueNums": 2}
    )
    for i in range(messages):
        console.api(
            "POST",
            f"/api/clusters/default/topics/{name}/messages/",
            {"body": f"hello browser {i}", "tags": "B"},
        )
    wait_for(
        lambda: console.api("GET", f"/api/clusters/default/topics/{name}/")["totalMessages"] >= messages,
        20,
        "stored",
    )


def test_browse_a_topic_and_open_a_message(console: Console, page: Any) -> None:
    make_topic(console, "BrowserTopic", 3)
    page.goto(console.url + C + "/topics/")
    page.click("text=BrowserTopic")
    page.click("#browse-link")
    links = page.locator("a.msg-link")
    links.first.wait_for()
    assert links.count() == 3
    links.first.click()
    body = page.locator("#body-text")
    body.wait_for()
    assert body.inner_text().startswith("hello browser")
    assert "text in utf-8" in page.content()


def test_reset_a_groups_offsets_with_the_preview(console: Console, page: Any) -> None:
    make_topic(console, "ResetTopic", 4)
    console.api("POST", "/api/clusters/default/groups/", {"name": "reset-group"})
    console.api(
        "POST",
        "/api/clusters/default/groups/reset-group/offsets/reset/",
        {"topic": "ResetTopic", "mode": "latest"},
    )
    page.goto(console.url + C + "/groups/reset-group/")
    page.select_option("#reset-mode", "earliest")
    page.click("#preview-button")
    preview = page.locator("#reset-preview")
    preview.wait_for()
    assert "nothing has changed yet" in preview.inner_text()
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#apply-button")
    result = page.locator("#reset-result")
    result.wait_for()
    assert result.inner_text().count("done") == 2
    offsets = console.api("GET", "/api/clusters/default/groups/reset-group/")["queues"]
    assert [q["consumerOffset"] for q in offsets if q["topic"] == "ResetTopic"] == [0, 0]


class FailOnce:
    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}
        self.lock = threading.Lock()

    def __call__(self, msgs: list[Any]) -> ConsumeStatus:
        with self.lock:
            for m in msgs:
                self.seen[m.body] = self.seen.get(m.body, 0) + 1
            first = any(self.seen[m.body] == 1 for m in msgs)
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS


def test_resend_a_dead_letter_and_see_its_outcome(console: Console, page: Any) -> None:
    make_topic(console, "DeadTopic", 1)
    listener = FailOnce()
    consumer = (
        PushConsumer(
            "dead-group",
            console.namesrv_addr,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            max_reconsume_times=0,
        )
        .subscribe("DeadTopic")
        .register_listener(listener)
        .start()
    )
    try:
        wait_for(
            lambda: console.api("GET", "/api/clusters/default/groups/dead-group/dlq/")["messages"],
            30,
            "a dead letter",
        )
        page.goto(console.url + C + "/groups/dead-group/dlq/")
        page.locator("#dead-letters input[type=checkbox]").first.check()
        page.click("#resend-button")
        page.wait_for_url("**/tasks/**")
        wait_for(
            lambda: (page.reload() or True) and page.locator("#task-state").inner_text() == "SUCCESS",
            30,
            "the task",
        )
        outcome = page.locator("#outcomes").inner_text()
        assert "sent" in outcome and "DeadTopic" in outcome
        wait_for(lambda: listener.seen.get(b"hello browser 0") == 2, 30, "the message back with its consumer")
    finally:
        consumer.shutdown()


def test_a_live_number_changes_on_the_dashboard(console: Console, page: Any) -> None:
    page.goto(console.url + C + "/")
    # No alert is open: the Alerts badge is not shown (a CSS rule once showed a red "0").
    assert page.locator("#alert-count").is_hidden()
    figure = page.locator("#live-put-today")
    wait_for(lambda: figure.inner_text() not in ("…", ""), 20, "the first live figure")
    before = figure.inner_text()
    producer = Producer("live-producer", console.namesrv_addr).start()
    try:
        make_topic(console, "LiveTopic", 0)
        deadline = time.monotonic() + 30
        while figure.inner_text() == before and time.monotonic() < deadline:
            for i in range(20):
                producer.send(Message("LiveTopic", f"tick {i}".encode()))
            page.wait_for_timeout(500)
        assert figure.inner_text() != before, "the live figure did not change"
    finally:
        producer.shutdown()


def test_run_a_traffic_report_and_read_it(console: Console, page: Any) -> None:
    """Run now → live progress → the summary, a drawn chart, a table and its CSV download:
    the platform's own worker runs the real Spark job."""
    make_topic(console, "ReportTopic", 5)
    page.goto(console.url + C + "/reports/")
    page.select_option("#run-form select[name=kind]", "traffic")
    page.fill("#run-form input[name=topics]", "ReportTopic")
    page.click("#run-form button[type=submit]")
    page.locator("#run-status").wait_for()
    run_url = page.url
    assert "/reports/" in run_url
    # The page follows the run over its websocket and reloads itself when it ends.
    status = page.locator("#run-status")
    wait_for(lambda: status.inner_text() in ("succeeded", "failed"), 240, "the report run to end")
    assert status.inner_text() == "succeeded", page.locator("#run-error").all_inner_texts()
    assert page.locator("#sum-messages").inner_text() == "5"
    page.click("#tabs a[data-tab=charts]")
    page.locator("#chart-messages canvas").first.wait_for()
    assert "ReportTopic" in page.locator("#top-tags").inner_text()
    page.click("#tabs a[data-tab=tables]")
    link = page.locator("#downloads a", has_text="CSV").first
    with page.expect_download() as download:
        link.click()
    text = open(download.value.path()).read()  # noqa: SIM115 - read once
    assert text.splitlines()[0].startswith('"topic","minute"') and "ReportTopic" in text
