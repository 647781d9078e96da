"""A broker started alone from the CLI, as a RocketMQ user starts one, with a default
broker.conf and no platform at all: the official client's delayed message and its retry
arrive when due (issue 13).  Nothing drives the broker's delay scan but the broker itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.client.admin import AdminClient
from broker_core.config import DEFAULT_DELAY_LEVELS, parse_delay_levels
from broker_core.testing import cli_server, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

LEVELS_MS = parse_delay_levels(DEFAULT_DELAY_LEVELS)
# A broker alone scans on its own timer: due messages wait at most its 100 ms scan interval,
# plus scheduling noise on a loaded two-core machine and the clients' hand-off.
ON_TIME_MS = 100 + 400


async def test_a_cli_broker_alone_delivers_delays_and_retries_on_time(tmp_path: Path) -> None:
    async with run_namesrv() as ns:
        conf = tmp_path / "broker.conf"
        conf.write_text(  # what a user writes: no maintenance key at all
            f"brokerClusterName = DefaultCluster\nbrokerName = broker-a\nbrokerId = 0\n"
            f"listenPort = 0\nnamesrvAddr = {ns.address}\nstorePathRootDir = {tmp_path / 'store'}\n"
        )
        with cli_server("broker", conf, log=tmp_path / "broker.log") as (_proc, addr):
            await create_topic(addr, "Delayed", 1)
            await create_topic(addr, "Retried", 1)
            await asyncio.sleep(0.5)  # the broker's registration carries the new topics
            consumer = asyncio.create_task(
                run_official_client(
                    "consumer_child.py", ns.address, "Delayed", "AloneConsumer", "1", "*", home=tmp_path / "c"
                )
            )
            await asyncio.sleep(1.0)  # the consumer is up and long-polling before the send
            sent = await run_official_client(
                "delayed_producer_child.py", ns.address, "Delayed", "1", home=tmp_path / "p"
            )
            assert sent[0]["status"] == 0, sent
            received = await consumer
            assert len(received) == 1 and received[0]["body"] == "later", received
            late_ms = received[0]["received_at"] * 1000 - (sent[0]["sent_at"] * 1000 + LEVELS_MS[0])
            assert late_ms <= ON_TIME_MS, f"delayed message {late_ms:.0f} ms late"

            plain = await run_official_client(  # level 0: a plain message
                "delayed_producer_child.py", ns.address, "Retried", "0", home=tmp_path / "r"
            )
            assert plain[0]["status"] == 0, plain
            deliveries = await run_official_client(
                "failing_consumer_child.py",
                ns.address,
                "Retried",
                "AloneRetry",
                "2",
                home=tmp_path / "f",
                timeout=60,
            )
            assert [d["reconsume_times"] for d in deliveries] == [0, 1], deliveries
            # The retry comes back at delay level 3 + 0 (10 s) after it was given back.
            retry_late_ms = (deliveries[1]["received_at"] - deliveries[0]["received_at"]) * 1000 - LEVELS_MS[
                2
            ]
            assert -100 <= retry_late_ms <= ON_TIME_MS, f"retry {retry_late_ms:.0f} ms late"

            async with AdminClient(ns.address) as admin:
                state = (await admin.maintenance_status(addr)).jobs["delay_scan"]
            assert (
                state.driver == "broker" and state.last_run is not None and state.last_run.runner == "broker"
            )
