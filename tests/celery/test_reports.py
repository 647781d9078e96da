"""A traffic report end to end: asked for over the console's REST API (a real console
process on the platform's database), run by the real Celery worker as ``python -m
spark_reports`` (Spark local) against a real broker with traffic sent here, and shown
finished with its summary on the run page."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer

from .conftest import Console, Platform, wait_for

pytestmark = pytest.mark.slow

TOPIC = "ReportedTopic"


def test_a_report_asked_over_rest_runs_on_the_worker_and_shows_its_summary(
    platform: Platform, console: Console
) -> None:
    with platform.broker("broker-report", autoCreateTopicEnable="true") as (_proc, _addr):
        producer = Producer("report-producer", platform.namesrv_addr).start()
        try:
            since = int(time.time() * 1000) - 60_000
            sent = [producer.send(Message(TOPIC, f"m{i}".encode() * 10, tags="TagR")) for i in range(25)]
            assert len(sent) == 25
        finally:
            producer.shutdown()
        until = int(time.time() * 1000) + 1000
        status, bad = console.api(
            "POST", "/api/clusters/default/reports/", {"kind": "traffic", "since": until, "until": since}
        )
        assert status == 400 and "since must come before until" in bad["detail"]
        status, run = console.api(
            "POST",
            "/api/clusters/default/reports/",
            {"kind": "traffic", "since": since, "until": until, "topics": [TOPIC]},
        )
        assert status == 202, run
        assert run["status"] == "queued"

        seen = set()

        def finished() -> dict[str, Any]:
            code, body = console.api("GET", f"/api/clusters/default/reports/{run['id']}/")
            assert code == 200, body
            seen.add(body["status"])
            return body if body["status"] in ("succeeded", "failed") else {}

        done = wait_for(finished, 280, "the report run")
    assert done["status"] == "succeeded", done["error"]
    assert seen <= {"queued", "running", "succeeded"}
    summary = done["summary"]
    assert summary["messages"] == 25 and summary["topics"] == [TOPIC] and summary["kind"] == "traffic"
    assert done["inputRows"] == summary["inputRows"] >= 25
    assert done["stagesTotal"] > 0 and done["stagesDone"] == done["stagesTotal"] and done["percent"] == 100.0
    assert done["durationSeconds"] > 0 and done["requestedBy"] == "admin"
    code, tags = console.api("GET", f"/api/clusters/default/reports/{run['id']}/tables/top_tags/")
    assert code == 200 and [(r["topic"], r["tag"], r["messages"]) for r in tags["rows"]] == [
        (TOPIC, "TagR", 25)
    ]
    console.sign_in()
    page = console.page(f"/clusters/default/reports/{run['id']}/")
    assert 'id="run-status">succeeded<' in page
    assert re.search(r'id="sum-messages">\s*25\s*<', page), page[:2000]
