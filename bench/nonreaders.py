"""Hostile clients against a real nameserver and broker: do the servers protect themselves?

    python bench/nonreaders.py [--connections 100] [--seconds 25] [--quick] [--keep DIR]

Why (issue 14): a client that sends requests and never reads its answers used to grow
the servers without limit (nameserver +376 MB in 32 s, broker +220 MB in 20 s) and slow
every other client's answers to hundreds of ms; partial frames cost up to 15 MiB each with
no overall cap.  This starts a nameserver and a broker (``python -m broker_core``, their
default settings, ASYNC_FLUSH) on free loopback ports, creates a topic of 8 queues, and
measures side by side:

* ``alone``: a well-behaved client alone (a child process on uvloop, our
  RemotingClient) asks the nameserver for the topic's route (GET_ROUTEINFO_BY_TOPIC) and
  the broker for a queue's max offset (GET_MAX_OFFSET), one request at a time, 100 of
  each per second: latency p50/p99/max per server (a request that fails or times out
  after 5 s counts at the time it took, and as an error);
* ``nonreaders``: a child opens ``--connections`` connections to one server and
  pipelines requests on every one as fast as the kernel takes them (route queries to the
  nameserver; max-offset queries and heartbeats to the broker), never reading a byte, for
  ``--seconds``; one second in, the well-behaved client measures again until a second
  before the end.  Figures: its latency, how many bytes the hostile connections got into
  the kernel (they stall once the server stops reading them: the kernel's socket buffers,
  up to 4 MB sent and 32 MB received per connection here, fill first), how many the
  server closed;
* ``partial frames``: a child opens 30 connections to one server and on each sends the
  first 15 MiB of a 15.5 MiB frame, then holds it for a few seconds; the well-behaved
  client measures meanwhile.  Figures: its latency, and how many connections the server
  dropped (its cap on partial frames, default 64 MiB over all connections).

Each attack runs against one server at a time (the nameserver's, then the broker's): the
machine has 2 cores, and a server flooded at full speed takes one, the hostile child much
of the other.  Both servers run all along and the well-behaved client asks both; the table
shows each server's figures from the attacks on it.

Memory is each server's anonymous resident memory (``RssAnon`` in /proc/<pid>/status:
its heap; the broker's mapped commit-log segment is file-backed and left out), sampled
every 0.25 s: before, the peak during each attack, and two seconds after it ends.
Targets: growth under +100 MB, the well-behaved client's p99 under 5 ms.  The children
are this file (``--role hostile SPEC``, ``--role partial SPEC``, ``--role probe SPEC``);
each has a hard timeout.  The last line of output is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from servers import (  # bench/servers.py
    ROOT,
    Server,
    admin,
    create_topic,
    percentile,
    run_script,
    settle,
    start_cluster,
)

from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand, encode

TOPIC = "BenchNonReaders"
QUEUES = 8
PROBE_RATE = 100  # requests per second to each server
PARTIAL_CONNECTIONS = 30
PARTIAL_FRAME = 15 * 1024 * 1024 + 512 * 1024  # declared length: under the 16 MiB frame limit
PARTIAL_SENT = 15 * 1024 * 1024  # bytes of it sent (the rest never comes)
TARGET_GROWTH_MB = 100
TARGET_P99_MS = 5.0


def rss_anon_mb(pid: int) -> float:
    """Anonymous resident memory of ``pid`` in MB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class Sampler:
    """Samples both servers' RssAnon every 0.25 s on a thread; ``peak()`` per server."""

    def __init__(self, servers: dict[str, Server]) -> None:
        self.servers = servers
        self.samples: dict[str, list[float]] = {name: [] for name in servers}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, server in self.servers.items():
                self.samples[name].append(rss_anon_mb(server.proc.pid))
            self._stop.wait(0.25)

    def peak(self, name: str) -> float:
        return max(self.samples[name], default=0.0)


# -- children -------------------------------------------------------------------------------


def frames_for(server: str, index: int) -> bytes:
    """What one hostile connection sends over and over: 64 request frames."""
    out = []
    for n in range(64):
        if server == "nameserver":
            cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
        elif n % 8 == 0:
            body = {"clientID": f"127.0.0.1@nonreader-{index}", "producerDataSet": [], "consumerDataSet": []}
            cmd = RemotingCommand.request(RequestCode.HEART_BEAT, {}, json.dumps(body).encode())
        else:
            fields = {"topic": TOPIC, "queueId": str(n % QUEUES)}
            cmd = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, fields)
        cmd.opaque = n + 1
        out.append(encode(cmd))
    return b"".join(out)


