"""Browser tests: the whole platform started by ``manage.py up`` on free ports, driven by
Debian's Chromium through Playwright.  Without a browser they are skipped, except when
``QUIVER_REQUIRE_BROWSER`` is set (``.ci/run`` sets it after installing Chromium)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers import start_up, wait_for

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.environ.get("QUIVER_REQUIRE_BROWSER"):
        pytest.fail("Chromium is not installed (apt-get install chromium), and QUIVER_REQUIRE_BROWSER is set")
    pytest.skip("Chromium is not installed (apt-get install chromium)")


@dataclass
class Console:
    url: str
    namesrv_addr: str
    password: str
    data_dir: Path
    # The gRPC proxy ``up`` starts for RocketMQ 5 clients.
    proxy_addr: str = ""

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """Call the console's REST API as admin (HTTP basic auth)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        token = base64.b64encode(f"admin:{self.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return json.loads(raw) if raw else None


@pytest.fixture(scope="session")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    """The platform under ``manage.py up`` (private Redis), stopped at the end."""
    chromium_path()
    data_dir = tmp_path_factory.mktemp("browser-platform") / "var"
    up, ports, out = start_up(data_dir, REPO)
    try:
        wait_for(lambda: "REST API:" in out.read_text() or up.poll() is not None, 120, "the platform")
        text = out.read_text()
        assert up.poll() is None, text
        password = re.search(r"created superuser 'admin' with password (\S+)", text).group(1)  # type: ignore[union-attr]
        yield Console(
            f"http://127.0.0.1:{ports['console']}",
            f"127.0.0.1:{ports['namesrv']}",
            password,
            data_dir,
            f"127.0.0.1:{ports['proxy']}",
        )
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()


@pytest.fixture
def page(console: Console) -> Iterator[Any]:
    """A fresh browser page, signed in as admin.

    Every flow also checks that no page it visited logged an error to the browser's console
    (a script error, a pattern the browser cannot compile, a failed load): what a person
    never sees but a broken page shows first.  A page that is itself a 404 (an unknown
    topic's) is the test's to check, not an error of the page.
    """
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            page = context.new_page()
            documents: set[str] = set()  # pages opened: their own status is the test's to check
            page.on(
                "response", lambda r: documents.add(r.url) if r.request.resource_type == "document" else None
            )

            def logged(message: Any) -> None:
                if message.type != "error":
                    return
                if (
                    message.text.startswith("Failed to load resource")
                    and message.location.get("url") in documents
                ):
                    return  # the page itself answered 404 (an unknown topic): the test asserts that
                errors.append(f"{page.url}: {message.text}")

            page.on("console", logged)
            page.on("pageerror", lambda exc: errors.append(f"{page.url}: {exc}"))
            page.set_default_timeout(30_000)
            page.goto(console.url + "/login/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", console.password)
            page.click("button[type=submit]")
            page.wait_for_url(console.url + "/")
            yield page
        finally:
            browser.close()
    assert errors == [], "the browser's console logged errors"
