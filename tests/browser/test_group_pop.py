"""A group consuming by pop (RocketMQ 5) in a real Chromium: the group page's pop section
follows an ack without a reload, and the page (FIFO badge and pop section included) fits a
desktop and a phone; its screenshots are kept beside the other pages'."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from broker_core.client.admin import AdminClient
from broker_core.model.message import iter_records
from broker_core.model.receipt import ReceiptHandle
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.popheaders import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from tests.servers import wait_for

from .conftest import Console
from .test_pages_fit import artifacts, visit

pytestmark = pytest.mark.slow
C = "/clusters/default"
API = "/api/clusters/default"
TOPIC, GROUP = "BrowserPopTopic", "browser-pop-group"
T = TypeVar("T")


def run(call: Coroutine[Any, Any, T]) -> T:
    """``call`` run to its end on a loop of its own (Playwright's holds this thread)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, call).result(60)


async def _pop(namesrv_addr: str, count: int) -> list[tuple[str, ReceiptHandle]]:
    """Pop ``count`` messages of ``TOPIC`` for ``GROUP`` (60 s invisible): (broker, handle) each."""
    async with AdminClient(namesrv_addr) as admin:
        handles = []
        for name, addr in sorted((await admin.cluster_info()).master_addrs().items()):
            header = PopMessageRequestHeader(GROUP, TOPIC, max_msg_nums=count, invisible_time=60_000)
            response = await admin.requests.pop_message(addr, header)
            if response.code != ResponseCode.SUCCESS:
                continue
            answer = PopMessageResponseHeader.from_fields(response.ext_fields)
            handles += [
                (
                    addr,
                    ReceiptHandle(name, m.queue_id, m.queue_offset, answer.pop_time, answer.invisible_time),
                )
                for m in iter_records(response.body)
            ]
        return handles


async def _ack(namesrv_addr: str, addr: str, handle: ReceiptHandle) -> None:
    async with AdminClient(namesrv_addr) as admin:
        header = AckMessageRequestHeader(GROUP, TOPIC, handle.queue_id, handle.encode(), handle.offset)
        response = await admin.requests.ack_message(addr, header)
        assert response.code == ResponseCode.SUCCESS, response.remark


def test_the_pop_section_follows_an_ack_and_the_page_fits(console: Console, page: Any) -> None:
    console.api("POST", f"{API}/topics/", {"name": TOPIC, "readQueueNums": 1, "writeQueueNums": 1})
    console.api("POST", f"{API}/groups/", {"name": GROUP, "consumeMessageOrderly": True})
    for i in range(2):
        console.api("POST", f"{API}/topics/{TOPIC}/messages/", {"body": f"pop {i}"})
    wait_for(lambda: console.api("GET", f"{API}/topics/{TOPIC}/")["totalMessages"] == 2, 20, "stored")
    handles = wait_for(lambda: run(_pop(console.namesrv_addr, 2)), 20, "two messages popped")
    assert len(handles) == 2

    page.goto(console.url + C + f"/groups/{GROUP}/")
    page.evaluate("window.notReloaded = true")
    assert page.locator("#fifo-badge").inner_text() == "FIFO"
    assert page.locator("#pop-consumption h2").inner_text() == "Pop consumption (RocketMQ 5)"
    assert page.locator("#pop-in-flight").inner_text() == "2"
    run(_ack(console.namesrv_addr, *handles[0]))
    # The section asks again every 5 s: the ack shows without a reload.
    page.wait_for_function(
        "document.getElementById('pop-in-flight').textContent.trim() === '1'", timeout=20_000
    )
    assert page.locator("#pop-acked").inner_text() == "1"
    assert page.evaluate("window.notReloaded") is True

    too_wide = visit(console, page, {"group-pop": C + f"/groups/{GROUP}/"}, artifacts())
    assert too_wide == []
