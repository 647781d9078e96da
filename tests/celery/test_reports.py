"""A traffic report end to end: asked for over the console's REST API (a real console
process on the platform's database), run by the real Celery worker as ``python -m
spark_reports`` (Spark local) against a real broker with traffic sent here, and shown
finished with its summary on the run page."""

from __future__ import annotations

import base64
import http.cookiejar
import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer

from .conftest import REPO, Platform, _spawn, _stop, free_port, wait_for

pytestmark = pytest.mark.slow

TOPIC = "ReportedTopic"
PASSWORD = "pw-admin-report-123"


class Console:
    """The console at ``url``: REST calls with basic auth, pages with a signed-in session."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.token = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
        self.browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def api(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Basic {self.token}")
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"null")

    def sign_in(self) -> None:
        with self.browser.open(self.url + "/login/", timeout=10) as response:
            form = response.read().decode()
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)  # type: ignore[union-attr]
        fields = {"csrfmiddlewaretoken": csrf, "username": "admin", "password": PASSWORD}
        request = urllib.request.Request(
            self.url + "/login/", data=urllib.parse.urlencode(fields).encode(), method="POST"
        )
        request.add_header("Referer", self.url + "/login/")
        self.browser.open(request, timeout=10).close()

    def page(self, path: str) -> str:
        with self.browser.open(self.url + path, timeout=30) as response:
            return response.read().decode()


@pytest.fixture
def console(platform: Platform) -> Iterator[Console]:
    """daphne serving the console on the platform's database and Redis, with an admin."""
    env = {**platform.env, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
    made = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "createsuperuser",
            "--noinput",
            "--username",
            "admin",
            "--email",
            "admin@example.com",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0 or "already taken" in made.stderr, made.stderr
    port = free_port()
    log = platform.data_dir / "console.log"
    server = _spawn(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "console.asgi:application"],
        platform.env,
        log,
    )
    console = Console(f"http://127.0.0.1:{port}")

    def up() -> bool:
        try:
            urllib.request.urlopen(console.url + "/login/", timeout=2).close()
            return True
        except OSError:
            return server.poll() is not None

    try:
        wait_for(up, 60, "the console")
        assert server.poll() is None, log.read_text()[-3000:]
        yield console
    finally:
        _stop(server)


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