def connect(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.setblocking(False)
    return sock


def role_hostile(spec: dict[str, Any]) -> dict[str, Any]:
    """Pipeline requests on ``connections`` sockets per server for ``seconds``; never read."""
    selector = selectors.DefaultSelector()
    sent = {name: 0 for name in spec["addrs"]}
    closed = {name: 0 for name in spec["addrs"]}
    for name, addr in spec["addrs"].items():
        for i in range(spec["connections"]):
            sock = connect(addr)
            payload = memoryview(frames_for(name, i) * 16)  # ~64-200 KiB per send call
            selector.register(sock, selectors.EVENT_WRITE, [name, payload, 0])
    deadline = time.monotonic() + spec["seconds"]
    last_progress = {name: time.monotonic() for name in spec["addrs"]}
    while time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.1):
            name, payload, pos = key.data
            try:
                n = key.fileobj.send(payload[pos:])  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            except OSError:
                closed[name] += 1
                selector.unregister(key.fileobj)
                key.fileobj.close()  # type: ignore[union-attr]
                continue
            sent[name] += n
            last_progress[name] = time.monotonic()
            key.data[2] = (pos + n) % len(payload)
    now = time.monotonic()
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    return {
        "sent_mb": {name: round(n / 1e6, 1) for name, n in sent.items()},
        "closed_by_server": closed,
        "stalled_for_s": {name: round(now - t, 1) for name, t in last_progress.items()},
    }


def role_partial(spec: dict[str, Any]) -> dict[str, Any]:
    """On ``connections`` sockets per server send most of one big frame, hold, count drops."""
    header = (PARTIAL_FRAME - 4).to_bytes(4, "big") + (16).to_bytes(4, "big")
    chunk = b"x" * (1024 * 1024)
    socks: dict[str, list[socket.socket]] = {name: [] for name in spec["addrs"]}
    dropped = {name: 0 for name in spec["addrs"]}
    for name, addr in spec["addrs"].items():
        for _ in range(spec["connections"]):
            host, port = addr.rsplit(":", 1)
            sock = socket.create_connection((host, int(port)), timeout=5)
            try:
                sock.sendall(header)
                for _ in range(PARTIAL_SENT // len(chunk)):
                    sock.sendall(chunk)
            except OSError:  # dropped while sending (the cap), or the send timed out
                dropped[name] += 1
                sock.close()
                continue
            socks[name].append(sock)
    time.sleep(spec["hold_seconds"])
    for name, held in socks.items():
        for sock in held:
            sock.setblocking(False)
            try:
                if sock.recv(1) == b"":
                    dropped[name] += 1
            except BlockingIOError:
                pass  # still open
            except OSError:
                dropped[name] += 1
            sock.close()
    return {"dropped_by_server": dropped}


def role_probe(spec: dict[str, Any]) -> dict[str, Any]:
    """The well-behaved client: one request at a time to each server, paced; latencies."""
    import uvloop

    from broker_core.remoting.client import RemotingClient

    async def run() -> dict[str, Any]:
        client = RemotingClient()
        lat: dict[str, list[float]] = {"nameserver": [], "broker": []}
        errors = {"nameserver": 0, "broker": 0}
        requests = {
            "nameserver": lambda: RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}
            ),
            "broker": lambda: RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}
            ),
        }
        try:
            for addr in spec["addrs"].values():  # connect first: the figures are answers
                with contextlib.suppress(Exception):
                    await client.connection(addr)
            start = time.perf_counter()
            n = 0
            while time.perf_counter() - start < spec["seconds"]:
                for name, addr in spec["addrs"].items():
                    t0 = time.perf_counter()
                    try:
                        response = await client.invoke(addr, requests[name](), timeout=5)
                        ok = response.code == ResponseCode.SUCCESS
                    except Exception:  # a timeout (5 s) or a refused connection
                        ok = False
                    # A failed request counts too, at the time it took (a timeout: 5 s).
                    lat[name].append((time.perf_counter() - t0) * 1000)
                    errors[name] += not ok
                n += 1
                pause = start + n / PROBE_RATE - time.perf_counter()
                if pause > 0:
                    await asyncio.sleep(pause)
        finally:
            await client.close()
        out: dict[str, Any] = {}
        for name, values in lat.items():
            values.sort()
            out[name] = {
                "requests": len(values),  # errors included
                "errors": errors[name],
                "p50_ms": round(percentile(values, 0.50), 3),
                "p99_ms": round(percentile(values, 0.99), 3),
                "max_ms": round(values[-1], 3) if values else None,
            }
        return out

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run())


