"""A real broker registering with real nameservers (``broker_core.broker.controller``)."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson

from broker_core.model.message import MessageInner
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv

from .conftest import cli_server


async def route(client: RemotingClient, namesrv: str, topic: str) -> RemotingCommand:
    return await client.invoke(
        namesrv, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    )


async def test_it_registers_with_every_nameserver_and_unregisters_when_it_stops(tmp_path: Path) -> None:
    async with run_namesrv() as ns1, run_namesrv() as ns2:
        client = RemotingClient()
        try:
            addrs = f"{ns1.address};{ns2.address}"
            async with run_broker(
                tmp_path / "store", addrs, broker_name="broker-q", auto_create_topic_enable=True
            ) as broker:
                for ns in (ns1, ns2):
                    reply = await route(client, ns.address, "TBW102")
                    assert reply.code == ResponseCode.SUCCESS
                    data = orjson.loads(reply.body)
                    assert data["brokerDatas"][0]["brokerAddrs"] == {"0": broker.address}
                    assert data["queueDatas"][0]["perm"] == 7 and data["queueDatas"][0]["writeQueueNums"] == 8
                info = orjson.loads(
                    (
                        await client.invoke(
                            ns1.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
                        )
                    ).body
                )
                assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-q"]}
            for ns in (ns1, ns2):
                assert (await route(client, ns.address, "TBW102")).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()


async def test_it_keeps_auto_creation_off_unless_enabled_and_re_registers_periodically(
    tmp_path: Path,
) -> None:
    async with run_namesrv() as ns:
        client = RemotingClient()
        try:
            async with run_broker(tmp_path / "store", ns.address, register_name_server_period=100) as broker:
                assert (await route(client, ns.address, "TBW102")).code == ResponseCode.TOPIC_NOT_EXIST
                assert (await route(client, ns.address, "SCHEDULE_TOPIC_XXXX")).code == ResponseCode.SUCCESS
                first = ns.routes.broker_live_table[broker.address].last_update_ms
                await asyncio.sleep(0.35)
                assert ns.routes.broker_live_table[broker.address].last_update_ms > first
                assert broker.registration.last_result == {ns.address: "ok"}
        finally:
            await client.close()


async def test_it_writes_its_real_address_as_storehost_even_on_port_zero(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker:
        assert broker.port > 0
        result = broker.store.put_message(MessageInner("Orders", 0, b"hello"))
        assert result.ok
        assert broker.store.view_message_by_id(result.msg_id).store_host == broker.address


async def test_it_survives_a_nameserver_that_is_down(tmp_path: Path) -> None:
    async with run_namesrv() as ns:
        dead = "127.0.0.1:1"  # nothing listens there
        async with run_broker(tmp_path / "store", f"{dead};{ns.address}") as broker:
            assert broker.registration.last_result[ns.address] == "ok"
            assert broker.registration.last_result[dead].startswith("unreachable")


def test_it_starts_from_a_broker_conf_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName = TestCluster\nbrokerName = broker-cli\nbrokerIP1 = 127.0.0.1\nlistenPort = 0\n"
        f"storePathRootDir = {tmp_path / 'store'}\nmappedFileSizeCommitLog = 1048576\n"
        "warmMappedFileEnable = false\nbrokerRoel = SLAVE\n"
    )
    with cli_server("broker", conf) as (proc, _address):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "unknown broker setting 'brokerRoel'" in proc.stderr.read()
        assert not (tmp_path / "store" / "abort").exists(), "the store was not closed cleanly"
        assert (tmp_path / "store" / "config" / "topics.json").exists()
