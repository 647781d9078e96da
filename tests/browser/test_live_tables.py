"""The dashboard's live figures in a real Chromium: the brokers table follows the same
websocket samples as the cards and the chart, and a dropped socket is said, not hidden."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.testing import cli_server
from console.core.redis import ChannelLayer
from tests.servers import wait_for

from .conftest import Console
from .test_console_flows import make_topic

pytestmark = pytest.mark.slow
C = "/clusters/default"
TODAY_IN = "#brokers tr[data-broker] td[data-cell=putToday]"


def figures(page: Any) -> dict[str, str]:
    """The "Today in" cell of the (only) broker and the "Messages stored today" card, read at once."""
    return page.evaluate(
        """(sel) => ({
            row: document.querySelector(sel).textContent.trim(),
            card: document.getElementById("live-put-today").textContent.trim(),
        })""",
        TODAY_IN,
    )


def test_the_brokers_table_follows_the_live_samples(console: Console, page: Any) -> None:
    page.goto(console.url + C + "/")
    page.evaluate("window.notReloaded = true")
    wait_for(
        lambda: page.locator("#live-put-today").inner_text() not in ("…", ""), 20, "the first live sample"
    )
    before = figures(page)["row"]
    assert re.fullmatch(r"[\d,]+", before), before  # a count as the page formats it
    producer = Producer("live-table-producer", console.namesrv_addr).start()
    try:
        make_topic(console, "LiveTableTopic", 0)
        deadline = time.monotonic() + 30
        while figures(page)["row"] == before and time.monotonic() < deadline:
            for i in range(20):
                producer.send(Message("LiveTableTopic", f"row tick {i}".encode()))
            page.wait_for_timeout(500)
    finally:
        producer.shutdown()
    now = figures(page)
    assert now["row"] != before, "the broker's 'Today in' did not change without a reload"
    assert page.evaluate("window.notReloaded") is True
    # One broker: its row and the cluster's card come from the same sample and agree.
    wait_for(lambda: (f := figures(page))["row"] == f["card"], 10, "the row and the card to agree")
    assert page.locator("#live-status").is_hidden()
    row = page.locator("#brokers tr[data-broker]")
    assert row.count() == 1 and "failing" not in (row.get_attribute("class") or "")
    assert re.fullmatch(r"[\d,]+\.\d", row.locator("td[data-cell=putTps]").inner_text())
    # Left open past the time a Redis read may wait, the page's sockets idle without an error
    # (the console log had 24 "Timeout reading from 127.0.0.1:6379" tracebacks).
    page.wait_for_timeout((ChannelLayer.brpop_timeout + ChannelLayer.READ_MARGIN_S + 2) * 1000)
    assert page.locator("#live-status").is_hidden()
    log = (console.data_dir / "log" / "console.log").read_text()
    assert "Timeout reading from" not in log and "Exception inside application" not in log


def test_a_dropped_live_socket_is_said_and_reconnects(console: Console, page: Any) -> None:
    sockets: list[Any] = []

    def through(ws: Any) -> None:  # pass the page's socket on to the console, keep a handle
        sockets.append(ws)
        ws.connect_to_server()

    page.route_web_socket(re.compile(r".*/ws/clusters/default/live/$"), through)
    page.goto(console.url + C + "/")
    # Waits run in the browser (wait_for_function), so Playwright keeps serving the route meanwhile.
    page.wait_for_function("() => !['…', ''].includes(document.getElementById('live-put-today').textContent)")
    status = page.locator("#live-status")
    assert status.is_hidden()
    sockets[-1].close(code=1012, reason="console restarting")
    page.wait_for_function("() => !document.getElementById('live-status').hidden", timeout=10_000)
    assert "Live updates paused" in status.inner_text() and "reconnecting" in status.inner_text()
    # Reconnected (a new socket) and a sample arrived on it: the notice is gone.
    page.wait_for_function("() => document.getElementById('live-status').hidden", timeout=30_000)
    assert len(sockets) == 2
    assert re.fullmatch(r"[\d,]+", page.locator("#live-put-today").inner_text())


def test_a_broker_that_joins_fails_and_leaves_shows_in_the_table(
    console: Console, page: Any, tmp_path: Path
) -> None:
    page.goto(console.url + C + "/")
    page.wait_for_function("() => document.querySelectorAll('#brokers tr[data-broker]').length === 1")
    conf = {
        "brokerClusterName": "LiveTableCluster",
        "brokerName": "broker-live-b",
        "brokerIP1": "127.0.0.1",
        "listenPort": 0,
        "namesrvAddr": console.namesrv_addr,
        "storePathRootDir": tmp_path / "store",
        "mappedFileSizeCommitLog": 1024 * 1024,
        "warmMappedFileEnable": "false",
    }
    (tmp_path / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    with cli_server("broker", tmp_path / "broker.conf", log=tmp_path / "broker.log") as (proc, addr):
        row = page.locator(f'#brokers tr[data-broker="{addr}"]')
        # It registers, and the next sample adds its row, figures and all.
        row.wait_for(timeout=30_000)
        assert row.locator("td[data-cell=brokerName]").inner_text() == "broker-live-b"
        assert row.locator("td[data-cell=role]").inner_text() == "master"
        page.wait_for_function(
            "(addr) => /^[\\d,]+$/.test(document.querySelector(`#brokers tr[data-broker='${addr}'] "
            "td[data-cell=putToday]`)?.textContent || '')",
            arg=addr,
            timeout=30_000,
        )
        os.kill(proc.pid, signal.SIGSTOP)  # registered, but answers nothing
        try:
            page.wait_for_function(
                "(addr) => document.querySelector(`#brokers tr[data-broker='${addr}']`)"
                ".classList.contains('failing')",
                arg=addr,
                timeout=60_000,
            )
            assert (
                row.locator("td[data-cell=error]").inner_text().startswith(f"unknown: {addr} did not answer")
            )
            others = page.locator(f'#brokers tr[data-broker]:not([data-broker="{addr}"])')
            assert others.count() == 1 and "failing" not in (others.get_attribute("class") or "")
            assert page.locator("#live-status").is_hidden()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()  # a broker that stops unregisters: its row goes
        proc.wait(30)
        page.wait_for_function(
            "() => document.querySelectorAll('#brokers tr[data-broker]').length === 1", timeout=30_000
        )