ROLES = {"hostile": role_hostile, "partial": role_partial, "probe": role_probe}


# -- the run --------------------------------------------------------------------------------


def child(role: str, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    """Start this file as ``--role role`` (collect it with ``collect``)."""
    return subprocess.Popen(
        [sys.executable, __file__, "--role", role, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def collect(proc: subprocess.Popen[bytes], timeout: float) -> dict[str, Any]:
    """The child's last JSON line, or ``{"failed": why}``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"failed": f"timed out after {timeout:.0f} s"}
    lines = [line for line in out.decode(errors="replace").splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"failed": f"exit {proc.returncode}: {err.decode(errors='replace')[-800:]}"}
    return json.loads(lines[-1])


def wait_routed(ns_addr: str) -> None:
    """Wait (bounded) until the broker has registered the topic with the nameserver."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        response = asyncio.run(admin(ns_addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}))
        if response.code == ResponseCode.SUCCESS:
            return
        time.sleep(0.5)
    raise SystemExit(f"{TOPIC} was never routed by the nameserver")


def probe(addrs: dict[str, str], seconds: float) -> dict[str, Any]:
    """Run the well-behaved client for ``seconds`` in a child process."""
    spec = json.dumps({"addrs": addrs, "seconds": seconds})
    return run_script(Path(__file__), ["--role", "probe", spec], timeout=seconds + 60)


def attack(
    servers: dict[str, Server],
    addrs: dict[str, str],
    target: str,
    role: str,
    spec: dict[str, Any],
    seconds: float,
) -> dict[str, Any]:
    """Run a hostile child against ``target`` for about ``seconds``, the well-behaved client
    measuring both servers in its middle; memory of both, sampled throughout."""
    before = {name: rss_anon_mb(s.proc.pid) for name, s in servers.items()}
    with Sampler(servers) as sampler:
        hostile = child(role, {"addrs": {target: addrs[target]}, **spec})
        time.sleep(1.0)
        latency = probe(addrs, max(1.0, seconds - 2))
        result = collect(hostile, timeout=seconds + 120)
    time.sleep(2.0)
    after = {name: rss_anon_mb(s.proc.pid) for name, s in servers.items()}
    memory = {
        name: {
            "before_mb": round(before[name], 1),
            "peak_mb": round(sampler.peak(name), 1),
            "growth_mb": round(sampler.peak(name) - before[name], 1),
            "after_mb": round(after[name], 1),
        }
        for name in servers
    }
    return {"target": target, "memory": memory, "probe": latency, "hostile": result}


NAMES = ("nameserver", "broker")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=100, help="non-reading connections per server")
    parser.add_argument("--seconds", type=float, default=25.0, help="how long the non-readers send")
    parser.add_argument("--quick", action="store_true", help="10 s, 10 connections, a shorter hold")
    parser.add_argument("--keep", type=Path, help="keep the servers' logs and store in this directory")
    parser.add_argument("--role", choices=sorted(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("spec", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        print(json.dumps(ROLES[args.role](json.loads(args.spec))), flush=True)
        return
    if args.quick:
        args.seconds, args.connections = 10.0, 10
    hold = 3.0 if args.quick else 5.0

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-nonreaders-"))
    work.mkdir(parents=True, exist_ok=True)
    namesrv, broker = start_cluster(work, [])
    servers = {"nameserver": namesrv, "broker": broker}
    addrs = {"nameserver": namesrv.addr, "broker": broker.addr}
    nonreaders: dict[str, dict[str, Any]] = {}
    partial: dict[str, dict[str, Any]] = {}
    try:
        create_topic(broker.addr, TOPIC, QUEUES)
        wait_routed(namesrv.addr)
        settle(broker)
        print(f"nameserver {namesrv.addr}, broker {broker.addr}; code at {ROOT}", flush=True)
        start_mem = {name: round(rss_anon_mb(s.proc.pid), 1) for name, s in servers.items()}
        baseline = probe(addrs, 5.0)
        print(f"alone: {json.dumps(baseline)}", flush=True)
        for name in NAMES:
            spec = {"connections": args.connections, "seconds": args.seconds}
            nonreaders[name] = attack(servers, addrs, name, "hostile", spec, args.seconds)
            print(f"non-readers on the {name}: {json.dumps(nonreaders[name])}", flush=True)
        for name in NAMES:
            spec = {"connections": PARTIAL_CONNECTIONS, "hold_seconds": hold}
            partial[name] = attack(servers, addrs, name, "partial", spec, hold + 6.0)
            print(f"partial frames on the {name}: {json.dumps(partial[name])}", flush=True)
    finally:
        for server in (broker, namesrv):
            server.stop()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)

    report(start_mem, baseline, nonreaders, partial, args)


def _p99(latency: dict[str, Any], name: str) -> float | None:
    return None if "failed" in latency else latency[name]["p99_ms"]


def report(
    start_mem: dict[str, float],
    baseline: dict[str, Any],
    nonreaders: dict[str, dict[str, Any]],
    partial: dict[str, dict[str, Any]],
    args: argparse.Namespace,
) -> None:
    """The table (each server's column from the attacks on it), then one JSON line."""
    print()
    print(
        f"{args.connections} non-reading connections for {args.seconds:g} s, then "
        f"{PARTIAL_CONNECTIONS} connections holding {PARTIAL_SENT >> 20} MiB partial frames, "
        "on each server in turn"
    )
    print(f"{'figure':58} {'nameserver':>14} {'broker':>14}  target")

    def row(label: str, values: list[Any], target: str = "") -> None:
        print(f"{label:58} {values[0]!s:>14} {values[1]!s:>14}  {target}")

    row("RssAnon at start (MB)", [start_mem[n] for n in NAMES])
    phases = (("non-readers", nonreaders), ("partial frames", partial))
    for phase, results in phases:
        row(f"{phase}: peak RssAnon (MB)", [results[n]["memory"][n]["peak_mb"] for n in NAMES])
        growth = [results[n]["memory"][n]["growth_mb"] for n in NAMES]
        row(f"{phase}: growth (MB)", growth, f"< +{TARGET_GROWTH_MB}")
        row(f"{phase}: RssAnon 2 s after (MB)", [results[n]["memory"][n]["after_mb"] for n in NAMES])
    latencies = [("alone", {n: baseline for n in NAMES})]
    latencies += [(phase, {n: results[n]["probe"] for n in NAMES}) for phase, results in phases]
    for phase, by_server in latencies:
        if any("failed" in by_server[n] for n in NAMES):
            row(
                f"well-behaved client, {phase}", ["failed" if "failed" in by_server[n] else "" for n in NAMES]
            )
            continue
        figures = [by_server[n][n] for n in NAMES]
        row(f"well-behaved client, {phase}: p50 (ms)", [f["p50_ms"] for f in figures])
        target = f"< {TARGET_P99_MS:g}" if phase != "alone" else ""
        row(f"well-behaved client, {phase}: p99 (ms)", [f["p99_ms"] for f in figures], target)
        row(
            f"well-behaved client, {phase}: max (ms), errors",
            [f"{f['max_ms']}, {f['errors']}" for f in figures],
        )
    for phase, results in phases:
        ratios = []
        for n in NAMES:
            base, under = _p99(baseline, n), _p99(results[n]["probe"], n)
            ratios.append(f"{under / base:.1f}x" if base and under is not None else "-")
        row(f"p99 {phase} / alone", ratios)
    hostile = [nonreaders[n]["hostile"] for n in NAMES]
    if not any("failed" in h for h in hostile):
        row(
            "non-readers: MB they got into the kernel",
            [h["sent_mb"][n] for h, n in zip(hostile, NAMES, strict=True)],
        )
        row(
            "non-readers: s since their last progress",
            [h["stalled_for_s"][n] for h, n in zip(hostile, NAMES, strict=True)],
        )
        row(
            "non-readers: connections the server closed",
            [h["closed_by_server"][n] for h, n in zip(hostile, NAMES, strict=True)],
        )
    holders = [partial[n]["hostile"] for n in NAMES]
    if not any("failed" in h for h in holders):
        row(
            "partial frames: connections dropped",
            [h["dropped_by_server"][n] for h, n in zip(holders, NAMES, strict=True)],
        )

    def met(n: str) -> bool:
        growth = max(nonreaders[n]["memory"][n]["growth_mb"], partial[n]["memory"][n]["growth_mb"])
        p99 = [_p99(nonreaders[n]["probe"], n), _p99(partial[n]["probe"], n)]
        return growth < TARGET_GROWTH_MB and all(p is not None and p < TARGET_P99_MS for p in p99)

    out = {
        "bench": "nonreaders",
        "connections": args.connections,
        "seconds": args.seconds,
        "partial_connections": PARTIAL_CONNECTIONS,
        "rss_anon_start_mb": start_mem,
        "alone": baseline,
        "nonreaders": nonreaders,
        "partial_frames": partial,
        "targets_met": {n: met(n) for n in NAMES},
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
