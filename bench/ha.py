"""Replication benchmark: what a slave costs a master, and how fast a slave follows, in one run.

    python bench/ha.py [--quick]

Every broker is its own ``python -m broker_core broker`` process with default settings
(1 GiB segments, ASYNC_FLUSH, haTransferBatchSize and the rest as shipped), beside one
nameserver process; the load runs in this process over the remoting protocol (1 KiB bodies
with a tag and a UNIQ_KEY, as the official client sends).  Three broker sets are measured
side by side, each fresh:

* a lone ``ASYNC_MASTER`` (no slave: the ceiling);
* an ``ASYNC_MASTER`` with a slave (acknowledged at once, the slave follows);
* a ``SYNC_MASTER`` with a slave (acknowledged once the slave holds the message).

For each: one-at-a-time sync sends on one connection (msgs/s, latency p50/p99) and batched
sends (batches of 32, 4 connections with 4 batches outstanding on each, msgs/s).

Then, on the ``ASYNC_MASTER`` set: slave lag under a sustained batched load paced at 50,000
msgs/s (the master's HA status sampled every 100 ms: bytes and time behind), and catch-up:
the master is filled to 1 GiB (``--quick``: 128 MiB), a new slave joins, and the time until
it holds the whole log gives MB/s.

Targets (issue 17): SYNC_MASTER batched >= 60 % of ASYNC_MASTER's; a sync send to
SYNC_MASTER adds <= 0.3 ms at p50 over ASYNC_MASTER; catch-up >= 300 MB/s; under the 50 k
load the slave stays within 1 s of the master.  The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's broker_core, before any installed one

from servers import Server, admin_request, percentile, settle, start_server  # noqa: E402

from broker_core.client.admin import AdminClient  # noqa: E402
from broker_core.model.message import encode_batch, encode_properties  # noqa: E402
from broker_core.remoting.client import RemotingClient  # noqa: E402
from broker_core.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from broker_core.remoting.command import RemotingCommand  # noqa: E402
from broker_core.remoting.headers import SendMessageRequestHeader  # noqa: E402

TOPIC = "HaBench"
QUEUES = 8
BODY = b"x" * 1024
BATCH = 32
SET = "bench-set"


def broker_conf(work: Path, name: str, namesrv: str, role: str, broker_id: int) -> Path:
    conf = {
        "brokerClusterName": "HaCluster",
        "brokerName": SET,
        "brokerId": str(broker_id),
        "brokerRole": role,
        "brokerIP1": "127.0.0.1",
        "listenPort": "0",
        "namesrvAddr": namesrv,
        "storePathRootDir": str(work / name),
    }
    path = work / f"{name}.conf"
    path.write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    return path


def start(work: Path, name: str, conf: Path) -> Server:
    cmd = [sys.executable, "-m", "broker_core", "broker" if name != "namesrv" else "namesrv", "-c", str(conf)]
    return start_server(cmd, name, work / f"{name}.log", timeout=90.0)


def start_namesrv(work: Path) -> Server:
    conf = work / "namesrv.conf"
    conf.write_text("listenPort = 0\n")
    return start(work, "namesrv", conf)


async def create_topic(addr: str) -> None:
    fields = {"topic": TOPIC, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES), "perm": "6"}
    response = await admin_request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    if response.code != ResponseCode.SUCCESS:
        raise SystemExit(f"cannot create {TOPIC}: {response.remark}")


# -- load -----------------------------------------------------------------------------------------


def single_request(queue_id: int, n: int) -> RemotingCommand:
    props = encode_properties({"TAGS": "T", "UNIQ_KEY": f"HA{n:030d}"}).decode()
    header = SendMessageRequestHeader("ha-bench", TOPIC, queue_id=queue_id, properties=props)
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_fields(), BODY)


def batch_request(queue_id: int, n: int) -> RemotingCommand:
    items = [(BODY, {"TAGS": "T", "UNIQ_KEY": f"HB{n:024d}{i:06d}"}, 0) for i in range(BATCH)]
    header = SendMessageRequestHeader("ha-bench", TOPIC, queue_id=queue_id, batch=True)
    return RemotingCommand.request(RequestCode.SEND_BATCH_MESSAGE, header.to_v2_fields(), encode_batch(items))


async def sync_sends(addr: str, seconds: float) -> dict[str, float]:
    """One connection, one send at a time: msgs/s and latency."""
    client = RemotingClient()
    latencies: list[float] = []
    try:
        for i in range(200):  # warm-up
            await client.invoke(addr, single_request(i % QUEUES, i), 5)
        deadline = time.perf_counter() + seconds
        n = 0
        started = time.perf_counter()
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            reply = await client.invoke(addr, single_request(n % QUEUES, n), 5)
            latencies.append(time.perf_counter() - t0)
            if reply.code != ResponseCode.SUCCESS:
                raise SystemExit(f"send refused: {reply.code} {reply.remark}")
            n += 1
        elapsed = time.perf_counter() - started
    finally:
        await client.close()
    latencies.sort()
    return {
        "msgs_s": round(n / elapsed),
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


async def batched_sends(addr: str, seconds: float, connections: int = 4, window: int = 4) -> int:
    """Batches of 32 pipelined: msgs/s."""
    clients = [RemotingClient() for _ in range(connections)]
    sent = 0
    deadline = time.perf_counter() + seconds

    async def lane(client: RemotingClient, lane_id: int) -> None:
        nonlocal sent
        n = 0
        while time.perf_counter() < deadline:
            reply = await client.invoke(addr, batch_request((lane_id + n) % QUEUES, lane_id * 10**9 + n), 10)
            if reply.code != ResponseCode.SUCCESS:
                raise SystemExit(f"batch refused: {reply.code} {reply.remark}")
            sent += BATCH
            n += 1

    try:
        started = time.perf_counter()
        await asyncio.gather(*(lane(c, i * window + w) for i, c in enumerate(clients) for w in range(window)))
        elapsed = time.perf_counter() - started
    finally:
        for client in clients:
            await client.close()
    return round(sent / elapsed)


async def paced_batches(addr: str, rate: int, seconds: float, on_tick: Any) -> int:
    """Batches of 32 at ``rate`` msgs/s (4 connections); ``on_tick()`` every 100 ms."""
    clients = [RemotingClient() for _ in range(4)]
    interval = BATCH / rate
    sent = 0
    started = time.perf_counter()
    tasks: set[asyncio.Task[Any]] = set()
    n = 0
    next_tick = started
    try:
        while (now := time.perf_counter()) - started < seconds:
            due = started + n * interval
            if now < due:
                await asyncio.sleep(min(due - now, 0.002))
                continue
            task = asyncio.create_task(clients[n % 4].invoke(addr, batch_request(n % QUEUES, n), 10))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            sent += BATCH
            n += 1
            if now >= next_tick:
                next_tick = now + 0.1
                asyncio.create_task(on_tick())
        await asyncio.gather(*tasks)
    finally:
        for client in clients:
            await client.close()
    return round(sent / (time.perf_counter() - started))


# -- broker sets ----------------------------------------------------------------------------------


async def wait_slaves(admin: AdminClient, master: str, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len((await admin.ha_status(master)).slaves) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"{count} slave(s) did not connect to {master}")
        await asyncio.sleep(0.1)


async def wait_caught_up(admin: AdminClient, master: str, timeout: float = 600) -> float:
    """Seconds until every slave holds the master's whole log."""
    started = time.monotonic()
    while True:
        status = await admin.ha_status(master)
        if status.slaves and all(s.behind_bytes == 0 for s in status.slaves):
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise SystemExit("the slave did not catch up")
        await asyncio.sleep(0.02)


