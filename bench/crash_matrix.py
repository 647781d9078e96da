"""Kill -9 matrix: no acknowledged message may be lost when the broker is SIGKILLed.

    .venv/bin/python bench/crash_matrix.py [--runs 5] [--modes SYNC_FLUSH,ASYNC_FLUSH]
                                           [--clients ours,official] [--seed N]
                                           [--after-kill 1.0] [--no-store-check] [--keep DIR]

Why (issue 14): "The kill -9 matrix (SYNC/ASYNC, our client and the official one, 5 runs
each) stays at 0 acknowledged lost."  This runs that matrix and counts.

Each run, for one flushDiskType and one client:

1. a nameserver and a broker, each ``python -m broker_core`` in its own process (and
   process group) on loopback ports chosen at run time, the broker on a fresh store in a
   temp dir (``flushDiskType`` as the cell says, ``autoCreateTopicEnable = true``, default
   geometry); the topic (4 queues) is created over the protocol and the bench waits
   until the nameserver routes it;
2. a producer child process sends one message at a time, synchronously, each with its own
   key and body, and prints one JSON line per send as soon as it returns (status, msgId,
   offsetMsgId or queue offset, key, body; or the error): *ours* is
   ``broker_core.client``'s ``Producer.send``, *official* is the C++ client
   (``rocketmq==0.4.4``, ``Producer.send_sync``) with HOME in a temp dir for its logs;
3. a random 0.5-2 s after the first acknowledgement the broker's process group gets
   SIGKILL mid-stream; the producer goes on for ``--after-kill`` s (its sends now fail,
   as expected), then it is SIGKILLed too.  Every line it printed with status SEND_OK is
   an acknowledged message (the few read after the kill are answers the broker sent
   before it died: they count too);
4. the broker restarts on the same store and port (``restart`` = from the new process to
   its ``listening on`` line: the store's crash recovery is inside it; its log line
   "store recovered ... (unclean stop)" is checked), then our ``PullConsumer`` reads every
   queue of the topic from offset 0 to its end.  *lost* = acknowledged bodies that are
   not there; *dup* = bodies stored more than once; *moved* (our client only, which
   knows each message's queue) = an acknowledged message not at the queue and offset its
   acknowledgement named; *unacked kept* = bodies stored whose send never came back OK
   (in flight at the kill: allowed).  After the broker's clean stop, ``python -m
   broker_core store check`` reports on the store (``--no-store-check`` skips it).

A table per cell (runs, acknowledged, lost, dup, restart p50 ...), then one JSON line with
every run's figures.  Every child process is stopped (its whole group) however the bench
ends.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from servers import ROOT, Server, admin, create_topic, percentile, start_server  # bench/servers.py

MODES = ("SYNC_FLUSH", "ASYNC_FLUSH")
CLIENTS = ("ours", "official")
TOPIC = "CrashMatrix"
QUEUES = 4
SEND_OK = "SEND_OK"
RECOVERED = re.compile(r"store recovered: .* in ([0-9.]+)s \((clean|unclean) stop\)")

_GROUPS: list[subprocess.Popen[Any]] = []


# -- the producer children -----------------------------------------------------------------------


_print_lock = threading.Lock()


def emit(line: dict[str, Any]) -> None:
    with _print_lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def child_ours(namesrv: str, topic: str, prefix: str) -> None:
    """Our producer: one synchronous send at a time until killed."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    producer = Producer(f"CrashMatrixOurs{os.getpid()}", namesrv).start()
    i = 0
    while True:
        key, body = f"key-{prefix}-{i}", f"{prefix}-{i}"
        try:
            result = producer.send(Message(topic, body.encode(), keys=key))
        except Exception as exc:  # noqa: BLE001 - after the kill every send fails
            emit({"i": i, "error": f"{type(exc).__name__}: {str(exc)[:200]}", "key": key, "body": body})
            time.sleep(0.05)
        else:
            emit(
                {
                    "i": i,
                    "status": result.status.name,
                    "msgId": result.msg_id,
                    "offsetMsgId": result.offset_msg_id,
                    "queue": result.queue.queue_id,
                    "offset": result.queue_offset,
                    "key": key,
                    "body": body,
                }
            )
        i += 1


