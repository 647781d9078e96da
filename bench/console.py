"""The console at scale: 1,000 topics, 1,000 consumer groups and 1 M messages on a broker.

Measures, in this process (Django's test client, so the figure is server time, not the
network): the first page of the topic list and of the group list with lag, counting the
broker requests each made; a key lookup over the 1 M messages; and, side by side, what the
group list would cost asked one group at a time (AdminClient.group_summaries for one page
of 50), the per-row pattern RocketMQ Dashboard users complain about.

Targets (issue 6): first pages under 300 ms of server time with a bounded number of broker
calls (per broker, not per row); key lookup over 1 M messages under 100 ms.

    .venv/bin/python bench/console.py [--topics 1000] [--groups 1000] [--messages 1000000] [--quick]

Ends with one JSON line of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import ROOT, start_cluster  # noqa: E402

TOPIC_QUEUES = 4


async def populate(addr: str, namesrv: str, topics: int, groups: int) -> None:
    """Topics, and groups with a committed offset on one queue of one topic each."""
    from broker_core.remoting.client import RemotingClient
    from broker_core.remoting.codes import RequestCode
    from broker_core.remoting.command import RemotingCommand

    client = RemotingClient()
    try:
        sem = asyncio.Semaphore(64)

        async def call(code: int, fields: dict[str, Any], body: bytes = b"") -> None:
            async with sem:
                response = await client.invoke(addr, RemotingCommand.request(code, fields, body), timeout=30)
                if response.code != 0:
                    raise SystemExit(f"request {code} refused: {response.remark}")

        await asyncio.gather(
            *(
                call(
                    RequestCode.UPDATE_AND_CREATE_TOPIC,
                    {
                        "topic": f"T{i:04d}",
                        "readQueueNums": TOPIC_QUEUES,
                        "writeQueueNums": TOPIC_QUEUES,
                        "perm": 6,
                    },
                )
                for i in range(topics)
            )
        )
        await asyncio.gather(
            *(
                call(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {
                        "consumerGroup": f"G{i:04d}",
                        "topic": f"T{i % topics:04d}",
                        "queueId": 0,
                        "commitOffset": 0,
                    },
                )
                for i in range(groups)
            )
        )
    finally:
        await client.close()


def fill(namesrv: str, messages: int) -> float:
    """``messages`` 100-byte messages with a key each into topic KEYS, in batches of 32; seconds taken."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    producer = Producer("bench-console", namesrv).start()
    started = time.perf_counter()
    try:
        batch = []
        for i in range(messages):
            batch.append(Message("KEYS", b"x" * 100, keys=f"key-{i}"))
            if len(batch) == 32:
                producer.send_batch(batch)
                batch = []
        if batch:
            producer.send_batch(batch)
    finally:
        producer.shutdown()
    return time.perf_counter() - started


class CallCounter:
    """Counts the requests the console's AdminClient sends (to brokers and nameservers)."""

    def __init__(self) -> None:
        from broker_core.client.admin import AdminClient

        self.count = 0
        original = AdminClient._send

        async def counted(client: Any, *args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return await original(client, *args, **kwargs)

        AdminClient._send = counted  # type: ignore[method-assign]


def timed(client: Any, counter: CallCounter, url: str, runs: int) -> dict[str, Any]:
    times, calls = [], []
    for _ in range(runs):
        before = counter.count
        started = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - started) * 1000)
        calls.append(counter.count - before)
        assert response.status_code == 200, (url, response.status_code, response.content[:300])
    body = response.json()
    return {
        "medianMs": round(statistics.median(times), 1),
        "maxMs": round(max(times), 1),
        "brokerCalls": max(calls),
        "body": body,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100 topics, 100 groups, 20,000 messages")
    args = parser.parse_args()
    if args.quick:
        args.topics, args.groups, args.messages = 100, 100, 20_000
    with tempfile.TemporaryDirectory(prefix="quiver-console-bench-") as tmp:
        work = Path(tmp)
        namesrv, broker = start_cluster(work, [])
        try:
            os.environ.update(
                DJANGO_SETTINGS_MODULE="console.settings",
                QUIVER_DATA_DIR=str(work / "var"),
                QUIVER_NAMESRV_ADDR=namesrv.addr,
                DJANGO_ALLOWED_HOSTS="testserver",
            )
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "-v", "0"],
                cwd=ROOT,
                check=True,
                env={**os.environ, "QUIVER_NO_BOOTSTRAP": "1"},
            )
            asyncio.run(populate(broker.addr, namesrv.addr, args.topics, args.groups))
            from servers import create_topic

            create_topic(broker.addr, "KEYS", 8)
            fill_s = fill(namesrv.addr, args.messages)
            time.sleep(3)  # the broker re-registers its topics with the nameserver

            import django

            django.setup()
            from django.contrib.auth import get_user_model
            from django.test import Client

            from broker_core.client.admin import AdminClient

            counter = CallCounter()
            user = get_user_model().objects.create_superuser("bench", password="pw-bench-123")
            client = Client()
            client.force_login(user)
            api = "/api/clusters/default/"
            client.get(api + "topics/?page_size=50")  # warm: connections, route cache
            topics = timed(client, counter, api + "topics/?page_size=50&type=all", 5)
            groups = timed(client, counter, api + "groups/?page_size=50&sort=-lag", 5)
            keys = timed(
                client, counter, api + f"messages/by-key/?topic=KEYS&key=key-{args.messages // 2}", 5
            )
            assert topics["body"]["count"] >= args.topics, topics["body"]["count"]
            assert groups["body"]["count"] >= args.groups, groups["body"]["count"]
            assert len(keys["body"]["messages"]) == 1

            async def per_row() -> tuple[float, int]:
                names = [g["group"] for g in groups["body"]["results"]]
                async with AdminClient(namesrv.addr) as admin:
                    before = counter.count
                    started = time.perf_counter()
                    await admin.group_summaries(names)
                    return (time.perf_counter() - started) * 1000, counter.count - before

            per_row_ms, per_row_calls = asyncio.run(per_row())
        finally:
            broker.stop()
            namesrv.stop()
    figures = {
        "topics": args.topics,
        "groups": args.groups,
        "messages": args.messages,
        "fillSeconds": round(fill_s, 1),
        "topicListMs": topics["medianMs"],
        "topicListCalls": topics["brokerCalls"],
        "groupListMs": groups["medianMs"],
        "groupListCalls": groups["brokerCalls"],
        "keyLookupMs": keys["medianMs"],
        "perRowGroupPageMs": round(per_row_ms, 1),
        "perRowGroupPageCalls": per_row_calls,
    }
    print(f"{args.topics} topics, {args.groups} groups, {args.messages} messages (filled in {fill_s:.1f} s)")
    for label, row, target in (
        ("topic list, first page", topics, 300),
        ("group list with lag", groups, 300),
        ("key lookup over messages", keys, 100),
    ):
        print(f"{label:<26}{row['medianMs']:>8} ms median {row['brokerCalls']:>5} requests (< {target} ms)")
    print(
        f"one page of 50 groups asked one by one: {per_row_ms:.1f} ms, {per_row_calls} requests "
        f"({per_row_ms / max(groups['medianMs'], 0.1):.1f}x the whole batched list)"
    )
    met = topics["medianMs"] < 300 and groups["medianMs"] < 300 and keys["medianMs"] < 100
    print(f"targets: {'met' if met else 'MISSED'}")
    print(json.dumps({**figures, "targetsMet": met}))


if __name__ == "__main__":
    main()
