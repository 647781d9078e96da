"""A dangerous action says what it will do before it does it: the offset reset's form asks
only for what the chosen mode uses, and a time in the future is called what it is."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from .conftest import Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"


def test_a_reset_to_a_future_time_warns_that_it_skips_the_backlog(console: Console, page: Any) -> None:
    make_topic(console, "GuardTopic", 6)
    console.api("POST", "/api/clusters/default/groups/", {"name": "guard-group"})
    console.api(
        "POST",
        "/api/clusters/default/groups/guard-group/offsets/reset/",
        {"topic": "GuardTopic", "mode": "earliest"},
    )
    page.goto(console.url + C + "/groups/guard-group/")
    time_box = page.locator("#reset-form input[name=timestamp]")
    exact = page.locator("#reset-form details[data-mode=exact]")
    # "the earliest message" is chosen first: neither the time nor the offsets are asked for.
    assert time_box.is_hidden() and exact.is_hidden()
    page.select_option("#reset-mode", "exact")
    assert exact.is_visible() and time_box.is_hidden()
    page.select_option("#reset-mode", "timestamp")
    assert time_box.is_visible() and exact.is_hidden()

    next_year = dt.datetime.now(dt.UTC) + dt.timedelta(days=366)
    time_box.fill(next_year.strftime("%Y-%m-%dT%H:%M"))
    page.click("#preview-button")
    page.locator("#reset-preview").wait_for()
    warning = page.locator("#reset-warning").inner_text()
    assert "in the future" in warning and "6 message(s)" in warning
    totals = page.locator("#reset-totals").inner_text()
    assert "All 2 queue(s)" in totals and "6 skipped" in totals
    # Nothing moved: the preview is only a preview.
    assert console.api("GET", "/api/clusters/default/groups/guard-group/")["totalLag"] == 6