def child_official(namesrv: str, topic: str, prefix: str) -> None:
    """The official C++ client (rocketmq==0.4.4): ``send_sync`` one at a time until killed."""
    from rocketmq.client import Message, Producer, SendStatus

    producer = Producer(f"CrashMatrixOfficial{os.getpid()}")
    producer.set_namesrv_addr(namesrv)
    producer.start()
    i = 0
    while True:
        key, body = f"key-{prefix}-{i}", f"{prefix}-{i}"
        msg = Message(topic)
        msg.set_keys(key)
        msg.set_body(body.encode())
        try:
            result = producer.send_sync(msg)
        except Exception as exc:  # noqa: BLE001 - after the kill every send fails
            emit({"i": i, "error": f"{type(exc).__name__}: {str(exc)[:200]}", "key": key, "body": body})
            time.sleep(0.05)
        else:
            status = SEND_OK if result.status == SendStatus.OK else SendStatus(result.status).name
            emit(
                {
                    "i": i,
                    "status": status,
                    "msgId": result.msg_id,
                    "offset": result.offset,
                    "key": key,
                    "body": body,
                }
            )
        i += 1


# -- processes ----------------------------------------------------------------------------------


def kill_group(proc: subprocess.Popen[Any], sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def stop_group(proc: subprocess.Popen[Any], timeout: float = 15.0) -> None:
    """SIGINT (a clean stop), then SIGKILL whatever is left of the group."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout)
    kill_group(proc)


def _stop_all() -> None:
    while _GROUPS:
        kill_group(_GROUPS.pop())


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(cmd: list[str], name: str, log: Path) -> tuple[Server, float]:
    """A server in its own process group; the seconds until it listened."""
    started = time.monotonic()
    server = start_server(cmd, name, log, timeout=60.0, new_session=True)
    _GROUPS.append(server.proc)
    return server, time.monotonic() - started


def wait_route(namesrv: str, broker_addr: str, timeout: float = 20.0) -> bool:
    """Until the nameserver routes TOPIC to ``broker_addr``."""
    from broker_core.remoting.codes import RequestCode, ResponseCode

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            r = asyncio.run(admin(namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}))
            if r.code == ResponseCode.SUCCESS and broker_addr.encode() in (r.body or b""):
                return True
        time.sleep(0.1)
    return False


class ProducerChild:
    """A producer child process; its JSON lines, each with the monotonic time it was read."""

    def __init__(self, client: str, namesrv: str, prefix: str, work: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if client == "official":
            home = work / "home"
            home.mkdir()
            env["HOME"] = str(home)  # the C++ client logs under $HOME/logs
        self.lines: list[tuple[float, dict[str, Any]]] = []
        self.first_ok = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", client, namesrv, TOPIC, prefix],
            stdout=subprocess.PIPE,
            stderr=(work / "producer.log").open("wb"),
            env=env,
            start_new_session=True,
        )
        _GROUPS.append(self.proc)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout or []:
            with contextlib.suppress(ValueError):
                line = json.loads(raw)
                self.lines.append((time.monotonic(), line))
                if line.get("status") == SEND_OK:
                    self.first_ok.set()

    def kill(self) -> None:
        kill_group(self.proc)
        _GROUPS.remove(self.proc)
        self.reader.join(10)


# -- reading the topic back --------------------------------------------------------------------


def read_topic(namesrv: str, group: str) -> tuple[list[tuple[int, int, str]], list[int]]:
    """Every message of every queue of TOPIC from offset 0: (queue, offset, body); the
    queues' min offsets."""
    from broker_core.client.consumer.pull import PullConsumer, PullStatus

    consumer = PullConsumer(group, namesrv).start()
    found: list[tuple[int, int, str]] = []
    mins: list[int] = []
    try:
        for mq in consumer.fetch_queues(TOPIC):
            mins.append(consumer.min_offset(mq))
            offset = 0
            while True:
                result = consumer.pull(mq, "*", offset, 32)
                if result.status == PullStatus.FOUND:
                    found += [
                        (mq.queue_id, m.queue_offset, m.body.decode(errors="replace"))
                        for m in result.messages
                    ]
                elif result.status != PullStatus.OFFSET_ILLEGAL or result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
    finally:
        consumer.shutdown()
    return found, mins


# -- one run -------------------------------------------------------------------------------------


def one_run(
    mode: str, client: str, index: int, base: Path, rng: random.Random, args: argparse.Namespace
) -> dict[str, Any]:
    work = base / f"{mode}-{client}-{index}"
    work.mkdir(parents=True)
    out: dict[str, Any] = {"mode": mode, "client": client, "run": index}
    (work / "namesrv.conf").write_text("listenPort = 0\n")
    namesrv, _ = start(
        [sys.executable, "-m", "broker_core", "namesrv", "-c", str(work / "namesrv.conf")],
        "nameserver",
        work / "namesrv.log",
    )
    port = free_port()
    conf = {
        "brokerClusterName": "CrashCluster",
        "brokerName": "crash-broker",
        "brokerId": "0",
        "brokerIP1": "127.0.0.1",
        "listenPort": str(port),
        "namesrvAddr": namesrv.addr,
        "storePathRootDir": str(work / "store"),
        "flushDiskType": mode,
        "autoCreateTopicEnable": "true",
        "aclEnable": "false",
    }
    (work / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    broker_cmd = [sys.executable, "-m", "broker_core", "-v", "broker", "-c", str(work / "broker.conf")]
    broker, started_s = start(broker_cmd, "broker", work / "broker.log")
    out["start_s"] = round(started_s, 3)
    try:
        create_topic(broker.addr, TOPIC, QUEUES)
        if not wait_route(namesrv.addr, broker.addr):
            raise SystemExit(f"{mode}/{client}/{index}: the nameserver never routed {TOPIC}")

        producer = ProducerChild(client, namesrv.addr, f"{mode[0]}{client[0]}{index}", work)
        if not producer.first_ok.wait(30):
            producer.kill()
            raise SystemExit(f"{mode}/{client}/{index}: no acknowledgement in 30 s: see {work}/producer.log")
        first_ok = time.monotonic()
        out["kill_after_s"] = round(rng.uniform(0.5, 2.0), 3)
        time.sleep(max(0.0, first_ok + out["kill_after_s"] - time.monotonic()))
        killed_at = time.monotonic()
        kill_group(broker.proc)  # SIGKILL, mid-stream
        _GROUPS.remove(broker.proc)
        time.sleep(args.after_kill)
        producer.kill()

        acked = [line for _, line in producer.lines if line.get("status") == SEND_OK]
        out["sends"] = len(producer.lines)
        out["acknowledged"] = len(acked)
        out["acked_after_kill"] = sum(
            1 for t, line in producer.lines if t > killed_at and line.get("status") == SEND_OK
        )
        out["other_status"] = sum(
            1 for _, line in producer.lines if line.get("status") not in (None, SEND_OK)
        )
        out["errors"] = sum(1 for _, line in producer.lines if "error" in line)
        out["first_error"] = next((line["error"] for _, line in producer.lines if "error" in line), None)

        # Restart on the same store and port.
        broker, restart_s = start(broker_cmd, "broker", work / "broker-restart.log")
        out["restart_s"] = round(restart_s, 3)
        recovered = RECOVERED.search((work / "broker-restart.log").read_text(errors="replace"))
        out["recovery"] = recovered.group(2) if recovered else "not logged"
        out["recovery_s"] = float(recovered.group(1)) if recovered else None
        if not wait_route(namesrv.addr, broker.addr):
            out["route_after_restart"] = False
        stored, mins = read_topic(namesrv.addr, f"CrashMatrixCheck{index}")
        bodies = Counter(body for _, _, body in stored)
        at = {(q, off): body for q, off, body in stored}
        lost = [line for line in acked if line["body"] not in bodies]
        acked_bodies = {line["body"] for line in acked}
        out["stored"] = len(stored)
        out["lost"] = len(lost)
        out["dup"] = sum(n - 1 for n in bodies.values() if n > 1)
        out["moved"] = sum(
            1 for line in acked if "queue" in line and at.get((line["queue"], line["offset"])) != line["body"]
        )
        out["unacked_kept"] = sum(1 for body in bodies if body not in acked_bodies)
        out["min_offsets"] = mins
        if lost:
            out["lost_examples"] = lost[:10]
        stop_group(broker.proc)
        _GROUPS.remove(broker.proc)
        if args.store_check:
            check = subprocess.run(
                [sys.executable, "-m", "broker_core", "store", "check", "--store", str(work / "store")],
                capture_output=True,
                timeout=300,
                check=False,
            )
            out["store_check"] = "ok" if check.returncode == 0 else "problems"
            (work / "store-check.txt").write_bytes(check.stdout + check.stderr)
    finally:
        for proc in (broker.proc, namesrv.proc):
            stop_group(proc, timeout=5)
            with contextlib.suppress(ValueError):
                _GROUPS.remove(proc)
    if not args.keep and not out.get("lost") and out.get("store_check", "ok") == "ok":
        shutil.rmtree(work, ignore_errors=True)
    else:
        out["kept"] = str(work)
    return out


# -- the matrix ----------------------------------------------------------------------------------


def table(results: list[dict[str, Any]], modes: list[str], clients: list[str]) -> list[str]:
    head = (
        f"{'mode':<12} {'client':<9} {'runs':>4} {'acked':>7} {'lost':>5} {'dup':>4} {'moved':>5} "
        f"{'unacked kept':>12} {'acked/run':>14} {'restart p50':>11} {'max':>6} {'recovery p50':>12} "
        f"{'unclean':>7} {'store check':>11}"
    )
    rows = [head, "-" * len(head)]
    for mode in modes:
        for client in clients:
            cell = [r for r in results if r["mode"] == mode and r["client"] == client]
            if not cell:
                continue
            restart = sorted(r["restart_s"] for r in cell)
            recovery = sorted(r["recovery_s"] for r in cell if r.get("recovery_s") is not None)
            per_run = sorted(r["acknowledged"] for r in cell)
            checks = [r["store_check"] for r in cell if "store_check" in r]
            checked = f"{checks.count('ok')}/{len(checks)} ok" if checks else "-"
            rows.append(
                f"{mode:<12} {client:<9} {len(cell):>4} {sum(per_run):>7} "
                f"{sum(r['lost'] for r in cell):>5} {sum(r['dup'] for r in cell):>4} "
                f"{sum(r['moved'] for r in cell):>5} {sum(r['unacked_kept'] for r in cell):>12} "
                f"{f'{per_run[0]}-{per_run[-1]}':>14} {percentile(restart, 0.5):>10.2f}s "
                f"{restart[-1]:>5.2f}s {percentile(recovery, 0.5):>11.2f}s "
                f"{sum(r.get('recovery') == 'unclean' for r in cell):>7} "
                f"{checked:>11}"
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per mode and client (5)")
    parser.add_argument("--modes", default=",".join(MODES), help="flushDiskTypes (SYNC_FLUSH,ASYNC_FLUSH)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="producers (ours,official)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the kill delays (random)")
    parser.add_argument("--after-kill", type=float, default=1.0, help="seconds the producer goes on (1.0)")
    parser.add_argument("--no-store-check", dest="store_check", action="store_false")
    parser.add_argument("--keep", help="keep every run's logs and store under this directory")
    args = parser.parse_args()
    modes = [m.strip().upper() for m in args.modes.split(",") if m.strip()]
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if bad := [m for m in modes if m not in MODES] + [c for c in clients if c not in CLIENTS]:
        raise SystemExit(f"unknown mode or client: {', '.join(bad)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)

    atexit.register(_stop_all)
    signal.signal(signal.SIGTERM, _on_sigterm)
    os.environ["PYTHONPATH"] = str(ROOT)
    if args.keep:
        base = Path(args.keep).resolve()
        base.mkdir(parents=True, exist_ok=True)
    else:
        base = Path(tempfile.mkdtemp(prefix="crash-matrix-"))
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    try:
        for index in range(args.runs):  # the cells interleaved: drift on the VM hits them alike
            for mode in modes:
                for client in clients:
                    r = one_run(mode, client, index, base, rng, args)
                    results.append(r)
                    print(
                        f"  {mode:<11} {client:<8} run {index}: kill after {r['kill_after_s']:.2f}s, "
                        f"{r['acknowledged']} acked ({r['acked_after_kill']} read after the kill), "
                        f"{r['lost']} lost, {r['dup']} dup, {r['unacked_kept']} unacked kept, "
                        f"restart {r['restart_s']:.2f}s ({r['recovery']}), "
                        f"store check {r.get('store_check', '-')}",
                        flush=True,
                    )
    finally:
        if not args.keep and not any("kept" in r for r in results):
            shutil.rmtree(base, ignore_errors=True)
    print()
    for row in table(results, modes, clients):
        print(row)
    lost = sum(r["lost"] for r in results)
    print(f"\nacknowledged lost: {lost} (target 0: {'met' if lost == 0 else 'MISSED'}); seed {seed}")
    summary = {
        "bench": "crash_matrix",
        "runs": len(results),
        "runs_per_cell": args.runs,
        "modes": modes,
        "clients": clients,
        "seed": seed,
        "acknowledged": sum(r["acknowledged"] for r in results),
        "lost": lost,
        "dup": sum(r["dup"] for r in results),
        "moved": sum(r["moved"] for r in results),
        "unacked_kept": sum(r["unacked_kept"] for r in results),
        "unclean_recoveries": sum(r.get("recovery") == "unclean" for r in results),
        "restart_p50_s": round(percentile(sorted(r["restart_s"] for r in results), 0.5), 3),
        "store_check_problems": sum(r.get("store_check") == "problems" for r in results),
        "seconds": round(time.monotonic() - started, 1),
        "cells": {
            f"{mode}/{client}": {
                "acknowledged": sum(r["acknowledged"] for r in cell),
                "lost": sum(r["lost"] for r in cell),
                "dup": sum(r["dup"] for r in cell),
                "restart_p50_s": round(percentile(sorted(r["restart_s"] for r in cell), 0.5), 3),
            }
            for mode in modes
            for client in clients
            if (cell := [r for r in results if r["mode"] == mode and r["client"] == client])
        },
        "per_run": [
            {
                k: r[k]
                for k in ("mode", "client", "run", "kill_after_s", "acknowledged", "lost", "dup", "restart_s")
            }
            for r in results
        ],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":  # --child CLIENT NAMESRV TOPIC PREFIX
        {"ours": child_ours, "official": child_official}[sys.argv[2]](*sys.argv[3:])
    else:
        main()
