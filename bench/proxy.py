"""RocketMQ 5 clients through the gRPC proxy, beside our remoting client, in one run.

    python bench/proxy.py [--seconds S] [--backlog N] [--v5-count N] [--timer-rate R]
                          [--timer-seconds S] [--phases send,catchup,timer,ceiling]
                          [--profile DIR]

About 80 s on this 2-core machine with the defaults.  (Not ``bench/grpc.py``, the name
issue 18 gives it: run from bench/, that file would stand in for the ``grpc`` package for
every script there.)

A nameserver, a broker (ASYNC_FLUSH, default settings) and the proxy each run as their own
``python -m broker_core`` process; the official ``rocketmq-python-client`` (5.1.2, in
.venv-v5, which setup makes) runs in child processes (bench/proxy_v5.py).  Issue 18's
figures, side by side:

* **send**: sync sends of 1 KiB messages (tag, keys) from one thread for ``--seconds``
  after 200 warm-up sends, into a topic of 8 queues: the v5 client through the proxy, and
  our ``Producer`` over the remoting protocol straight to the broker.  msgs/s, latency
  p50/p99.  Target: v5 >= 70 % of ours.
* **catchup** (receive+ack): ``--backlog`` 1 KiB messages preloaded (our producer's batches
  of 32) into a topic of 8 queues; then each consumer, a group of its own, drains it from
  the start: our ``PushConsumer`` (pulls of 32, listener batches of 32) the whole backlog;
  the v5 ``SimpleConsumer`` its first ``--v5-count`` messages, receiving batches of 32
  (60 s invisible) and acking them (bench/proxy_v5.py says how): ``async`` acks (one
  AckMessage RPC per message, not waited for one by one) from one receiving thread and
  from two, ``sync`` acks (one RPC per message, waited for), and ``batch`` (one RPC acking
  the 32: outside the client's API, what a client that batched acks would get).  msgs/s
  from the start (of the consumer, of the first receive) to the last message acked.  The
  figure for the target is the best of the runs the client's API allows (not ``batch``).
  Target: >= 20,000 msgs/s.
* **timer** lateness: the v5 producer sends timer messages (``delivery_timestamp`` 1-3 s
  ahead, drawn uniformly) at ``--timer-rate`` msgs/s for ``--timer-seconds``, paced by the
  clock (``send_async``: one sync send at a time cannot keep 1,000 msgs/s); our
  PushConsumer, subscribed before the first send (as bench/timer.py's), records listener
  time (``time.time()``) - requested time.  p50/p99/max, and the p99 of its two parts:
  *scan* (requested -> the copy's store time in its topic) and *hand-off* (-> listener);
  missing, duplicated and early messages (must be 0); ``asked_mismatch``: messages whose
  stored ``TIMER_DELIVER_MS`` is not the time the client asked for (must be 0: client
  5.1.2 writes its milliseconds into ``Timestamp.seconds``, the proxy reads them back).
  Target: p99 <= 100 ms.
* **ceiling**: the same v5 client against bench/proxy_stub.py, a do-nothing servicer on
  grpc.aio and uvloop (as the proxy's server): the sync send rate and the
  catch-up rates (async acks from one and two threads, batch acks) with nothing behind the
  gRPC hop.  What the client can reach at best on this machine.

``--profile DIR``: py-spy (``.venv/bin/py-spy``, not installed by setup: ``.venv/bin/pip
install py-spy``) samples the proxy, the broker and each v5 child during each phase at 200
Hz and writes ``DIR/<phase>-<process>.txt`` (collapsed stacks; the sampling itself takes
CPU from the run, so profiled figures are lower).

The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from lateness import send_until_routed, wait_for  # noqa: E402 - bench/lateness.py
from servers import Server, create_topic, percentile, settle, start_cluster, start_server  # noqa: E402

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer  # noqa: E402
from broker_core.client.message import Message  # noqa: E402
from broker_core.client.producer.producer import Producer  # noqa: E402
from broker_core.messagequeue import MessageQueue  # noqa: E402
from broker_core.model.message import PROPERTY_TIMER_DELIVER_MS, MessageExt  # noqa: E402

TOPIC = "GrpcBench"
BACKLOG_TOPIC = "GrpcBenchBacklog"
TIMER_TOPIC = "GrpcBenchTimer"
QUEUES = 8
TIMER_QUEUES = 4
BODY = b"x" * 1024
V5_PYTHON = ROOT / ".venv-v5" / "bin" / "python"
V5_CHILD = HERE / "proxy_v5.py"
STUB = HERE / "proxy_stub.py"
PY_SPY = ROOT / ".venv" / "bin" / "py-spy"
BROKER_NAME = "bench-broker"  # servers.start_cluster's
PHASES = ("send", "catchup", "timer", "ceiling")
# The v5 catch-up runs: (name, acks, receiving threads); the first two are the API's best.
CATCHUP_RUNS = (
    ("async", "async", 1),
    ("async_2threads", "async", 2),
    ("sync", "sync", 1),
    ("batch", "batch", 1),
)
CEILING_RUNS = ("async", "async_2threads", "batch")
TARGET_SEND_RATIO = 0.70
TARGET_CATCHUP_MSGS_S = 20_000
TARGET_TIMER_P99_MS = 100.0


# -- profiling -------------------------------------------------------------------------------


class Profiler:
    """py-spy ``record`` on processes during a phase (nothing without an output folder)."""

    def __init__(self, out: Path | None) -> None:
        self.out = out
        self.running: list[subprocess.Popen[bytes]] = []
        if out is not None:
            if not PY_SPY.exists():
                raise SystemExit(f"--profile needs {PY_SPY}: .venv/bin/pip install py-spy")
            out.mkdir(parents=True, exist_ok=True)

    def attach(self, phase: str, name: str, pid: int) -> None:
        if self.out is None:
            return
        cmd = [str(PY_SPY), "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--nonblocking"]
        cmd += ["--output", str(self.out / f"{phase}-{name}.txt")]
        self.running.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def detach(self) -> None:
        """Stop every recording (each writes its file on SIGINT, or when its process ends)."""
        for proc in self.running:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.running:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.running = []


# -- the v5 client (child processes in .venv-v5) ------------------------------------------------


def run_v5(work: Path, profiler: Profiler, phase: str, args: list[str], timeout: float) -> dict[str, Any]:
    """bench/proxy_v5.py with ``args`` in .venv-v5; its JSON line (exits on a failure)."""
    proc = subprocess.Popen(
        [str(V5_PYTHON), str(V5_CHILD), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"HOME": str(work), "PATH": "/usr/bin:/bin"},  # the client logs under $HOME/logs
    )
    profiler.attach(phase, "v5-client", proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        raise SystemExit(f"the v5 client ({' '.join(args[:1])}) timed out: {stderr[-2000:]}") from None
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"the v5 client ({' '.join(args[:1])}) failed: {stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# -- send --------------------------------------------------------------------------------------


def ours_send(namesrv: str, seconds: float) -> dict[str, float]:
    producer = Producer("grpc-bench-ours", namesrv)
    producer.start()
    try:
        for i in range(200):
            producer.send(Message(TOPIC, BODY, tags="T", keys=f"k{i}"))
        latencies = []
        started = time.perf_counter()
        i = 0
        while time.perf_counter() - started < seconds:
            t0 = time.perf_counter()
            producer.send(Message(TOPIC, BODY, tags="T", keys=f"k{i}"))
            latencies.append(time.perf_counter() - t0)
            i += 1
        elapsed = time.perf_counter() - started
    finally:
        producer.shutdown()
    latencies.sort()
    return {
        "msgs_s": round(i / elapsed),
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
    }


# -- receive+ack catch-up ------------------------------------------------------------------------


def preload(namesrv: str, count: int) -> float:
    """``count`` messages into BACKLOG_TOPIC in batches of 32, 8 batches in flight; msgs/s."""
    producer = Producer("grpc-bench-preload", namesrv)
    producer.start()
    try:
        queues = [MessageQueue(BACKLOG_TOPIC, BROKER_NAME, q) for q in range(QUEUES)]
        started = time.perf_counter()
        in_flight = []
        for n, first in enumerate(range(0, count, 32)):
            batch = [
                Message(BACKLOG_TOPIC, BODY, tags="T", keys=f"k{i}")
                for i in range(first, min(first + 32, count))
            ]
            in_flight.append(producer.send_batch_async(batch, queue=queues[n % QUEUES]))
            if len(in_flight) >= 8:
                in_flight.pop(0).result(30)
        for future in in_flight:
            future.result(30)
        return count / (time.perf_counter() - started)
    finally:
        producer.shutdown()


def ours_catchup(namesrv: str, count: int) -> dict[str, Any]:
    """Our PushConsumer, a new group, drains the backlog from its first offset."""
    lock = threading.Lock()
    done = threading.Event()
    seen = {"n": 0}
    first: list[float] = []

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        with lock:
            if not first:
                first.append(time.perf_counter())
            seen["n"] += len(msgs)
            if seen["n"] >= count:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "grpc-bench-ours-catchup",
        namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_message_batch_max_size=32,
    ).subscribe(BACKLOG_TOPIC)
    consumer.register_listener(listener)
    started = time.perf_counter()
    consumer.start()
    try:
        if not done.wait(120):
            raise SystemExit(f"our consumer took only {seen['n']} of {count} messages in 120 s")
        ended = time.perf_counter()
    finally:
        consumer.shutdown()
    return {
        "received": seen["n"],
        "seconds": round(ended - started, 3),
        "msgs_s": round(seen["n"] / (ended - started)),
        "msgs_s_from_first": round(seen["n"] / (ended - first[0])),
    }


# -- timer lateness --------------------------------------------------------------------------------


class TimerReceiver:
    """Per bench message (body ``t-<index>``): index, listener ms, stored TIMER_DELIVER_MS, and
    the store timestamp of the copy delivered to the topic (when the broker's scan moved it)."""

    def __init__(self) -> None:
        self.got: list[tuple[int, float, int | None, int]] = []
        self.other = 0
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        now = time.time() * 1000
        with self.lock:
            for msg in msgs:
                if not msg.body.startswith(b"t-"):
                    self.other += 1  # a warm-up message
                    continue
                asked = msg.properties.get(PROPERTY_TIMER_DELIVER_MS)
                asked_ms = int(asked) if asked is not None else None
                self.got.append((int(msg.body[2:]), now, asked_ms, msg.store_timestamp))
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.got)


