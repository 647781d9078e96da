"""A traffic report's tables as a person reads them, in a real Chromium against the whole
platform: the peak minute as a time, the paging sentence, date-times instead of epoch
milliseconds, rounded figures, sorting by a heading, and a page that does not overflow."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from tests.servers import wait_for

from .conftest import Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"
DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}(:\d{2})? UTC$")
# A topic name long enough to widen a table that does not wrap or scroll it.
LONG = "ReportTablesWithAVeryLongTopicNameThatWouldPushTheTableWiderThanAnyReasonableScreen_0123456789"


def test_a_traffic_reports_tables_read_as_people_expect(console: Console, page: Any) -> None:
    """Run a traffic report over real sends (two topics, bodies of uneven sizes), then read
    its summary and its topic_minute table."""
    make_topic(console, "ReportTablesA", 0)
    make_topic(console, LONG, 0)
    while time.time() % 60 > 50:  # the five sends fall in one minute: one average per topic
        time.sleep(1)
    producer = Producer("report-tables-producer", console.namesrv_addr).start()
    try:
        for size in (20, 20, 21):  # an average of 20.33 bytes: a fraction to round
            producer.send(Message("ReportTablesA", b"a" * size, tags="T"))
        for _ in range(2):
            producer.send(Message(LONG, b"b" * 50, tags="T"))
    finally:
        producer.shutdown()

    page.goto(console.url + C + "/reports/")
    page.select_option("#run-form select[name=kind]", "traffic")
    page.fill("#run-form input[name=topics]", f"ReportTablesA,{LONG}")
    page.click("#run-form button[type=submit]")
    status = page.locator("#run-status")
    status.wait_for()
    try:
        wait_for(lambda: status.inner_text() in ("succeeded", "failed"), 600, "the report run to end")
    except AssertionError:
        run = console.api("GET", f"/api{C}/reports/{page.url.rstrip('/').rsplit('/', 1)[1]}/")
        log = (console.data_dir.parent / "up.out").read_text()[-3000:]
        raise AssertionError(f"the run did not end: {run}\n{log}") from None
    assert status.inner_text() == "succeeded", page.locator("#run-error").all_inner_texts()

    # The summary: five messages, and the peak minute as a date-time (it was blank).
    assert page.locator("#sum-messages").inner_text() == "5"
    peak = page.locator("#sum-peak-minute").inner_text()
    assert peak.startswith("messages in the minute from ")
    assert DATE_TIME.match(peak.removeprefix("messages in the minute from ")), peak
    times = page.locator("#summary-topics td.time").all_inner_texts()
    assert times and all(DATE_TIME.match(t) for t in times), times

    # The tables tab: topic_minute, busiest first, its paging sentence right.
    page.click("#tabs a[data-tab=tables]")
    paging = page.locator("#table-paging").inner_text()
    count = len(page.locator("#table-rows tbody tr").all())
    assert paging == f"rows 1–{count} of {count}", paging
    assert page.locator("#table-rows th[data-column=messages]").get_attribute("aria-sort") == "descending"
    minutes = page.locator("#table-rows td.time").all_inner_texts()
    assert minutes and all(DATE_TIME.match(m) for m in minutes), minutes
    assert not any(re.fullmatch(r"\d{12,}", m) for m in minutes)  # no epoch milliseconds
    column = page.locator("#table-rows th").all_inner_texts().index("average size (bytes)")
    rows = page.locator("#table-rows tbody tr").all()
    averages = [row.locator("td").nth(column).inner_text() for row in rows]
    assert "20.3" in averages, averages  # not 20.333333333333332
    assert all(re.fullmatch(r"[\d,]+(\.\d{1,2})?", a) for a in averages), averages

    # A click on the topic heading sorts by topic, A to Z, and says so.
    page.click("#table-rows th[data-column=topic] a")
    page.locator("#table-rows th[data-column=topic][aria-sort=ascending]").wait_for()
    topics = page.locator("#table-rows td.name").all_inner_texts()
    topics = [t for t in topics if t]  # the topic column only holds names here
    assert topics == sorted(topics) and {"ReportTablesA", LONG} <= set(topics)
    assert page.locator("#table-paging").inner_text() == paging
    # A second click sorts the other way.
    page.click("#table-rows th[data-column=topic] a")
    page.locator("#table-rows th[data-column=topic][aria-sort=descending]").wait_for()

    # Nothing widens the page: the table scrolls in its box, the long name wraps.
    fits = page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fits, page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    box = page.evaluate(
        "(() => { const s = document.getElementById('table-scroll');"
        " return [s.getBoundingClientRect().right, document.documentElement.clientWidth]; })()"
    )
    assert box[0] <= box[1], box

    # The charts tab's small tables sort in the page by a click on a heading.
    page.click("#tabs a[data-tab=charts]")
    heading = page.locator("#top-tags th", has_text="Messages")
    heading.locator("button").click()
    assert heading.get_attribute("aria-sort") == "descending"
    cells = page.locator("#top-tags td.num:nth-child(4)").all_inner_texts()
    counts = [int(t.replace(",", "")) for t in cells]
    assert counts == sorted(counts, reverse=True) and counts[0] == 3
