"""``manage.py up`` starts the gRPC proxy: the official RocketMQ 5 client sends through it to
the platform's broker, and the messages are there for a 4.x consumer (checked in the console's
own API, which browses the topic).  The topic is created NORMAL in the console, so the
client's FIFO and timer messages are refused, as RocketMQ's proxy refuses them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.v5.children import V5_PYTHON, run_v5

from .conftest import Console

pytestmark = pytest.mark.skipif(
    not V5_PYTHON.exists(), reason=".venv-v5 is made by `python3 manage.py` setup"
)


def test_up_serves_rocketmq_5_clients(console: Console, tmp_path: Path) -> None:
    created = console.api(
        "POST",
        "/api/clusters/default/topics/",
        {"name": "FromV5ViaUp", "readQueueNums": 2, "writeQueueNums": 2, "messageType": "NORMAL"},
    )
    assert created["name"] == "FromV5ViaUp", created
    sent = asyncio.run(
        run_v5("producer_child.py", console.proxy_addr, "FromV5ViaUp", "3", home=tmp_path / "v5")
    )
    ids = {line["message_id"] for line in sent if line["kind"] == "normal"}
    assert len(ids) == 3, sent
    refused = [line for line in sent if line["kind"] in ("fifo", "timer")]
    assert len(refused) == 7 and all("message_id" not in line for line in refused), refused
    browsed = console.api("GET", "/api/clusters/default/topics/FromV5ViaUp/browse/?begin=0")
    assert {m["uniqKey"] for m in browsed["messages"]} == ids
