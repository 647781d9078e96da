"""One traffic, one set of figures: after known traffic from the official client (N messages
to a topic, M of them consumed by a group, K of those dead-lettered), the dashboard, the
topic page, the group page, the DLQ page, the traffic series, the REST API and a Spark
traffic report all say N, M and K."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from tests.servers import wait_for

from .conftest import Console

pytestmark = pytest.mark.slow
pytest.importorskip("rocketmq.client", reason="the official client (rocketmq==0.4.4) is in the test extra")

C = "/clusters/default"
API = "/api/clusters/default"
TOPIC = "FigureTopic"
GROUP = "figure-group"
DLQ = f"%DLQ%{GROUP}"
DLQ_PATH = DLQ.replace("%", "%25")  # in a URL
PRODUCER = Path(__file__).resolve().parents[1] / "conformance" / "producer_child.py"
# producer_child.py sends each of its five kinds (sync, async, oneway, orderly, batch) `count` times.
KINDS = 5
FIRST, SECOND = 20, 10  # counts of the two runs: N = 5 * (20 + 10)
N = KINDS * (FIRST + SECOND)
M = KINDS * FIRST  # the group consumes the first run, then stops
K = 2 * FIRST  # of those, it fails the sync and async ones, straight to the DLQ


def official_send(console: Console, count: int, home: Path) -> None:
    """The official C++ client sends ``count`` of each kind, in a child process (it can hang)."""
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(PRODUCER.parents[2])}
    done = subprocess.run(
        [sys.executable, str(PRODUCER), console.namesrv_addr, TOPIC, str(count)],
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    results = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    assert results and all(r.get("status") == 0 for r in results), results


class FailSome:
    """Consumes everything; the sync and async messages fail (to the DLQ, no retries allowed)."""

    def __init__(self) -> None:
        self.seen = 0
        self.lock = threading.Lock()

    def __call__(self, messages: list[Any]) -> ConsumeStatus:
        with self.lock:
            self.seen += len(messages)
        if any(m.body.startswith((b"sync-", b"async-")) for m in messages):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS


def traffic_total(console: Console, name: str) -> int:
    series = console.api("GET", f"{API}/traffic/?by=topic")["series"]
    return sum(n for _, n in series.get(name, []))


def test_every_figure_of_known_traffic_agrees(console: Console, page: Any, tmp_path: Path) -> None:
    console.api("POST", f"{API}/topics/", {"name": TOPIC, "readQueueNums": 2, "writeQueueNums": 2})
    official_send(console, FIRST, tmp_path / "first")
    wait_for(lambda: console.api("GET", f"{API}/topics/{TOPIC}/")["totalMessages"] == M, 30, "the first run")

    consumer = (
        PushConsumer(
            GROUP, console.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", max_reconsume_times=0
        )
        .subscribe(TOPIC)
        .register_listener(FailSome())
        .start()
    )
    try:
        wait_for(
            lambda: (
                console.api("GET", f"{API}/groups/{GROUP}/")["totalLag"] == 0
                and console.api("GET", f"{API}/topics/{DLQ_PATH}/")["totalMessages"] == K
            ),
            60,
            "the group to consume the first run and dead-letter K",
        )
    finally:
        consumer.shutdown()
    official_send(console, SECOND, tmp_path / "second")
    wait_for(lambda: console.api("GET", f"{API}/topics/{TOPIC}/")["totalMessages"] == N, 30, "the second run")
    # The counters reach the history within one offset-persistence period (5 s by default).
    wait_for(
        lambda: traffic_total(console, TOPIC) == N and traffic_total(console, DLQ) == K, 60, "the history"
    )

    # REST
    topic = console.api("GET", f"{API}/topics/{TOPIC}/")
    assert topic["totalMessages"] == N and topic["storedToday"]["messages"] == N
    group = console.api("GET", f"{API}/groups/{GROUP}/")
    assert group["totalLag"] == N - M
    assert [(t["topic"], t["brokerOffset"], t["consumerOffset"]) for t in group["topics"]] == [(TOPIC, N, M)]
    assert console.api("GET", f"{API}/groups/{GROUP}/dlq/")["total"] == K
    top = {row["name"]: row["messages"] for row in console.api("GET", f"{API}/traffic/?by=topic")["top"]}
    assert top[TOPIC] == N

    # Pages
    page.goto(console.url + C + "/")
    row = page.locator("#top-topics tr", has_text=TOPIC)
    assert row.locator("td").nth(1).inner_text() == f"{N:,}"
    page.goto(console.url + C + f"/topics/{TOPIC}/")
    assert page.locator("#total-messages").inner_text() == f"{N:,}"
    assert page.locator("#stored-today").inner_text() == f"{N:,}"
    page.goto(console.url + C + f"/groups/{GROUP}/")
    assert page.locator("#total-lag").inner_text() == f"{N - M:,}"
    cells = page.locator("#progress-topics tbody tr", has_text=TOPIC).locator("td").all_inner_texts()
    assert cells[1:] == [f"{N:,}", f"{M:,}", f"{N - M:,}"]
    page.goto(console.url + C + f"/topics/{DLQ_PATH}/")
    assert page.locator("#total-messages").inner_text() == f"{K:,}"
    assert page.locator("#stored-today").inner_text() == f"{K:,}"

    # A traffic report over the day so far, run by the platform's worker on Spark.
    run = console.api(
        "POST", f"{API}/reports/", {"kind": "traffic", "lastMinutes": 60, "topics": [TOPIC, DLQ]}
    )
    run_id = run["id"]
    wait_for(
        lambda: console.api("GET", f"{API}/reports/{run_id}/")["status"] in ("succeeded", "failed"),
        600,  # behind the reports the platform schedules at start, on the one long-work slot
        "the report",
    )
    report = console.api("GET", f"{API}/reports/{run_id}/")
    assert report["status"] == "succeeded", report["error"]
    summary = report["summary"]
    assert summary["messages"] == N + K and summary["dlqMessages"] == K
    consumption = console.api("GET", f"{API}/reports/{run_id}/tables/consumption_minute/")
    assert summary["consumed"] == M, consumption  # handed to the group by the broker
    assert summary["producerGroups"] == 1  # the official client's group; the DLQ is the broker's own
    page.goto(console.url + C + f"/reports/{run_id}/")
    assert page.locator("#sum-messages").inner_text() == f"{N + K:,}"
    assert page.locator("#sum-consumed").inner_text() == f"{M:,}"
