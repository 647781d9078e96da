"""Lag alerts below the Celery layer: the rules on offset history written here, raising and
resolving in the database (one open alert per kind), the webhook against a real local HTTP
server, the check against a real broker (and an unreachable one), and the REST API and pages.
The whole path through a real worker is tests/celery/test_lag_alerts.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest
from django.db import IntegrityError, transaction
from django.test import Client
from django.utils import timezone

from console.alerts import notify, rules, services
from console.alerts.models import Alert
from console.audit.models import AuditEntry
from console.clusters.replication import SEEN_KEY
from console.groups.models import GroupMonitor
from console.maintenance.history import OFFSETS, partition_date
from console.maintenance.services import KNOWN_KEY

from .conftest import Servers

T0 = 1_790_000_000_000  # a fixed instant (ms): the rules take time as an argument
MIN = 60_000


def write_history(root: Path, rows: list[dict[str, Any]], name: str = "broker-a.jsonl") -> None:
    for row in rows:
        path = root / OFFSETS / f"date={partition_date(row['ts'])}" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as f:
            f.write(orjson.dumps(row) + b"\n")


def snap(ts: int, lag: int, broker: str = "broker-a", group: str = "g", queue: int = 0) -> dict[str, Any]:
    return {
        "ts": ts,
        "cluster": "c",
        "broker": broker,
        "broker_addr": f"{broker}:10911",
        "group": group,
        "topic": "T",
        "queue_id": queue,
        "consumer_offset": 100,
        "broker_offset": 100 + lag,
        "min_offset": 0,
        "store_timestamp": ts - 1000,
    }


# -- the rules ------------------------------------------------------------------------------


def test_lag_series_adds_queues_and_brokers_and_skips_torn_lines(tmp_path: Path) -> None:
    write_history(tmp_path, [snap(T0, 2, queue=0), snap(T0, 3, queue=1), snap(T0, 9, group="other")])
    write_history(tmp_path, [snap(T0 + 500, 10, broker="broker-b")], "broker-b.jsonl")
    write_history(tmp_path, [snap(T0 + 5000, 1, queue=0), snap(T0 + 5000, 1, queue=1)])
    torn = tmp_path / OFFSETS / f"date={partition_date(T0)}" / "broker-a.jsonl"
    torn.write_bytes(torn.read_bytes() + b'{"ts": 17')
    series = rules.lag_series(tmp_path, "c", "g", T0 - MIN, T0 + MIN)
    # broker-b's first figure starts the total; broker-a's later snapshot replaces its earlier one.
    assert series == [(T0 + 500, 15), (T0 + 5000, 12)]


def test_growing_needs_a_window_the_history_covers(tmp_path: Path) -> None:
    now = T0 + 5 * MIN
    start = now - 5 * MIN
    write_history(tmp_path, [snap(T0 - 2000 + i * 5000, 10 + i) for i in range(61)])
    series = rules.lag_series(tmp_path, "c", "g", start - 15_000, now)
    grown = rules.growth([*series, (now, 80)], start, 15_000)
    assert grown.growing is True and grown.first == 10 and grown.last == 80 and grown.delta == 70
    # One drop anywhere in the window: not growing.
    dipped = [(ts, lag - 5 if i == 30 else lag) for i, (ts, lag) in enumerate(series)]
    assert rules.growth([*dipped, (now, 80)], start, 15_000).growing is False
    # Flat is not growing either.
    assert rules.growth([(ts, 7) for ts, _ in series], start, 15_000).growing is False
    # History that starts after the window does: unknown.
    late = [(ts, lag) for ts, lag in series if ts > start + 20_000]
    assert rules.growth(late, start, 15_000).growing is None
    # A gap (the offset job stopped a while): unknown, whatever the figures say.
    gappy = [(ts, lag) for ts, lag in series if not start + MIN < ts < start + 3 * MIN]
    assert rules.growth(gappy, start, 15_000).growing is None
    assert rules.growth([], start, 15_000).growing is None


def test_verdicts_per_kind() -> None:
    limits = rules.Thresholds(min_clients=2, max_lag=100, max_seconds_behind=60, growing_minutes=5)
    up = rules.Growth(True, 10, 50, 10)
    got = {v.kind: v for v in rules.evaluate(limits, rules.Reading(150, 61.5, 1), up)}
    assert {k: v.state for k, v in got.items()} == dict.fromkeys(rules.KINDS, rules.BREACHED)
    assert got["lag"].value == 150 and got["clients"].value == 1 and got["growing"].value == 40
    fine = {v.kind: v.state for v in rules.evaluate(limits, rules.Reading(0, 0.0, 2), None)}
    assert fine == dict.fromkeys(rules.KINDS, rules.CLEAR)  # no lag cannot be growing
    unknown = {v.kind: v.state for v in rules.evaluate(limits, rules.UNREAD, up)}
    assert unknown == dict.fromkeys(rules.KINDS, rules.UNKNOWN)
    off = {v.kind: v.state for v in rules.evaluate(rules.Thresholds(), rules.Reading(5, 1.0, 0))}
    assert off == dict.fromkeys(rules.KINDS, rules.OFF)
    # At the threshold is within it.
    at = {v.kind: v.state for v in rules.evaluate(limits, rules.Reading(100, 60.0, 2), None)}
    assert at["lag"] == at["seconds_behind"] == at["clients"] == rules.CLEAR


# -- raising and resolving ------------------------------------------------------------------


def lag_verdict(state: str, value: int) -> list[rules.Verdict]:
    return [rules.Verdict("lag", state, value, 100, f"lag {value}")]


@pytest.mark.django_db
def test_one_open_alert_per_kind_raised_once_and_resolved_once() -> None:
    now = timezone.now()
    events = services.apply_verdicts("c", "g", lag_verdict(rules.BREACHED, 150), {}, now)
    assert [(kind, a.value) for kind, a in events] == [("raised", 150)]
    # A second check that read no open alert (it ran at the same time) raises nothing new.
    again = services.apply_verdicts("c", "g", lag_verdict(rules.BREACHED, 170), {}, now)
    assert again == []
    alert = Alert.objects.get()
    assert alert.value == 150 and alert.last_value == 170 and alert.is_open
    with pytest.raises(IntegrityError), transaction.atomic():
        Alert.objects.create(
            cluster="c", group="g", kind="lag", threshold=1, value=1, last_value=1, message="", raised_at=now
        )
    unknown = services.apply_verdicts("c", "g", lag_verdict(rules.UNKNOWN, 0), {"lag": alert}, now)
    assert unknown == [] and Alert.objects.get().is_open
    done = services.apply_verdicts("c", "g", lag_verdict(rules.CLEAR, 3), {"lag": alert}, now)
    assert [(kind, a.last_value, a.is_open) for kind, a in done] == [("resolved", 3, False)]
    assert services.apply_verdicts("c", "g", lag_verdict(rules.CLEAR, 3), {"lag": alert}, now) == []
    # Raised again later: a new row, the resolved one kept.
    services.apply_verdicts("c", "g", lag_verdict(rules.BREACHED, 120), {}, now)
    assert Alert.objects.filter(resolved_at__isnull=True).count() == 1 and Alert.objects.count() == 2


# -- the webhook ----------------------------------------------------------------------------


class Receiver:
    """A local HTTP server answering each POST with ``status``; keeps the bodies."""

    def __init__(self, status: int) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.location = ""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                receiver.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(status)
                if 300 <= status < 400:  # a redirect elsewhere (the 200 receiver's path /moved)
                    self.send_header("Location", receiver.location)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receivers() -> Iterator[dict[int, Receiver]]:
    found = {200: Receiver(200), 500: Receiver(500), 307: Receiver(307)}
    found[307].location = found[200].url + "moved"
    yield found
    for r in found.values():
        r.server.shutdown()


@pytest.mark.django_db
def test_webhook_delivery_is_recorded_on_the_alert(receivers: dict[int, Receiver], settings: Any) -> None:
    settings.QUIVER = {**settings.QUIVER, "ALERT_WEBHOOK_TIMEOUT_SECONDS": 1, "ALERT_WEBHOOK_ATTEMPTS": 2}
    now = timezone.now()
    ((_, alert),) = services.apply_verdicts("c", "g", lag_verdict(rules.BREACHED, 150), {}, now)
    body = notify.payload("raised", alert)
    assert notify.deliver_webhook(alert.pk, receivers[200].url, body) == Alert.WEBHOOK_DELIVERED
    assert receivers[200].bodies == [json.loads(json.dumps(body))]
    assert body["alert"]["kind"] == "lag" and body["text"].startswith("[ALERT] g on c: lag 150")
    assert notify.deliver_webhook(alert.pk, receivers[500].url, body) == Alert.WEBHOOK_FAILED
    assert len(receivers[500].bodies) == 2  # retried once
    alert.refresh_from_db()
    assert alert.webhook_attempts == 3 and "500" in alert.webhook_error
    # A redirect is not followed (it could lead anywhere): the delivery failed, said so.
    assert notify.deliver_webhook(alert.pk, receivers[307].url, body) == Alert.WEBHOOK_FAILED
    assert len(receivers[200].bodies) == 1 and len(receivers[307].bodies) == 2
    alert.refresh_from_db()
    assert "307" in alert.webhook_error
    assert notify.post_webhook("ftp://example/x", body, 1, 2) == (
        False,
        0,
        "not an http(s) URL: 'ftp://example/x'",
    )
    closed = f"http://127.0.0.1:{receivers[200].server.server_address[1] + 0}/"
    receivers[200].server.shutdown()
    receivers[200].server.server_close()
    assert notify.deliver_webhook(alert.pk, closed, body) == Alert.WEBHOOK_FAILED  # never raises
    alert.refresh_from_db()
    assert alert.webhook_attempts == 7 and alert.webhook_error


# -- the check against a real broker --------------------------------------------------------


@pytest.mark.django_db
def test_the_check_reads_a_real_broker_and_leaves_alerts_open_when_it_cannot(
    on_servers: Servers, console_redis: Any, settings: Any
) -> None:
    # Brokers (and slaves) an earlier test's platform left in the "seen lately" lists (same
    # Redis, same cluster name) would read as missing here: this test starts from none.
    console_redis.delete(KNOWN_KEY, SEEN_KEY.format(cluster="default"))
    GroupMonitor.objects.create(cluster="default", group="never-seen", min_clients=1, max_lag=0)
    announced: list[services.Event] = []
    summary = services.check_all(announced.append)
    # The broker answered and knows no such group: nothing behind, and no client online.
    assert summary.unknown == [] and summary.raised == 1
    assert [(e.kind, e.alert.kind) for e in announced] == [("raised", "clients")]
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": "127.0.0.1:1"}
    unknown = services.check_all(announced.append)
    assert unknown.resolved == 0 and unknown.unknown and len(announced) == 1
    assert Alert.objects.get().is_open  # unknown is not zero
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": on_servers.namesrv_addr}
    GroupMonitor.objects.filter(group="never-seen").update(min_clients=0)
    assert services.check_all(announced.append).resolved == 1  # the threshold was turned off
    assert Alert.objects.get().resolution.startswith("threshold removed")


# -- REST and pages -------------------------------------------------------------------------

MONITOR = "/api/clusters/default/groups/watched/monitor/"


@pytest.mark.django_db
def test_thresholds_validate_every_field(personas: dict[str, Client]) -> None:
    op = personas["operator"]
    full = {"minClients": 1, "maxLag": 10, "maxSecondsBehind": 30, "growingMinutes": 5}
    saved = op.put(
        MONITOR, {**full, "webhookUrl": "https://hooks.example/x"}, content_type="application/json"
    )
    assert saved.status_code == 200, saved.content
    assert saved.json()["maxSecondsBehind"] == 30 and saved.json()["growingMinutes"] == 5
    # The webhook's path (often a token) is not shown back, to viewers or in the audit log.
    assert saved.json()["webhookUrl"] == "https://hooks.example/…"
    assert GroupMonitor.objects.get(group="watched").webhook_url == "https://hooks.example/x"
    assert personas["viewer"].get(MONITOR).json()["webhookUrl"] == "https://hooks.example/…"
    for field, bad in [
        ("maxSecondsBehind", -1),
        ("growingMinutes", 0),
        ("growingMinutes", 10_000),
        ("webhookUrl", "not a url"),
        ("webhookUrl", "ftp://hooks.example/x"),
        ("maxLag", "many"),
    ]:
        response = op.put(MONITOR, {**full, field: bad}, content_type="application/json")
        assert response.status_code == 400, (field, bad)
        assert field in response.json()["fields"], response.json()
    off = op.put(MONITOR, {"minClients": 0}, content_type="application/json").json()
    assert off["maxSecondsBehind"] is None and off["growingMinutes"] is None and off["webhookUrl"] == ""
    assert AuditEntry.objects.filter(action="group.monitor.save").count() == 2


@pytest.mark.django_db
def test_alerts_are_listed_filtered_and_paged(personas: dict[str, Client]) -> None:
    now = timezone.now()
    for group in ("a", "b", "c"):
        services.apply_verdicts("default", group, lag_verdict(rules.BREACHED, 200), {}, now)
    opened = {a.group: a for a in Alert.objects.all()}
    services.apply_verdicts("default", "a", lag_verdict(rules.CLEAR, 0), {"lag": opened["a"]}, now)
    Alert.objects.create(
        cluster="elsewhere",
        group="x",
        kind="lag",
        threshold=1,
        value=2,
        last_value=2,
        message="m",
        raised_at=now,
    )
    viewer = personas["viewer"]
    base = "/api/clusters/default/alerts/"
    listed = viewer.get(base).json()
    assert listed["count"] == 3 and listed["openCount"] == 2
    assert {a["group"] for a in viewer.get(base + "?state=open").json()["results"]} == {"b", "c"}
    resolved = viewer.get(base + "?state=resolved").json()["results"]
    assert [(a["group"], a["open"], a["lastValue"]) for a in resolved] == [("a", False, 0)]
    assert viewer.get(base + "?group=b").json()["count"] == 1
    page = viewer.get(base + "?page=2&page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 1 and page["page"] == 2
    for bad in ("?state=maybe", "?kind=volume", "?page=0", "?page_size=9999", "?group=bad%20name"):
        response = viewer.get(base + bad)
        assert response.status_code == 400 and response.json()["error"] == "invalid", bad
    one = viewer.get(f"{base}{opened['b'].pk}/").json()
    assert one["group"] == "b" and one["kind"] == "lag" and one["threshold"] == 100
    other = Alert.objects.get(cluster="elsewhere")
    assert viewer.get(f"{base}{other.pk}/").status_code == 404  # not this cluster's
    assert personas["outsider"].get(base).status_code == 403
    assert personas["anonymous"].get(base).status_code in (401, 403)
    everywhere = viewer.get("/api/alerts/?state=open").json()
    assert everywhere["count"] == 3  # viewers have every cluster
    assert personas["outsider"].get("/api/alerts/").json()["count"] == 0


@pytest.mark.django_db
def test_the_alerts_page_and_the_threshold_form(
    on_servers: Servers, personas: dict[str, Client], console_redis: Any
) -> None:
    console_redis.delete(services.LAST_CHECK_KEY)  # an earlier test's check must not show here
    services.apply_verdicts("default", "g1", lag_verdict(rules.BREACHED, 200), {}, timezone.now())
    page = personas["viewer"].get("/clusters/default/alerts/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="alert-count">1<' in html and "g1 on default: lag 200" in html
    assert "console/alerts.js" in html and "No check has run yet" in html
    assert personas["outsider"].get("/clusters/default/alerts/").status_code == 403
    form = "/clusters/default/groups/g1/thresholds/"
    assert personas["viewer"].post(form, {"maxLag": "5"}).status_code == 403
    personas["operator"].post(form, {"minClients": "0", "maxLag": "5", "growingMinutes": "0"})
    assert not GroupMonitor.objects.exists()  # 0 minutes is refused (said on the page)
    personas["operator"].post(
        form, {"minClients": "1", "maxLag": "5", "maxSecondsBehind": "", "webhookUrl": ""}
    )
    saved = GroupMonitor.objects.get(group="g1")
    assert saved.max_lag == 5 and saved.min_clients == 1 and saved.max_seconds_behind is None
    detail = personas["viewer"].get("/clusters/default/groups/g1/").content.decode()
    assert "lag above 5 messages" in detail and "thresholds-form" not in detail
