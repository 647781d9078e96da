"""Navigation and words instead of internals: pages outside a cluster keep its menu, Health
is a page in words, the home page is an overview of the clusters with their figures, a
client's running info is tables, and the audit log shows each field before → after."""

from __future__ import annotations

import datetime as dt
import itertools
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from console.alerts.models import Alert
from console.audit.models import AuditEntry
from console.core.models import LongTask
from console.groups.running_info import running_info
from nameserver.models import Cluster
from tests.servers import wait_for

from .conftest import Servers, online_client

pytestmark = pytest.mark.django_db

C = "/clusters/default/"
_runs = itertools.count()


@pytest.fixture
def names() -> tuple[str, str]:
    """A topic and a group of this test's own (the servers are shared by the module)."""
    n = next(_runs)
    return f"NavTopic{n}", f"nav-readers{n}"


def nav(html: str) -> str:
    """The page's top navigation."""
    found = re.search(r"<nav>(.*?)</nav>", html, re.S)
    assert found, "the page has no navigation"
    return found.group(1)


def current(html: str) -> list[str]:
    """The links of the navigation marked as the page you are on."""
    return re.findall(r'<a href="([^"]+)"[^>]*aria-current="page"', nav(html))


# -- the cluster menu on pages outside a cluster -------------------------------------------------


def test_pages_outside_a_cluster_keep_the_cluster_menu_and_mark_themselves(
    on_servers: Servers, personas: dict[str, Client], console_redis: object
) -> None:
    viewer = personas["viewer"]
    viewer.get(C)
    for url in ("/maintenance/", "/audit/", "/health/", "/account/token/", "/"):
        html = viewer.get(url).content.decode()
        menu = nav(html)
        for link in (C, C + "topics/", C + "groups/", C + "alerts/", C + "reports/"):
            assert f'href="{link}"' in menu, (url, link)
        assert 'id="nav-cluster"' in menu and "default:" in menu, url
        if url != "/account/token/" and url != "/":
            assert current(html) == [url], url
    # On the cluster's own pages the menu is there without the cluster's label.
    dashboard = viewer.get(C).content.decode()
    assert 'id="nav-cluster"' not in nav(dashboard) and current(dashboard) == [C]


def test_the_menu_is_the_cluster_last_opened(on_servers: Servers, personas: dict[str, Client]) -> None:
    Cluster.objects.create(name="east", namesrv_addr=on_servers.namesrv_addr)
    Cluster.objects.create(name="west", namesrv_addr=on_servers.namesrv_addr)
    viewer = personas["viewer"]
    assert 'href="/clusters/east/topics/"' in nav(viewer.get("/audit/").content.decode())  # the first
    viewer.get("/clusters/west/topics/")
    menu = nav(viewer.get("/audit/").content.decode())
    assert 'href="/clusters/west/topics/"' in menu and "/clusters/east/" not in menu
    # A cluster the user may no longer see is not offered; an outsider gets no cluster menu.
    assert "/clusters/" not in nav(personas["outsider"].get("/audit/").content.decode())