def timer_lateness(
    namesrv: str, proxy_addr: str, work: Path, profiler: Profiler, rate: int, seconds: float
) -> dict[str, Any]:
    min_ms, max_ms = 1000, 3000
    receiver = TimerReceiver()
    producer = Producer("grpc-bench-timer-warm", namesrv).start()
    consumer = None
    try:
        send_until_routed(producer, TIMER_TOPIC)
        consumer = (
            PushConsumer("grpc-bench-timer", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            .subscribe(TIMER_TOPIC)
            .register_listener(receiver)
            .start()
        )
        wait_for(lambda: receiver.other > 0, 60, "the timer consumer's first message")
        for queue_id in range(TIMER_QUEUES):  # one plain and one timer message into each queue
            mq = MessageQueue(TIMER_TOPIC, BROKER_NAME, queue_id)
            producer.send(Message(TIMER_TOPIC, b"warm-up"), queue=mq)
            timed = Message(TIMER_TOPIC, b"warm-up")
            timed.properties[PROPERTY_TIMER_DELIVER_MS] = str(int(time.time() * 1000) + 100)
            producer.send(timed, queue=mq)
        wait_for(lambda: receiver.other >= 1 + 2 * TIMER_QUEUES, 60, "the timer warm-up messages")
        time.sleep(1.0)  # its pulls are held on the broker again by now
        sent = run_v5(
            work,
            profiler,
            "timer",
            ["timer", proxy_addr, TIMER_TOPIC, str(rate), str(seconds), str(min_ms), str(max_ms)],
            timeout=seconds + 120,
        )
        requested: list[int] = sent.pop("requested_ms")
        deadline = time.monotonic() + max_ms / 1000 + 20
        while receiver.count() < sent["sent"] and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # a duplicate, if one were coming
    finally:
        if consumer is not None:
            consumer.shutdown()
        producer.shutdown()
    with receiver.lock:
        got = list(receiver.got)
    seen: dict[int, int] = {}
    lateness: list[float] = []
    scan: list[float] = []
    handoff: list[float] = []
    early = mismatch = 0
    for index, received_ms, asked, stored_ms in got:
        seen[index] = seen.get(index, 0) + 1
        if seen[index] > 1:
            continue
        if asked is None or not 0 <= index < len(requested) or asked != requested[index]:
            mismatch += 1
        if asked is None:
            continue
        early += received_ms < asked
        lateness.append(received_ms - asked)
        scan.append(stored_ms - asked)
        handoff.append(received_ms - stored_ms)
    lateness.sort()
    scan.sort()
    handoff.sort()
    return {
        **sent,
        "received": len(seen),
        "missing": sent["sent"] - len(seen),
        "duplicates": sum(n - 1 for n in seen.values()),
        "early": early,
        "asked_mismatch": mismatch,
        "lateness_p50_ms": round(percentile(lateness, 0.50), 2) if lateness else None,
        "lateness_p99_ms": round(percentile(lateness, 0.99), 2) if lateness else None,
        "lateness_max_ms": round(lateness[-1], 2) if lateness else None,
        # lateness = scan (the broker re-stores it in its topic) + hand-off (to our listener)
        "scan_p99_ms": round(percentile(scan, 0.99), 2) if scan else None,
        "handoff_p99_ms": round(percentile(handoff, 0.99), 2) if handoff else None,
    }


# -- the run ----------------------------------------------------------------------------------------


def start_proxy(work: Path, namesrv: Server) -> Server:
    (work / "rmq-proxy.json").write_text(json.dumps({"namesrvAddr": namesrv.addr, "grpcServerPort": 0}))
    return start_server(
        [sys.executable, "-m", "broker_core", "proxy", "-c", str(work / "rmq-proxy.json")],
        "proxy",
        work / "proxy.log",
    )


def run_name(name: str) -> str:
    """``async_2threads`` -> ``async acks, 2 threads``."""
    acks, _, threads = name.partition("_")
    return f"{acks} acks" + (f", {threads.removesuffix('threads')} threads" if threads else "")


def send_line(name: str, r: dict[str, Any]) -> str:
    return f"{name:<50} {r['msgs_s']:>7,} msgs/s  p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms"


def catchup_line(name: str, r: dict[str, Any]) -> str:
    extra = f", {r['ack_rpcs']:,} ack RPCs" if "ack_rpcs" in r else ""
    errors = f", {r['ack_errors']} ack errors" if r.get("ack_errors") else ""
    took = f"({r['received']:,} msgs in {r['seconds']:.2f} s{extra}{errors})"
    return f"{name:<50} {r['msgs_s']:>7,} msgs/s  {took}"


def timer_lines(rate: int, t: dict[str, Any]) -> str:
    counts = (
        f"sent {t['sent']:,} at {t['send_rate']:,}/s, missing {t['missing']}, duplicates {t['duplicates']}, "
        f"early {t['early']}, asked mismatch {t['asked_mismatch']}"
    )
    return (
        f"timer lateness, v5 producer at {rate:,}/s: p50 {t['lateness_p50_ms']} ms  "
        f"p99 {t['lateness_p99_ms']} ms  max {t['lateness_max_ms']} ms "
        f"(target p99 <= {TARGET_TIMER_P99_MS:.0f} ms)\n"
        f"  {counts}\n"
        f"  p99 of its parts: scan {t['scan_p99_ms']} ms (requested -> re-stored in its topic), "
        f"hand-off {t['handoff_p99_ms']} ms (-> our listener)"
    )


def targets_met(out: dict[str, Any]) -> dict[str, bool | None]:
    """Each of issue 18's targets: met, missed, or None when its phase did not run."""
    met: dict[str, bool | None] = {"send_ratio": None, "catchup": None, "timer_p99": None}
    if "v5_over_remoting" in out:
        met["send_ratio"] = out["v5_over_remoting"] >= TARGET_SEND_RATIO
    if "receive_ack_msgs_s" in out:
        met["catchup"] = out["receive_ack_msgs_s"] >= TARGET_CATCHUP_MSGS_S
    if "v5_timer" in out:
        t = out["v5_timer"]
        p99 = t["lateness_p99_ms"]
        clean = not (t["missing"] or t["duplicates"] or t["early"])
        met["timer_p99"] = p99 is not None and p99 <= TARGET_TIMER_P99_MS and clean
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="sync sends: measured window (5)")
    parser.add_argument("--backlog", type=int, default=50_000, help="catch-up: messages preloaded (50,000)")
    parser.add_argument("--v5-count", type=int, default=10_000, help="catch-up: messages each v5 mode drains")
    parser.add_argument("--timer-rate", type=int, default=1000, help="timer messages a second (1000)")
    parser.add_argument("--timer-seconds", type=float, default=10.0, help="how long timer messages go (10)")
    parser.add_argument(
        "--phases", default=",".join(PHASES), help="a comma-separated subset of " + ",".join(PHASES)
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy each process during each phase into DIR")
    args = parser.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    if not phases or any(p not in PHASES for p in phases):
        raise SystemExit(f"--phases: a comma-separated list out of {','.join(PHASES)}")
    if not 0 < args.v5_count <= args.backlog:
        raise SystemExit("--v5-count must be 1..--backlog")
    if not V5_PYTHON.exists():
        raise SystemExit(f"{V5_PYTHON} is missing: run `python3 manage.py check` once (setup makes .venv-v5)")
    profiler = Profiler(Path(args.profile).resolve() if args.profile else None)
    print(
        f"proxy benchmark: {os.cpu_count()} cores, Python {sys.version.split()[0]}, phases {','.join(phases)}"
    )
    out: dict[str, Any] = {"bench": "proxy"}
    work = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    servers: list[Server] = []
    try:
        namesrv, broker = start_cluster(work, [])
        servers += [namesrv, broker]
        proxy = start_proxy(work, namesrv)
        servers.append(proxy)
        create_topic(broker.addr, TOPIC, QUEUES)
        create_topic(broker.addr, BACKLOG_TOPIC, QUEUES)
        create_topic(broker.addr, TIMER_TOPIC, TIMER_QUEUES, "+message.type=DELAY")
        time.sleep(1.0)  # the broker's registration carries the topics to the nameserver
        settle(broker)

        def watch(phase: str) -> None:
            profiler.attach(phase, "proxy", proxy.proc.pid)
            profiler.attach(phase, "broker", broker.proc.pid)

        if "send" in phases:
            out["ours_remoting"] = ours_send(namesrv.addr, args.seconds)
            settle(broker)
            watch("send")
            out["v5_proxy"] = run_v5(
                work, profiler, "send", ["send", proxy.addr, TOPIC, str(args.seconds)], 120
            )
            profiler.detach()
            out["v5_over_remoting"] = round(out["v5_proxy"]["msgs_s"] / out["ours_remoting"]["msgs_s"], 3)
            print(send_line("sync send, our client, remoting", out["ours_remoting"]))
            print(send_line("sync send, v5 client, proxy", out["v5_proxy"]))
            print(
                f"  v5 / remoting: {out['v5_over_remoting']:.2f} (target >= {TARGET_SEND_RATIO})", flush=True
            )

        if "catchup" in phases:
            out["preload_msgs_s"] = round(preload(namesrv.addr, args.backlog))
            settle(broker)
            out["ours_catchup"] = ours_catchup(namesrv.addr, args.backlog)
            print(catchup_line("catch-up, our PushConsumer", out["ours_catchup"]), flush=True)
            for name, acks, threads in CATCHUP_RUNS:
                settle(broker)
                watch(f"catchup-{name}")
                r = run_v5(
                    work,
                    profiler,
                    f"catchup-{name}",
                    ["catchup", proxy.addr, BACKLOG_TOPIC, f"grpc-bench-v5-{name}", str(args.v5_count)]
                    + [acks, str(threads)],
                    timeout=300,
                )
                profiler.detach()
                out[f"v5_catchup_{name}"] = r
                print(catchup_line(f"catch-up, v5 SimpleConsumer, {run_name(name)}", r), flush=True)
            # the figure for the target: the best the client's API allows (not "batch")
            best = max(("async", "async_2threads", "sync"), key=lambda n: out[f"v5_catchup_{n}"]["msgs_s"])
            v5_rate = out[f"v5_catchup_{best}"]["msgs_s"]
            out["receive_ack_msgs_s"] = v5_rate
            out["receive_ack_run"] = best
            versus = v5_rate / out["ours_catchup"]["msgs_s"]
            print(f"  v5 best ({run_name(best)}) / target {TARGET_CATCHUP_MSGS_S:,}: "
                  f"{v5_rate / TARGET_CATCHUP_MSGS_S:.2f}; / ours: {versus:.3f}", flush=True)  # fmt: skip

        if "timer" in phases:
            settle(broker)
            watch("timer")
            t = timer_lateness(namesrv.addr, proxy.addr, work, profiler, args.timer_rate, args.timer_seconds)
            profiler.detach()
            out["v5_timer"] = t
            out["timer_lateness_p99_ms"] = t["lateness_p99_ms"]
            print(timer_lines(args.timer_rate, t), flush=True)
    finally:
        profiler.detach()
        for server in reversed(servers):
            server.stop()
        shutil.rmtree(work, ignore_errors=True)  # the broker's 1 GiB segment is not kept

    if "ceiling" in phases:
        work = Path(tempfile.mkdtemp(prefix="grpc-bench-stub-"))
        stub = start_server([sys.executable, str(STUB), "--server", "uvloop"], "stub", work / "stub.log")
        try:
            profiler.attach("ceiling", "stub", stub.proc.pid)
            ceiling: dict[str, Any] = {
                "send": run_v5(
                    work, profiler, "ceiling-send", ["send", stub.addr, TOPIC, str(args.seconds)], 120
                )
            }
            for name, acks, threads in CATCHUP_RUNS:
                if name in CEILING_RUNS:
                    ceiling[f"catchup_{name}"] = run_v5(
                        work,
                        profiler,
                        f"ceiling-catchup-{name}",
                        ["catchup", stub.addr, TOPIC, f"stub-{name}", str(args.v5_count), acks, str(threads)],
                        timeout=300,
                    )
            profiler.detach()
        finally:
            stub.stop()
            shutil.rmtree(work, ignore_errors=True)
        out["v5_ceiling"] = ceiling
        print("ceiling: the v5 client against a do-nothing grpc.aio servicer on uvloop (bench/proxy_stub.py)")
        print(send_line("  sync send", ceiling["send"]))
        for name in CEILING_RUNS:
            print(catchup_line(f"  catch-up, {run_name(name)}", ceiling[f"catchup_{name}"]))
        if "ours_remoting" in out:
            ratio = ceiling["send"]["msgs_s"] / out["ours_remoting"]["msgs_s"]
            print(f"  ceiling sync send / remoting: {ratio:.2f}")
        if "v5_proxy" in out:
            print(f"  proxy / ceiling: sync send {out['v5_proxy']['msgs_s'] / ceiling['send']['msgs_s']:.2f}")
        if "v5_catchup_async" in out:
            for name in CEILING_RUNS:
                ratio = out[f"v5_catchup_{name}"]["msgs_s"] / ceiling[f"catchup_{name}"]["msgs_s"]
                print(f"  proxy / ceiling: catch-up, {run_name(name)} {ratio:.2f}")

    out["targets_met"] = targets_met(out)
    print(f"targets met: {out['targets_met']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
