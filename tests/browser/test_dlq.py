"""Dead letters in a real Chromium against the whole platform (issue 15): the overview counts
a group's dead letters, its page shows the total, Resend with nothing selected says so and
keeps the table, and "select all" resends every one through the task, whose page says how
many went back."""

from __future__ import annotations

from typing import Any

import pytest

from broker_core.client.consumer.push import PushConsumer
from tests.listeners import AlwaysFails
from tests.servers import wait_for

from .conftest import Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"
TOPIC = "DlqFlowTopic"
GROUP = "dlq-flow-group"
DEAD = 5


def dead_letter(console: Console) -> None:
    """DEAD messages of TOPIC dead-lettered by GROUP, whose consumer then goes away."""
    make_topic(console, TOPIC, DEAD)
    consumer = (
        PushConsumer(
            GROUP, console.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", max_reconsume_times=0
        )
        .subscribe(TOPIC)
        .register_listener(AlwaysFails())
        .start()
    )
    try:
        wait_for(
            lambda: console.api("GET", f"/api/clusters/default/groups/{GROUP}/dlq/?page=1")["total"] == DEAD,
            60,
            "the dead letters",
        )
    finally:
        consumer.shutdown()


def test_see_dead_letters_in_the_overview_and_resend_them_all(console: Console, page: Any) -> None:
    dead_letter(console)
    page.goto(console.url + C + "/")
    page.click("nav >> text=Dead letters")
    page.wait_for_url("**" + C + "/dlq/")
    row = page.locator("#dlq-groups tr", has_text=GROUP)
    assert row.locator("td.dead-letters").inner_text() == str(DEAD)
    overview = console.api("GET", "/api/clusters/default/dlq/")
    assert [g["deadLetters"] for g in overview["groups"] if g["group"] == GROUP] == [DEAD]

    row.locator("a.dlq-link").click()
    page.wait_for_url(f"**{C}/groups/{GROUP}/dlq/")
    assert page.locator("#dlq-total").inner_text() == f"{DEAD} dead letters, showing 1–{DEAD}."
    table = page.locator("#dead-letters tbody tr")
    assert table.count() == DEAD

    # Resend with nothing selected: the sentence, and the table is still there.
    here = page.url
    page.click("#resend-button")
    problem = page.locator("#resend-problem")
    problem.wait_for()
    assert problem.inner_text().startswith("Select at least one message")
    assert page.url == here and table.count() == DEAD

    page.check("#select-all")
    assert page.locator("#selected-count").inner_text() == f"all {DEAD} selected"
    assert problem.is_hidden()
    page.click("#resend-button")
    page.wait_for_url("**/tasks/**")
    wait_for(
        lambda: (page.reload() or True) and page.locator("#task-state").inner_text() == "SUCCESS",
        60,
        "the resend task",
    )
    heading = page.locator("h1").inner_text()
    assert heading == f"Resend all {DEAD} dead letters of {GROUP} to their original topic (default)"
    assert f"{DEAD} resent, 0 failed" in page.locator("main").inner_text()
    outcomes = page.locator("#outcomes tbody tr")
    assert outcomes.count() == DEAD
    assert all("sent" in outcomes.nth(i).inner_text() for i in range(DEAD))
    wait_for(
        lambda: console.api("GET", f"/api/clusters/default/topics/{TOPIC}/")["totalMessages"] == 2 * DEAD,
        20,
        "the dead letters back in their topic",
    )
