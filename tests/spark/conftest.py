"""Spark tests: one real local[2] session for the whole run, real servers per module.

The session starts once (6-10 s) and is shared; every test talks to a nameserver and a
broker of its own module (child processes, as in the console tests), with traffic the test
generates.  Nothing of ours is mocked.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from broker_core.broker.topics import TopicConfig
from broker_core.client.admin import AdminClient
from console.maintenance import history
from spark_reports.session import get_session
from tests.console.conftest import Servers, run_servers
from tests.servers import routed, wait_for

# Every delay level 1 s: a message sent back for retry is redelivered after a second.
FAST_DELAYS = " ".join(["1s"] * 18)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session("quiver-tests", master="local[2]", conf={"spark.sql.shuffle.partitions": "4"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """A nameserver and broker ``broker-a`` for one module, retries redelivered after 1 s
    (the broker runs its own delay scan: no Celery here)."""
    work = tmp_path_factory.mktemp("spark-servers")
    with run_servers(work, messageDelayLevel=FAST_DELAYS, standaloneMaintenance="true") as servers:
        yield servers


def admin_run(namesrv: str, call: Any) -> Any:
    """Run ``call(admin)`` (a coroutine function) with a fresh AdminClient."""

    async def go() -> Any:
        async with AdminClient(namesrv) as admin:
            return await call(admin)

    return asyncio.run(go())


def record_history(servers: Servers, history_dir: Path, cluster: str = "default") -> int:
    """What the offset-persistence job does for one broker: snapshot, then append the rows.
    Returns the snapshot's time (epoch ms)."""
    snapshot = admin_run(servers.namesrv_addr, lambda admin: admin.offset_snapshot(servers.broker_addr))
    history.append_snapshot(history_dir, snapshot, cluster, servers.broker_addr)
    return int(snapshot.timestamp_ms)


def create_topic(servers: Servers, topic: str, queues: int = 4) -> None:
    """Create ``topic`` on the broker and wait until the nameserver routes it."""
    config = TopicConfig(topic, read_queue_nums=queues, write_queue_nums=queues)
    admin_run(
        servers.namesrv_addr,
        lambda admin: admin.create_or_update_topic(config, broker_addr=servers.broker_addr),
    )
    wait_for(lambda: routed(servers.namesrv_addr, topic), 30, f"the route of {topic}")
