"""What the benchmarks share: our servers as child processes, child runs, a percentile.

bench/broker.py and bench/peers.py both start a nameserver and a broker (``python -m
broker_core``) on free loopback ports, talk to them over the protocol (create a topic,
read queue ends), wait for the broker to go quiet between phases, and run parts of
themselves as child processes that print one JSON line.  Those helpers live here so both
benchmarks start Quiver the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from broker_core.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from broker_core.remoting.command import RemotingCommand  # noqa: E402


def machine_probe() -> dict[str, float]:
    """How fast this machine is right now: Python and memory, each the best of three.

    ``python_loop_ms``: a 1 M-iteration pure-Python loop (it fits in the caches);
    ``memory_copy_gbps``: copying 64 MiB between two buffers already faulted in.  The VMs
    here change from day to day (on 2026-11-27 the loop took 48-280 ms and the copy ran
    at 0.8-1 GB/s, while our broker's request path cost three times the CPU it did the
    day before), and a Python-bound figure with a large footprint moves with them while a
    C peer's (Redis, the echo) barely does; the probe says which kind of day a run's
    ratios come from.
    """
    loop = copy = float("inf")
    source = bytes(64 << 20)
    target = bytearray(len(source))
    target[:] = source
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i
        loop = min(loop, time.perf_counter() - started)
        started = time.perf_counter()
        target[:] = source
        copy = min(copy, time.perf_counter() - started)
    return {"python_loop_ms": round(loop * 1000, 1), "memory_copy_gbps": round(len(source) / copy / 1e9, 2)}


def describe_probe(probe: dict[str, float]) -> str:
    """The probe in words, for a benchmark's header line."""
    return (
        f"machine probe: a 1 M-iteration Python loop {probe['python_loop_ms']} ms, "
        f"memory copy {probe['memory_copy_gbps']} GB/s"
    )


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The value at ``fraction`` of a sorted list (0 for an empty one)."""
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


# -- server processes -----------------------------------------------------------------------


@dataclass
class Server:
    """A server child process and the address it printed."""

    proc: subprocess.Popen[bytes]
    addr: str
    name: str

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start_server(
    cmd: list[str], name: str, log_path: Path, timeout: float = 30.0, *, new_session: bool = False
) -> Server:
    """Start ``cmd``; wait (bounded) for its ``listening on HOST:PORT`` line.

    ``new_session``: the child leads a process group of its own (``os.killpg(pid, ...)``
    stops it and anything it started; a Ctrl-C in the terminal no longer reaches it).
    """
    log = log_path.open("wb")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=log, cwd=log_path.parent, start_new_session=new_session
    )
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or []], daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2).decode(errors="replace").strip()
        except queue.Empty:
            if proc.poll() is not None:
                break
            continue
        if line.startswith("listening on "):
            return Server(proc, line.removeprefix("listening on ").strip(), name)
    proc.kill()
    raise SystemExit(f"{name} did not start: see {log_path}")


def start_cluster(
    work: Path, broker_prefix: list[str], flush: str = "ASYNC_FLUSH", extra: dict[str, str] | None = None
) -> tuple[Server, Server]:
    """A nameserver and a broker (``flush``: ASYNC_FLUSH or SYNC_FLUSH; ``extra`` more
    broker.conf settings), each its own ``python -m broker_core`` process on a free port
    of 127.0.0.1, storing under ``work``."""
    (work / "namesrv.conf").write_text("listenPort = 0\n")
    namesrv = start_server(
        [sys.executable, "-m", "broker_core", "namesrv", "-c", str(work / "namesrv.conf")],
        "nameserver",
        work / "namesrv.log",
    )
    conf = {
        "brokerClusterName": "BenchCluster",
        "brokerName": "bench-broker",
        "brokerId": "0",
        "brokerIP1": "127.0.0.1",
        "listenPort": "0",
        "namesrvAddr": namesrv.addr,
        "storePathRootDir": str(work / "store"),
        "flushDiskType": flush,
        "autoCreateTopicEnable": "false",
        "aclEnable": "false",
        # standaloneMaintenance left at its default (auto): no platform here, so the broker
        # runs its own delay scan, offset persistence and expiry, as a broker started alone
        # does; none of these benches needs a broker that runs maintenance only on request.
        **(extra or {}),
    }
    (work / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    broker = start_server(
        [*broker_prefix, sys.executable, "-m", "broker_core", "broker", "-c", str(work / "broker.conf")],
        "broker",
        work / "broker.log",
        timeout=60.0,
    )
    return namesrv, broker


# -- requests over the protocol -------------------------------------------------------------


async def admin_request(addr: str, code: int, fields: dict[str, str]) -> RemotingCommand:
    """One request over the protocol (topic creation, offset queries)."""
    from broker_core.remoting.client import RemotingClient

    client = RemotingClient()
    try:
        return await client.invoke(addr, RemotingCommand.request(code, fields), timeout=10.0)
    finally:
        await client.close()


def create_topic(addr: str, topic: str, queues: int, attributes: str = "") -> None:
    """UPDATE_AND_CREATE_TOPIC (17) with ``queues`` read and write queues; ``attributes`` as
    RocketMQ 5 writes them (``+message.type=DELAY``), none when empty."""
    fields = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6"}
    if attributes:
        fields["attributes"] = attributes
    response = asyncio.run(admin_request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields))
    if response.code != ResponseCode.SUCCESS:
        raise SystemExit(f"cannot create {topic}: {response.remark}")


def runtime_table(addr: str) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO (28): the broker's runtime figures (``fsyncCount``, ...)."""
    response = asyncio.run(admin_request(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    if response.code != ResponseCode.SUCCESS or not response.body:
        raise SystemExit(f"no runtime info from {addr}: {response.remark}")
    table: dict[str, str] = json.loads(response.body)["table"]
    return table


def max_offsets(addr: str, topic: str, queues: int) -> list[int]:
    """GET_MAX_OFFSET (30) of each of the ``queues`` queues of ``topic``."""

    async def query() -> list[int]:
        out = []
        for q in range(queues):
            r = await admin_request(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(q)})
            out.append(int(r.ext_fields.get("offset", "0")))
        return out

    return asyncio.run(query())


# -- between phases ---------------------------------------------------------------------------


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its children (a profiler may wrap the broker)."""
    total = 0.0
    pids = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        pids += [int(child) for child in children.read_text().split()]
    for each in pids:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def settle(server: Server, timeout: float = 30.0, busy: float = 0.1) -> float:
    """Wait (bounded) until the broker uses under ``busy`` of a core; return the seconds waited.

    After start-up and between phases the broker has work of its own: warming its next
    commit-log segment (seconds of kernel time per GiB on this VM), dispatching, flushing.
    Starting the next load only once that is done makes the phases comparable from run to
    run, as bench/store.py's warm-up does for the store.
    """
    if not Path(f"/proc/{server.proc.pid}/stat").exists():
        time.sleep(2.0)
        return 2.0
    started = time.monotonic()
    interval = 0.5
    last = process_cpu_seconds(server.proc.pid)
    while time.monotonic() - started < timeout:
        time.sleep(interval)
        now = process_cpu_seconds(server.proc.pid)
        if now - last < busy * interval:
            break
        last = now
    return time.monotonic() - started


# -- child runs -------------------------------------------------------------------------------


def run_script(
    script: Path, args: list[str], timeout: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run ``script`` with this interpreter and a hard timeout; return its last JSON line.

    A child that times out, exits non-zero or prints no JSON gives ``{"failed": why}``.
    """
    try:
        done = subprocess.run(
            [sys.executable, str(script), *args],
            capture_output=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {timeout:.0f} s"}
    lines = [line for line in done.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"failed": f"exit {done.returncode}: {done.stderr.decode(errors='replace')[-800:]}"}
    return json.loads(lines[-1])
