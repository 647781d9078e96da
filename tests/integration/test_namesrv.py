"""A real nameserver on a loopback port, driven with raw protocol frames."""

from __future__ import annotations

import asyncio
import signal
import zlib
from pathlib import Path

import orjson

from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_namesrv

from .conftest import cli_server


def register_request(name: str, addr: str, topics: dict[str, int], *, version: int = 1, broker_id: int = 0):
    body = orjson.dumps(
        {
            "filterServerList": [],
            "topicConfigSerializeWrapper": {
                "dataVersion": {"counter": version, "timestamp": 1},
                "topicConfigTable": {
                    t: {"topicName": t, "readQueueNums": q, "writeQueueNums": q, "perm": 6, "topicSysFlag": 0}
                    for t, q in topics.items()
                },
            },
        }
    )
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerName": name,
            "brokerAddr": addr,
            "clusterName": "DefaultCluster",
            "haServerAddr": addr,
            "brokerId": str(broker_id),
            "compressed": "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
        },
        body,
    )


def route_request(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def test_it_serves_routes_from_broker_registrations() -> None:
    async with run_namesrv() as ns:
        client = RemotingClient()
        try:
            reply = await client.invoke(
                ns.address, register_request("broker-a", "127.0.0.1:10911", {"Orders": 4})
            )
            assert reply.code == ResponseCode.SUCCESS
            assert reply.ext_fields == {"haServerAddr": "", "masterAddr": ""}
            route = await client.invoke(ns.address, route_request("Orders"))
            assert route.code == ResponseCode.SUCCESS
            data = orjson.loads(route.body)
            assert data["queueDatas"][0]["writeQueueNums"] == 4
            assert data["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}
            missing = await client.invoke(ns.address, route_request("Nope"))
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST
            assert "Nope" in (missing.remark or "")
            listed = await client.invoke(
                ns.address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
            )
            assert orjson.loads(listed.body) == {"topicList": ["Orders"]}
            info = await client.invoke(
                ns.address, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            )
            assert orjson.loads(info.body)["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
        finally:
            await client.close()


async def test_it_refuses_bad_registrations_clearly_and_keeps_serving() -> None:
    async with run_namesrv() as ns:
        client = RemotingClient()
        try:
            bad_crc = register_request("broker-a", "127.0.0.1:10911", {"Orders": 4})
            bad_crc.ext_fields["bodyCrc32"] = "12345"
            assert (await client.invoke(ns.address, bad_crc)).remark == "crc32 not match"
            no_name = register_request("broker-a", "127.0.0.1:10911", {"Orders": 4})
            del no_name.ext_fields["brokerName"]
            reply = await client.invoke(ns.address, no_name)
            assert reply.code == ResponseCode.SYSTEM_ERROR and "brokerName" in (reply.remark or "")
            garbage = register_request("broker-a", "127.0.0.1:10911", {"Orders": 4})
            garbage.body = b"{not json"
            garbage.ext_fields["bodyCrc32"] = "0"
            assert (await client.invoke(ns.address, garbage)).code == ResponseCode.SYSTEM_ERROR
            unknown = await client.invoke(ns.address, RemotingCommand.request(9999))
            assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            assert (
                await client.invoke(ns.address, route_request("Orders"))
            ).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()


async def test_it_drops_a_broker_that_stops_registering_and_one_whose_connection_closes() -> None:
    async with run_namesrv(scan_not_active_broker_interval=50, broker_channel_expired_time=300) as ns:
        silent, closing, asker = RemotingClient(), RemotingClient(), RemotingClient()
        try:
            await silent.invoke(ns.address, register_request("broker-a", "127.0.0.1:10911", {"A": 4}))
            await closing.invoke(ns.address, register_request("broker-b", "127.0.0.1:10921", {"B": 4}))
            await closing.close()
            await asyncio.sleep(0.1)
            assert (await asker.invoke(ns.address, route_request("B"))).code == ResponseCode.TOPIC_NOT_EXIST
            assert (await asker.invoke(ns.address, route_request("A"))).code == ResponseCode.SUCCESS
            await asyncio.sleep(0.6)
            assert (await asker.invoke(ns.address, route_request("A"))).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await silent.close()
            await asker.close()


async def test_it_runs_side_by_side_with_another_nameserver_sharing_nothing() -> None:
    async with run_namesrv() as first, run_namesrv() as second:
        client = RemotingClient()
        try:
            await client.invoke(first.address, register_request("broker-a", "127.0.0.1:10911", {"Orders": 4}))
            assert (await client.invoke(first.address, route_request("Orders"))).code == ResponseCode.SUCCESS
            assert (
                await client.invoke(second.address, route_request("Orders"))
            ).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()


async def test_it_keeps_kv_config_and_answers_query_data_version() -> None:
    async with run_namesrv() as ns:
        client = RemotingClient()
        try:
            put = RemotingCommand.request(
                RequestCode.PUT_KV_CONFIG,
                {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "broker-a:4"},
            )
            assert (await client.invoke(ns.address, put)).code == ResponseCode.SUCCESS
            get = RemotingCommand.request(
                RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders"}
            )
            assert (await client.invoke(ns.address, get)).ext_fields["value"] == "broker-a:4"
            await client.invoke(ns.address, register_request("broker-a", "127.0.0.1:10911", {"Orders": 4}))
            route = orjson.loads((await client.invoke(ns.address, route_request("Orders"))).body)
            assert route["orderTopicConf"] == "broker-a:4"
            query = RemotingCommand.request(
                RequestCode.QUERY_DATA_VERSION,
                {
                    "brokerName": "broker-a",
                    "brokerAddr": "127.0.0.1:10911",
                    "clusterName": "DefaultCluster",
                    "brokerId": "0",
                },
                orjson.dumps({"counter": 1, "timestamp": 1}),
            )
            assert (await client.invoke(ns.address, query)).ext_fields["changed"] == "false"
            query.body = orjson.dumps({"counter": 2, "timestamp": 1})
            assert (await client.invoke(ns.address, query)).ext_fields["changed"] == "true"
        finally:
            await client.close()


def test_it_starts_from_the_command_line_and_stops_on_sigterm(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text("# a RocketMQ-style file\nlistenPort = 0\nmysteryKey = 1\n")
    with cli_server("namesrv", conf) as (proc, address):

        async def ask() -> int:
            client = RemotingClient()
            try:
                return (await client.invoke(address, route_request("Orders"))).code
            finally:
                await client.close()

        assert asyncio.run(ask()) == ResponseCode.TOPIC_NOT_EXIST
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert "unknown nameserver setting 'mysteryKey'" in proc.stderr.read()