def test_a_tasks_page_shows_its_clusters_menu_with_dead_letters_marked(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    viewer = get_user_model().objects.get(username="viewer")
    task = LongTask.objects.create(
        kind="dlq_resend",
        title="Resend 1 dead letter of nav-group",
        requested_by=viewer,
        params={"namesrv_addr": on_servers.namesrv_addr, "group": "nav-group", "msg_ids": ["X"]},
        final_state="SUCCESS",
        final_info={"done": 1, "total": 1, "result": [{"msgId": "X", "ok": True, "detail": "sent"}]},
        finished=timezone.now(),
    )
    html = personas["viewer"].get(f"/tasks/{task.id}/").content.decode()
    assert current(html) == [C + "dlq/"]  # the dead letters' part of the menu
    assert 'id="task-back"' in html and f'href="{C}groups/nav-group/dlq/"' in html
    assert "the dead letters of nav-group" in html


# -- Health --------------------------------------------------------------------------------------


def test_health_is_a_page_in_words_and_healthz_stays_json(
    on_servers: Servers, personas: dict[str, Client], console_redis: object
) -> None:
    response = personas["viewer"].get("/health/")
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assert "<h1>Health</h1>" in html
    assert "The console&#x27;s database answers." in html
    assert "Redis answers" in html
    assert f"The nameserver at {on_servers.namesrv_addr} answers." in html
    assert "Every registered broker answers." in html and "Every broker name has a master." in html
    assert 'id="health-json"' in html and 'href="/healthz"' in html
    assert 'href="/health/" aria-current="page">Health</a>' in html
    assert personas["anonymous"].get("/health/").status_code == 302
    assert personas["anonymous"].get("/healthz").json()["status"] == "ok"


def test_health_says_what_is_wrong_and_what_to_do(personas: dict[str, Client], settings: Any) -> None:
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": "127.0.0.1:1"}
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = personas["viewer"].get("/health/")
    assert response.status_code == 503
    html = response.content.decode()
    assert "Something needs a look" in html
    assert "The nameserver at 127.0.0.1:1 could not be asked" in html
    assert "Check that the nameserver runs at that address" in html
    assert "The platform&#x27;s Redis did not answer" in html and "Start Redis" in html
    assert "Traceback" not in html and "ErrorDetail" not in html


# -- the home page -------------------------------------------------------------------------------


def test_the_home_page_is_an_overview_whose_figures_agree_with_the_cluster(
    on_servers: Servers, personas: dict[str, Client], names: tuple[str, str]
) -> None:
    topic, group = names
    op = personas["operator"]
    op.post("/api/clusters/default/topics/", {"name": topic}, content_type="application/json")
    for n in range(3):
        sent = op.post(
            f"/api/clusters/default/topics/{topic}/messages/",
            {"body": f"m{n}"},
            content_type="application/json",
        )
        assert sent.status_code in (200, 201), sent.content
    op.post("/api/clusters/default/groups/", {"name": group}, content_type="application/json")
    Alert.objects.create(
        cluster="default",
        group=group,
        kind=Alert.LAG,
        threshold=1,
        value=5,
        last_value=5,
        message="lag 5 over 1",
        raised_at=timezone.now(),
    )

    def agree() -> Any:
        home = personas["viewer"].get("/")
        card = home.context["cards"][0]
        brokers = personas["viewer"].get("/api/clusters/default/brokers/").json()["brokers"]
        today = sum(b["putToday"] or 0 for b in brokers)
        return card.messages_today == today >= 3 and (home, card)

    home, card = wait_for(agree, 20, "today's count on the home page")
    assert card.cluster.name == "default" and card.brokers_up == card.brokers_total == 1
    topics = personas["viewer"].get("/api/clusters/default/topics/").json()
    groups = personas["viewer"].get("/api/clusters/default/groups/").json()
    assert card.topics == topics["count"] and card.topics >= 1
    assert card.groups == groups["count"] and card.groups >= 1
    assert card.groups_lagging == sum(1 for g in groups["results"] if g["lag"])
    assert card.open_alerts == 1 and card.problems == []
    html = home.content.decode()
    assert "<h1>Quiver</h1>" in html and 'data-cluster="default"' in html
    assert on_servers.namesrv_addr in html and "1 of 1" in html
    assert f'<a href="{C}alerts/">1</a>' in html and f'href="{C}"' in html


def test_the_home_page_says_in_words_when_a_cluster_does_not_answer(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    Cluster.objects.create(name="live", namesrv_addr=on_servers.namesrv_addr)
    Cluster.objects.create(name="gone", namesrv_addr="127.0.0.1:1")
    home = personas["viewer"].get("/")
    assert home.status_code == 200
    cards = {c.cluster.name: c for c in home.context["cards"]}
    assert cards["live"].problems == [] and cards["live"].brokers_up == 1
    assert cards["gone"].brokers_total is None
    assert cards["gone"].problems == [
        "The nameserver at 127.0.0.1:1 did not answer, so its figures are unknown: check that it runs "
        "(manage.py up starts one) or correct the cluster's address in Admin."
    ]
    html = home.content.decode()
    assert "unknown" in html and "needs a look" in html
    # Someone who may see no cluster is told so, and what to do.
    assert "Ask an administrator" in personas["outsider"].get("/").content.decode()
    assert personas["viewer"].get("/clusters/")["Location"] == "/"


# -- a client's running info ---------------------------------------------------------------------


def test_a_clients_running_info_is_tables_with_the_raw_answer_folded(
    on_servers: Servers, personas: dict[str, Client], names: tuple[str, str]
) -> None:
    topic, group = names
    with online_client(on_servers, personas, topic, group) as client_id:
        url = f"{C}groups/{group}/clients/{client_id}/"
        html = wait_for(
            lambda: (
                (r := personas["viewer"].get(url)).status_code == 200
                and 'id="client-queues"' in (text := r.content.decode())
                and f"<td>{topic}</td>" in text
                and text
            ),
            30,
            "the client's queues",
        )
    assert 'id="client-properties"' in html and "<code>PROP_CONSUME_TYPE</code>" in html
    assert "<td>CONSUME_PASSIVELY</td>" in html
    assert 'id="client-subscriptions"' in html and f'href="{C}topics/{topic}/"' in html
    assert "Committed offset" in html and "Messages held" in html
    raw = re.search(
        r'<details id="client-raw">.*?<pre class="body wrap" id="running-info">(.*?)</pre>', html, re.S
    )
    assert raw and "\n  &quot;mqTable&quot;: {" in raw.group(1) and "{{" not in raw.group(1)
    assert current(html) == [C + "groups/"]


def test_running_info_reads_a_java_clients_answer() -> None:
    text = (
        '{"jstack":"","mqTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"commitOffset":1234567,'
        '"cachedMsgCount":2,"locked":false,"lastPullTimestamp":1764100000000,"tryUnlockTimes":0}},'
        '"properties":{"PROP_CONSUMER_START_TIMESTAMP":"1764100000000","consumeThreadMax":"20"},'
        '"statusTable":{"T":{"consumeFailedMsgs":0,"consumeOKTPS":12.5,"pullRT":1.25}},'
        '"subscriptionSet":[{"subString":"a || b","topic":"T","expressionType":"TAG","subVersion":17}]}'
    )
    info = running_info(text)
    assert info.problem == ""
    assert dict(info.properties) == {
        "PROP_CONSUMER_START_TIMESTAMP": "2025-11-25 19:46:40.000Z",
        "consumeThreadMax": "20",
    }
    assert info.subscriptions == [{"topic": "T", "expression": "a || b", "type": "TAG", "version": "17"}]
    assert info.queue_columns == [
        "Committed offset",
        "Messages held",
        "Locked",
        "Last pull",
        "tryUnlockTimes",
    ]
    assert info.queues == [
        {
            "topic": "T",
            "broker": "b",
            "queue": "1",
            "cells": ["1,234,567", "2", "no", "2025-11-25 19:46:40.000Z", "0"],
        }
    ]
    assert info.status_columns == ["Pull time (ms)", "Consumed / s", "Failed in the last hour"]
    assert info.statuses == [{"topic": "T", "cells": ["1.25", "12.5", "0"]}]
    assert '"T@b:1": {' in info.pretty
    garbled = running_info("{not json")
    assert garbled.problem.startswith("The client's answer is not JSON") and garbled.pretty == "{not json"


# -- the audit log -------------------------------------------------------------------------------


def test_the_audit_log_shows_each_field_before_and_after(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    url = f"/api/clusters/default/brokers/{on_servers.broker_addr}/config/"
    change = {"changes": {"autoCreateTopicEnable": "false"}}
    assert personas["admin"].put(url, change, content_type="application/json").status_code == 200
    personas["admin"].put(
        url, {"changes": {"autoCreateTopicEnable": "true"}}, content_type="application/json"
    )
    html = personas["viewer"].get("/audit/?action=broker.config").content.decode()
    first = re.search(r'<tr class="changed" data-field="autoCreateTopicEnable">(.*?)</tr>', html, re.S)
    assert first, html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", first.group(1), re.S)
    assert [c.strip() for c in cells] == ["false", "→", "true"]  # newest first: false → true
    assert "{&#x27;" not in html and "{'" not in html
    rows = personas["viewer"].get("/api/audit/?action=broker.config.update").json()["results"]
    assert rows[-1]["before"] == {"autoCreateTopicEnable": "true"}
    assert rows[-1]["after"] == {"autoCreateTopicEnable": "false"}
    assert current(html) == ["/audit/"]


def test_old_rows_holding_python_text_read_as_fields(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    AuditEntry.objects.create(
        username="old",
        action="group.update",
        cluster="default",
        target="legacy-group",
        before="{'retryMaxTimes': 3, 'consumeEnable': True}",
        after="{'retryMaxTimes': 5, 'consumeEnable': True}",
        result="ok",
    )
    html = personas["viewer"].get("/audit/?target=legacy-group").content.decode()
    changed = re.search(r'<tr class="changed" data-field="retryMaxTimes">(.*?)</tr>', html, re.S)
    same = re.search(r'<tr class="same" data-field="consumeEnable">(.*?)</tr>', html, re.S)
    assert changed and ">3<" in changed.group(1) and ">5<" in changed.group(1)
    assert same and ">true<" in same.group(1)
    row = personas["viewer"].get("/api/audit/?target=legacy-group").json()["results"][0]
    assert row["before"] == {"retryMaxTimes": 3, "consumeEnable": True}
    assert row["after"] == {"retryMaxTimes": 5, "consumeEnable": True}


def test_audit_rows_are_stored_as_plain_json(personas: dict[str, Client]) -> None:
    from collections import OrderedDict

    from console.audit.services import audited

    class Request:
        user = get_user_model().objects.get(username="admin")
        META: dict[str, str] = {}

    with audited(Request(), "thing.update", "default", "t") as audit:
        audit.before = OrderedDict(size=1, when=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
        audit.after = {"size": 2, "tags": ("a", "b")}
    row = AuditEntry.objects.get(action="thing.update")
    assert row.before == {"size": 1, "when": "2026-01-02 00:00:00+00:00"}
    assert row.after == {"size": 2, "tags": ["a", "b"]}
