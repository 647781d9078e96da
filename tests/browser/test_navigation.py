"""Navigation and words instead of internals, as a person sees them in Chromium: pages outside
a cluster keep the cluster's menu and mark themselves, Health is a page in words, the home
page lists the cluster with its figures, and the audit log shows a change before → after."""

from __future__ import annotations

from typing import Any

import pytest

from tests.servers import wait_for

from .conftest import Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"


def marked(page: Any) -> list[str]:
    """The navigation links marked as the page you are on."""
    return [a.inner_text().strip() for a in page.locator("header nav a[aria-current=page]").all()]


def assert_cluster_menu(page: Any) -> None:
    """The default cluster's menu is in the navigation, labelled with the cluster's name."""
    nav = page.locator("header nav")
    assert page.locator("#nav-cluster").inner_text().strip() == "default:"
    for label, href in (
        ("Dashboard", C + "/"),
        ("Topics", C + "/topics/"),
        ("Groups", C + "/groups/"),
        ("Reports", C + "/reports/"),
    ):
        assert nav.get_by_role("link", name=label, exact=True).get_attribute("href") == href, label
    assert nav.locator("#alerts-link").get_attribute("href") == C + "/alerts/"


def test_pages_outside_a_cluster_keep_its_menu_and_mark_themselves(console: Console, page: Any) -> None:
    page.goto(console.url + C + "/topics/")
    assert marked(page) == ["Topics"]
    for path, label in (("/maintenance/", "Maintenance"), ("/audit/", "Audit"), ("/health/", "Health")):
        page.goto(console.url + path)
        assert_cluster_menu(page)
        assert marked(page) == [label], path
    # A task's page: the resend of a dead letter that is not there still makes a task.
    task = console.api(
        "POST", "/api/clusters/default/groups/nav-flow-group/dlq/resend/", {"msgIds": ["0" * 32]}
    )
    page.goto(console.url + f"/tasks/{task['taskId']}/")
    assert_cluster_menu(page)
    assert marked(page) == ["Dead letters"]
    assert page.locator("#task-back").inner_text() == "← Back to the dead letters of nav-flow-group"
    # The menu takes you back into the cluster.
    page.locator("header nav").get_by_role("link", name="Topics", exact=True).click()
    page.wait_for_url(console.url + C + "/topics/")
    assert marked(page) == ["Topics"]


def test_health_is_a_page_in_words(console: Console, page: Any) -> None:
    page.goto(console.url + C + "/")
    page.locator("header nav").get_by_role("link", name="Health", exact=True).click()
    page.wait_for_url(console.url + "/health/")
    assert page.locator("h1").inner_text() == "Health"
    database = page.locator("tr[data-check='Console database']")
    assert database.locator(".badge").inner_text() == "ok"
    assert "The console's database answers." in database.inner_text()
    cluster = page.locator("section[data-cluster='default']")
    assert f"The nameserver at {console.namesrv_addr} answers." in cluster.inner_text()
    assert "Every registered broker answers." in cluster.inner_text()
    assert page.locator("#health-json").get_attribute("href") == "/healthz"
    assert "{" not in page.locator("main").inner_text()  # words, not JSON


def test_the_home_page_lists_the_cluster_with_its_figures(console: Console, page: Any) -> None:
    make_topic(console, "NavHomeTopic", 3)

    def figures() -> dict[str, str]:
        page.goto(console.url + "/")
        card = page.locator("article.cluster-card[data-cluster='default']")
        return {
            k: card.locator(f"dd[data-figure='{k}']").inner_text().strip()
            for k in ("brokers", "topics", "groups", "lagging", "alerts", "today")
        }

    def agreeing() -> Any:
        shown = figures()
        brokers = console.api("GET", "/api/clusters/default/brokers/")["brokers"]
        up = sum(1 for b in brokers if not b["error"])
        topics = console.api("GET", "/api/clusters/default/topics/")["count"]
        groups = console.api("GET", "/api/clusters/default/groups/")
        today = sum(b["putToday"] or 0 for b in brokers)
        alerts = console.api("GET", "/api/clusters/default/alerts/")
        expected = {
            "brokers": f"{up} of {len(brokers)}",
            "topics": f"{topics:,}",
            "groups": f"{groups['count']:,}",
            "lagging": f"{sum(1 for g in groups['results'] if g['lag']):,}",
            "alerts": f"{alerts['openCount']:,}",
            "today": f"{today:,}",
        }
        return shown == expected and today >= 3 and shown

    shown = wait_for(agreeing, 30, "the home page's figures to agree with the API")
    assert int(shown["topics"].replace(",", "")) >= 1
    card = page.locator("article.cluster-card[data-cluster='default']")
    assert console.namesrv_addr in card.inner_text()
    card.get_by_role("link", name="Open default’s dashboard →").click()
    page.wait_for_url(console.url + C + "/")
    assert marked(page) == ["Dashboard"]


def test_the_audit_log_shows_a_config_change_before_and_after(console: Console, page: Any) -> None:
    addr = console.api("GET", "/api/clusters/default/brokers/")["brokers"][0]["addr"]
    url = f"/api/clusters/default/brokers/{addr}/config/"
    # A setting changed while the broker runs, which no other flow depends on.
    key = "shortPollingTimeMills"
    was = console.api("GET", url)["config"][key]
    new = str(int(was) + 1)
    console.api("PUT", url, {"changes": {key: new}})
    try:
        page.goto(console.url + "/audit/?action=broker.config")
        row = page.locator("#audit > tbody > tr[data-action='broker.config.update']").first
        field = row.locator(f"tr[data-field='{key}']")
        assert field.locator("td.before").inner_text() == was
        assert field.locator("td.after").inner_text() == new
        assert "changed" in (field.get_attribute("class") or "")
        assert "{'" not in row.inner_text() and '{"' not in row.inner_text()
        assert marked(page) == ["Audit"]
    finally:
        console.api("PUT", url, {"changes": {key: was}})
