"""The mqadmin-style commands, run as a user runs them (a subprocess) against real servers."""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker_core.broker.controller import BrokerController

from .clusterhelpers import cluster, commit_offset, dead_addr, heartbeat, put, raw_client, wait_until_routed
from .conftest import REPO


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return orjson.loads(self.out)


async def cli(*args: str, env: dict[str, str] | None = None, program: list[str] | None = None) -> Run:
    """Run ``python -m broker_core ARGS`` (or ``program``) without blocking the servers' loop."""
    base = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    proc = await asyncio.create_subprocess_exec(
        *(program or [sys.executable, "-m", "broker_core"]),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**base, "PYTHONPATH": str(REPO), **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def failed(run: Run, *fragments: str) -> bool:
    """Exit 1 with one ``error:`` line naming every fragment, and no traceback."""
    lines = run.err.strip().splitlines()
    return (
        run.code == 1
        and len(lines) == 1
        and lines[0].startswith("error: ")
        and all(f in lines[0] for f in fragments)
        and "Traceback" not in run.err
    )


async def messages_in_orders(broker: BrokerController) -> list[str]:
    """Five messages in queue 0 and three in queue 1 of Orders; return their offset msgIds."""
    ids = [put(broker, "Orders", 0, f"order {i}".encode(), KEYS=f"order-{i} batch-7") for i in range(5)]
    ids += [put(broker, "Orders", 1, f"late {i}".encode(), UNIQ_KEY=f"AB{i:030d}") for i in range(3)]
    assert broker.store is not None and broker.store.wait_dispatched()
    return ids


async def test_it_manages_topics_and_reads_messages_from_the_command_line(tmp_path: Path) -> None:
    async with cluster(tmp_path / "store") as (ns, broker):
        n = ["-n", ns.address]
        created = await cli(
            "updateTopic", *n, "-c", "DefaultCluster", "-t", "Orders", "-r", "4", "-w", "4", "--json"
        )
        assert created.code == 0, created.err
        assert created.json["brokers"] == [broker.address] and created.json["config"]["readQueueNums"] == 4
        await wait_until_routed(ns, "Orders")
        ids = await messages_in_orders(broker)

        clusters = await cli("clusterList", *n)
        assert clusters.code == 0 and "DefaultCluster" in clusters.out and broker.address in clusters.out
        assert "Orders" in (await cli("topicList", *n)).out.split()
        route = await cli("topicRoute", *n, "-t", "Orders", "--json")
        assert route.json["brokerDatas"][0]["brokerAddrs"] == {"0": broker.address}

        status = await cli("topicStatus", *n, "-t", "Orders", "--json")
        assert [(q["queueId"], q["maxOffset"]) for q in status.json["queues"]] == [
            (0, 5),
            (1, 3),
            (2, 0),
            (3, 0),
        ]
        table = await cli("topicStatus", *n, "-t", "Orders")
        assert table.out.splitlines()[0].split("  ")[0] == "#Broker Name" and "broker-a" in table.out

        by_id = await cli("queryMsgById", *n, "-i", ids[2])
        assert by_id.code == 0 and "order 2" in by_id.out and "order-2 batch-7" in by_id.out
        by_id_json = (await cli("queryMsgById", *n, "-i", ids[2], "--json")).json
        assert (by_id_json["body"], by_id_json["queueOffset"], by_id_json["msgId"]) == ("order 2", 2, ids[2])
        by_key = await cli("queryMsgByKey", *n, "-t", "Orders", "-k", "batch-7", "--json")
        assert [m["body"] for m in by_key.json["messages"]] == [f"order {i}" for i in range(5)]
        unique = await cli("queryMsgByUniqueKey", *n, "-t", "Orders", "-i", f"AB{1:030d}", "--json")
        assert [m["body"] for m in unique.json["messages"]] == ["late 1"]

        deleted = await cli("deleteTopic", *n, "-t", "Orders", "-c", "DefaultCluster")
        assert deleted.code == 0 and "success" in deleted.out
        assert failed(await cli("topicStatus", *n, "-t", "Orders"), "TOPIC_NOT_EXIST", "Orders")


async def test_it_shows_group_progress_and_resets_offsets_from_the_command_line(tmp_path: Path) -> None:
    async with cluster(tmp_path / "store") as (ns, broker), raw_client() as client:
        n = ["-n", ns.address]
        assert (
            await cli("updateTopic", *n, "-b", broker.address, "-t", "Orders", "-r", "2", "-w", "2")
        ).code == 0
        await wait_until_routed(ns, "Orders")
        await messages_in_orders(broker)
        await commit_offset(client, broker, "billing", "Orders", 0, 2)
        await commit_offset(client, broker, "billing", "Orders", 1, 3)
        await heartbeat(
            client, broker, "10.0.0.7@reader", consumer_group="billing", subscriptions={"Orders": "*"}
        )
        await heartbeat(client, broker, "10.0.0.7@writer", producer_group="checkout")

        progress = await cli("consumerProgress", *n, "-g", "billing", "--json")
        assert [
            (q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"]) for q in progress.json["queues"]
        ] == [
            (0, 5, 2, 3),
            (1, 3, 3, 0),
        ]
        assert progress.json["totalLag"] == 3
        assert "Diff Total: 3" in (await cli("consumerProgress", *n, "-g", "billing")).out
        every = await cli("consumerProgress", *n, "--json")
        billing = next(g for g in every.json["groups"] if g["group"] == "billing")
        assert (billing["clients"], billing["totalLag"]) == (1, 3)
        assert "billing" in (await cli("groupList", *n)).out.split()

        consumers = await cli("consumerConnection", *n, "-g", "billing")
        assert "10.0.0.7@reader" in consumers.out and "CLUSTERING" in consumers.out
        producers = await cli("producerConnection", *n, "-g", "checkout", "-t", "Orders", "--json")
        assert [c["clientId"] for c in producers.json["connectionSet"]] == ["10.0.0.7@writer"]

        reset = await cli("resetOffsetByTime", *n, "-g", "billing", "-t", "Orders", "-s", "0", "--json")
        assert [o["offset"] for o in reset.json["offsets"]] == [0, 0]
        after = await cli("consumerProgress", *n, "-g", "billing", "-t", "Orders", "--json")
        assert after.json["totalLag"] == 8

        assert failed(await cli("consumerConnection", *n, "-g", "nobody"), "nobody", "not online")
        bad_time = await cli("resetOffsetByTime", *n, "-g", "billing", "-t", "Orders", "-s", "yesterday")
        assert bad_time.code == 2 and "yyyy-MM-dd#HH:mm:ss:SSS" in bad_time.err


async def test_it_manages_groups_and_brokers_with_or_without_a_nameserver(tmp_path: Path) -> None:
    async with cluster(tmp_path / "store") as (ns, broker):
        # NAMESRV_ADDR stands in for -n, as with mqadmin.
        env = {"NAMESRV_ADDR": ns.address}
        updated = await cli(
            "updateSubGroup", "-c", "DefaultCluster", "-g", "audit", "-r", "3", "--json", env=env
        )
        assert updated.code == 0, updated.err
        assert updated.json["config"]["retryMaxTimes"] == 3
        assert broker.groups.get("audit") is not None and broker.groups.get("audit").retry_max_times == 3
        deleted = await cli("deleteSubGroup", "-b", broker.address, "-g", "audit", env=env)
        assert deleted.code == 0 and broker.groups.get("audit") is None

        # Commands that name their broker need no nameserver.
        status = await cli("brokerStatus", "-b", broker.address, "--json")
        assert status.json["bootTimestamp"] == str(broker.boot_timestamp)
        config = await cli("getBrokerConfig", "-b", broker.address)
        settings = dict(
            tuple(part.strip() for part in line.split("=", 1)) for line in config.out.splitlines()
        )
        assert (settings["brokerName"], settings["listenPort"]) == ("broker-a", str(broker.port))
        job = await cli("runMaintenance", "-b", broker.address, "-j", "offset_persistence", "--json")
        assert job.json["job"] == "offset_persistence" and job.json["ok"] is True
        by_cluster = await cli("brokerStatus", "-c", "DefaultCluster", "--json", env=env)
        assert list(by_cluster.json) == [broker.address]


async def test_it_fails_in_one_line_when_it_cannot_do_what_was_asked(tmp_path: Path) -> None:
    assert failed(await cli("topicList", "-n", dead_addr()), "no nameserver answered")
    assert failed(await cli("topicList"), "no nameserver address", "NAMESRV_ADDR")
    assert failed(await cli("queryMsgById", "-n", dead_addr(), "-i", "xyz"), "not hexadecimal")
    usage = await cli("updateTopic", "-n", "127.0.0.1:9876", "-t", "Orders")
    assert usage.code == 2 and "-b/--brokerAddr -c/--clusterName" in usage.err.replace("(", "").replace(
        ")", ""
    )
    async with cluster(tmp_path / "store") as (ns, _broker):
        assert failed(
            await cli("updateTopic", "-n", ns.address, "-c", "Nowhere", "-t", "Orders"),
            "'Nowhere' is not registered",
        )


async def test_it_installs_the_quiver_admin_command(tmp_path: Path) -> None:
    script = Path(sys.executable).parent / "quiver-admin"
    if not script.exists():
        pytest.skip(f"{script} is not installed (pip install -e . creates it)")
    async with cluster(tmp_path / "store") as (ns, _broker):
        run = await cli("clusterList", "-n", ns.address, "--json", program=[str(script)])
        assert run.code == 0 and run.json["brokers"][0]["brokerName"] == "broker-a"


async def test_it_signs_with_an_acl_account_from_flags_or_environment(tmp_path: Path) -> None:
    from broker_core.testing import run_broker

    config_dir = tmp_path / "store" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "plain_acl.yml").write_text(
        "accounts:\n  - {accessKey: ops, secretKey: ops-secret, admin: true}\n"
    )
    async with run_broker(tmp_path / "store", acl_enable=True) as broker:
        refused = await cli("brokerStatus", "-b", broker.address)
        assert failed(refused, "NO_PERMISSION")
        by_flags = await cli(
            "brokerStatus", "-b", broker.address, "--accessKey", "ops", "--secretKey", "ops-secret"
        )
        assert by_flags.code == 0 and "brokerName" in by_flags.out
        by_env = await cli(
            "runMaintenance",
            "-b",
            broker.address,
            "-j",
            "offset_persistence",
            "--json",
            env={"QUIVER_ACCESS_KEY": "ops", "QUIVER_SECRET_KEY": "ops-secret"},
        )
        assert by_env.code == 0 and by_env.json["ok"] is True
