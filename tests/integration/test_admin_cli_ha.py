"""``quiver-admin`` on a master/slave set, run as a user runs it: ``haStatus``, the roles of
``clusterList`` and the replication figures of ``brokerStatus``, with both brokers up and
after one of them stops."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path

from broker_core.broker.controller import BrokerController
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.store.configfile import DataVersion
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import dead_addr, raw_client, wait_until_routed
from .test_admin_cli import cli, failed
from .test_replication import send_request, wait_connected

TOPIC = "Replicated"
CLUSTER = "HaCluster"
SET = {"broker_name": "broker-r", "broker_cluster_name": CLUSTER}


def section(text: str, title: str) -> list[list[str]]:
    """The rows (header first) of the table under ``title:``, cells split on 2+ spaces."""
    lines = text.split(f"{title}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [re.split(r"\s{2,}", line.strip()) for line in lines]


async def registered(ns: NamesrvServer, *addrs: str) -> None:
    """Wait until the nameserver lists exactly ``addrs`` for the broker set."""
    async with asyncio.timeout(10):
        while True:
            run = await cli("clusterList", "-n", ns.address, "--json")
            if run.code == 0 and sorted(b["addr"] for b in run.json["brokers"]) == sorted(addrs):
                return
            await asyncio.sleep(0.1)


async def replicated(master: BrokerController, slave: BrokerController, ns: NamesrvServer) -> int:
    """Send 20 messages to the SYNC_MASTER (each answered once the slave holds it); its log's end."""
    master.topics.update(TopicConfig(TOPIC, 2, 2))
    master.topics_changed()
    await wait_until_routed(ns, TOPIC)
    await wait_connected(master)
    async with raw_client() as client:
        for i in range(20):
            reply = await client.invoke(master.address, send_request(TOPIC, b"m%d" % i * 40, i % 2), 5)
            assert reply.code == 0, reply.remark
    assert master.store is not None and slave.store is not None
    assert slave.store.commit_log.max_offset == master.store.commit_log.max_offset
    return master.store.commit_log.max_offset