async def measure_set(work: Path, label: str, role: str, slave: bool, seconds: float) -> dict[str, Any]:
    work.mkdir(parents=True)
    namesrv = start_namesrv(work)
    servers = [namesrv]
    try:
        master = start(work, "master", broker_conf(work, "master", namesrv.addr, role, 0))
        servers.append(master)
        await create_topic(master.addr)
        async with AdminClient([namesrv.addr]) as admin:
            if slave:
                servers.append(start(work, "slave", broker_conf(work, "slave", namesrv.addr, "SLAVE", 1)))
                await wait_slaves(admin, master.addr, 1)
            settle(master)
            single = await sync_sends(master.addr, seconds)
            settle(master)
            batched = await batched_sends(master.addr, seconds)
            if slave:
                await wait_caught_up(admin, master.addr)
        figures = {"sync": single, "batched_msgs_s": batched}
        print(
            f"{label:<22} sync {single['msgs_s']:>7,} msgs/s  p50 {single['p50_ms']:.3f} ms  "
            f"p99 {single['p99_ms']:.3f} ms   batched {batched:>9,} msgs/s",
            flush=True,
        )
        return figures
    finally:
        for server in reversed(servers):
            server.stop()


async def measure_follow(work: Path, fill_bytes: int, load_seconds: float) -> dict[str, Any]:
    """Slave lag under 50 k msgs/s, then a new slave catching up with ``fill_bytes``."""
    work.mkdir(parents=True)
    namesrv = start_namesrv(work)
    servers = [namesrv]
    try:
        master = start(work, "master", broker_conf(work, "master", namesrv.addr, "ASYNC_MASTER", 0))
        servers.append(master)
        await create_topic(master.addr)
        async with AdminClient([namesrv.addr]) as admin:
            servers.append(start(work, "slave", broker_conf(work, "slave", namesrv.addr, "SLAVE", 1)))
            await wait_slaves(admin, master.addr, 1)
            settle(master)
            behind_ms: list[int] = []
            behind_bytes: list[int] = []

            async def sample() -> None:
                status = await admin.ha_status(master.addr)
                if status.slaves:
                    behind_ms.append(status.slaves[0].behind_ms)
                    behind_bytes.append(status.slaves[0].behind_bytes)

            achieved = await paced_batches(master.addr, 50_000, load_seconds, sample)
            await wait_caught_up(admin, master.addr)
            behind_ms.sort()
            lag = {
                "achieved_msgs_s": achieved,
                "behind_ms_p50": percentile([float(v) for v in behind_ms], 0.5),
                "behind_ms_p99": percentile([float(v) for v in behind_ms], 0.99),
                "behind_ms_max": max(behind_ms, default=0),
                "behind_bytes_max": max(behind_bytes, default=0),
                "samples": len(behind_ms),
            }
            print(
                f"slave lag at 50k msgs/s  achieved {achieved:,} msgs/s  "
                f"behind p50 {lag['behind_ms_p50']:.0f} ms  p99 {lag['behind_ms_p99']:.0f} ms  "
                f"max {lag['behind_ms_max']} ms  max {lag['behind_bytes_max'] / 2**20:.1f} MiB",
                flush=True,
            )
            # Fill the master, then a second slave joins and copies all of it.
            while (await admin.ha_status(master.addr)).max_offset < fill_bytes:
                await batched_sends(master.addr, 2.0)
            await wait_caught_up(admin, master.addr)
            total = (await admin.ha_status(master.addr)).max_offset
            settle(master)
            started = time.monotonic()
            servers.append(start(work, "late", broker_conf(work, "late", namesrv.addr, "SLAVE", 2)))
            # From the moment its link shows (what it held then is what the first 20 ms moved).
            while True:
                links = (await admin.ha_status(master.addr)).slaves
                if len(links) == 2:
                    break
                await asyncio.sleep(0.02)
            linked = time.monotonic()
            held = min(s.acked_offset for s in links)
            await wait_caught_up(admin, master.addr)
            done = time.monotonic()
            catch_up = {
                "bytes": total,
                "seconds_from_start": round(done - started, 2),
                "seconds_from_link": round(done - linked, 2),
                "mb_s": round((total - held) / 2**20 / (done - linked), 1),
                "mb_s_from_start": round(total / 2**20 / (done - started), 1),
            }
            print(
                f"catch-up of a new slave  {total / 2**20:,.0f} MiB: {catch_up['mb_s']} MB/s over the link "
                f"({done - linked:.1f} s); {catch_up['mb_s_from_start']} MB/s from its process start "
                f"({done - started:.1f} s)",
                flush=True,
            )
        return {"lag": lag, "catch_up": catch_up}
    finally:
        for server in reversed(servers):
            server.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows, 128 MiB catch-up")
    parser.add_argument("--keep", action="store_true", help="keep the stores (under /tmp)")
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 5.0
    root = Path(tempfile.mkdtemp(prefix="ha-bench-"))
    try:
        lone = await measure_set(root / "lone", "ASYNC_MASTER alone", "ASYNC_MASTER", False, seconds)
        asyn = await measure_set(root / "async", "ASYNC_MASTER + slave", "ASYNC_MASTER", True, seconds)
        sync = await measure_set(root / "sync", "SYNC_MASTER + slave", "SYNC_MASTER", True, seconds)
        follow = await measure_follow(
            root / "follow", (128 if args.quick else 1024) * 2**20, 5.0 if args.quick else 10.0
        )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    ratio = round(sync["batched_msgs_s"] / asyn["batched_msgs_s"], 3)
    added = round(sync["sync"]["p50_ms"] - asyn["sync"]["p50_ms"], 3)
    print()
    print(f"SYNC_MASTER batched / ASYNC_MASTER batched: {ratio:.2f} (target >= 0.60)")
    print(f"SYNC_MASTER sync send p50 over ASYNC_MASTER's: +{added:.3f} ms (target <= 0.3 ms)")
    print(f"catch-up: {follow['catch_up']['mb_s']} MB/s (target >= 300)")
    print(f"slave behind under 50k msgs/s: max {follow['lag']['behind_ms_max']} ms (target <= 1000 ms)")
    result = {
        "bench": "ha",
        "quick": args.quick,
        "cpus": os.cpu_count(),
        "lone": lone,
        "async_master": asyn,
        "sync_master": sync,
        "sync_over_async_batched": ratio,
        "sync_added_p50_ms": added,
        **follow,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