async def test_ha_status_cluster_list_and_broker_status_show_the_set(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        ns = await stack.enter_async_context(run_namesrv())
        master = await stack.enter_async_context(
            run_broker(tmp_path / "m", ns.address, broker_role="SYNC_MASTER", **SET)
        )
        slave_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
        slave = await slave_stack.enter_async_context(
            run_broker(tmp_path / "s", ns.address, broker_role="SLAVE", broker_id=1, **SET)
        )
        end = await replicated(master, slave, ns)
        await registered(ns, master.address, slave.address)
        n = ["-n", ns.address]

        # haStatus of the cluster: the master, its slave's link, the slave's own view.
        run = await cli("haStatus", *n, "-c", CLUSTER, "--json")
        assert run.code == 0, run.err
        mine, theirs = run.json["brokers"]
        assert (mine["addr"], mine["brokerId"], mine["brokerRole"], mine["side"]) == (
            master.address, 0, "SYNC_MASTER", "master",
        )  # fmt: skip
        assert mine["maxOffset"] == end and mine["inSyncSlaves"] == 1 and mine["problems"] == []
        (link,) = mine["slaves"]
        assert (link["ackedOffset"], link["behindBytes"], link["behindMs"], link["inSync"]) == (
            end,
            0,
            0,
            True,
        )
        assert link["lastReportMs"] > 0
        assert (theirs["addr"], theirs["brokerId"], theirs["brokerRole"], theirs["side"]) == (
            slave.address, 1, "SLAVE", "slave",
        )  # fmt: skip
        assert theirs["connected"] is True and theirs["masterAddr"] == master.address
        assert theirs["maxOffset"] == end and theirs["behindMasterBytes"] == 0 and theirs["error"] is None

        text = await cli("haStatus", *n, "-c", CLUSTER)
        assert text.code == 0, text.err
        masters = section(text.out, "Masters")
        assert masters[0][:5] == ["#Broker Name", "#Addr", "#Role", "#HA Addr", "#Max Offset"]
        assert masters[1] == [
            "broker-r",
            master.address,
            "SYNC_MASTER",
            mine["haAddr"],
            str(end),
            "1",
            "1",
            "-",
        ]
        links = section(text.out, "Slaves connected to each master")
        assert links[1][:7] == ["broker-r", master.address, link["addr"], str(end), "0", "0ms", "true"]
        slaves = section(text.out, "Slaves")
        assert slaves[0][5] == "#Connected"
        assert slaves[1][:8] == [
            "broker-r", slave.address, "SLAVE", master.address, theirs["masterHaAddr"], "true", str(end), "0",
        ]  # fmt: skip
        # Without -c: every cluster; with -b: that broker alone, no nameserver needed.
        every = await cli("haStatus", *n, "--json")
        assert [b["addr"] for b in every.json["brokers"]] == [master.address, slave.address]
        alone = await cli("haStatus", "-b", slave.address)
        assert alone.code == 0 and "Masters:" not in alone.out
        assert section(alone.out, "Slaves")[1][5] == "true"

        # clusterList: each broker's role.
        listing = await cli("clusterList", *n, "--json")
        assert [(b["brokerId"], b["brokerRole"]) for b in listing.json["brokers"]] == [
            (0, "SYNC_MASTER"),
            (1, "SLAVE"),
        ]
        rows = [re.split(r"\s{2,}", line) for line in (await cli("clusterList", *n)).out.splitlines()]
        assert rows[0][:5] == ["#Cluster Name", "#Broker Name", "#BID", "#Role", "#Addr"]
        assert [r[2:5] for r in rows[1:]] == [
            ["0", "SYNC_MASTER", master.address],
            ["1", "SLAVE", slave.address],
        ]

        # brokerStatus: the role, a master's slaves and their lag, a slave's master and link.
        status = (await cli("brokerStatus", "-b", master.address, "--json")).json
        assert (status["brokerRole"], status["brokerId"]) == ("SYNC_MASTER", "0")
        assert (status["haConnectedSlaves"], status["haInSyncSlaves"], status["slaveFallBehindMuch"]) == (
            "1", "1", "0",
        )  # fmt: skip
        assert status[f"haSlave.{link['addr']}.behindBytes"] == "0"
        assert status[f"haSlave.{link['addr']}.inSync"] == "true"
        status = (await cli("brokerStatus", "-b", slave.address, "--json")).json
        assert (status["brokerRole"], status["brokerId"]) == ("SLAVE", "1")
        assert (status["haMasterAddr"], status["haConnected"]) == (master.address, "true")
        text_status = await cli("brokerStatus", "-b", slave.address)
        assert re.search(r"^brokerRole\s*: SLAVE$", text_status.out, re.M)
        by_cluster = await cli("brokerStatus", *n, "-c", CLUSTER, "--json")
        assert list(by_cluster.json) == [master.address, slave.address]

        # The slave stops: the master has no slave left, and the slave answers nothing.
        slave_addr = slave.address
        await slave_stack.aclose()
        await registered(ns, master.address)
        async with asyncio.timeout(10):
            while True:
                after = await cli("haStatus", "-b", master.address, "--json")
                if after.json["brokers"][0]["slaves"] == []:
                    break
                await asyncio.sleep(0.1)
        after_text = await cli("haStatus", *n, "-c", CLUSTER)
        assert section(after_text.out, "Masters")[1][5:7] == ["0", "0"]
        assert "none: no slave is connected" in after_text.out and "Slaves:" not in after_text.out
        status = (await cli("brokerStatus", "-b", master.address, "--json")).json
        assert status["haConnectedSlaves"] == "0" and int(status["slaveFallBehindMuch"]) == end
        assert failed(await cli("haStatus", "-b", slave_addr), slave_addr)


async def test_a_slave_whose_master_stopped_shows_its_link_down(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        ns = await stack.enter_async_context(run_namesrv())
        master_stack = await stack.enter_async_context(contextlib.AsyncExitStack())
        master = await master_stack.enter_async_context(
            run_broker(tmp_path / "m", ns.address, broker_role="SYNC_MASTER", **SET)
        )
        slave = await stack.enter_async_context(
            run_broker(tmp_path / "s", ns.address, broker_role="SLAVE", broker_id=1, **SET)
        )
        end = await replicated(master, slave, ns)
        master_addr = master.address
        await master_stack.aclose()
        await registered(ns, slave.address)
        async with asyncio.timeout(10):
            while True:
                run = await cli("haStatus", "-b", slave.address, "--json")
                assert run.code == 0, run.err
                (entry,) = run.json["brokers"]
                if entry["connected"] is False:
                    break
                await asyncio.sleep(0.1)
        assert (entry["brokerRole"], entry["masterAddr"], entry["maxOffset"]) == ("SLAVE", master_addr, end)
        assert entry["brokerName"] == "broker-r" and entry["brokerId"] is None  # -b: no nameserver asked
        text = await cli("haStatus", "-n", ns.address, "-c", CLUSTER)
        assert "Masters:" not in text.out
        (header, row) = section(text.out, "Slaves")
        assert row[:6] == ["broker-r", slave.address, "SLAVE", master_addr, entry["masterHaAddr"], "false"]
        # Its master is not listed: how far behind it is, nobody can tell.
        assert row[7] == "-"
        status = (await cli("brokerStatus", "-b", slave.address, "--json")).json
        assert (status["brokerRole"], status["haConnected"]) == ("SLAVE", "false")

        # A master registered but not answering: listed so, the rest of the listing goes on.
        gone = dead_addr()
        ns.routes.register_broker(CLUSTER, gone, "broker-r", 0, "", DataVersion(1, 1), None, [], None)
        listing = await cli("clusterList", "-n", ns.address, "--json")
        assert [(b["addr"], b["brokerRole"]) for b in listing.json["brokers"]] == [
            (gone, None),
            (slave.address, "SLAVE"),
        ]
        run = await cli("haStatus", "-n", ns.address, "-c", CLUSTER, "--json")
        assert run.code == 0, run.err
        dead, alive = run.json["brokers"]
        assert (dead["addr"], dead["side"], dead["brokerRole"]) == (gone, "master", None) and dead["error"]
        # Its master answers nothing: how far behind the slave is, nobody can tell.
        assert alive["connected"] is False and alive["behindMasterBytes"] is None
        text = await cli("haStatus", "-n", ns.address, "-c", CLUSTER)
        (_, row) = section(text.out, "Masters")
        assert row[:7] == ["broker-r", gone, "-", "-", "-", "-", "-"] and gone in row[7]
        assert "Slaves connected to each master:\nnone" in text.out
