"""The parent: the run's settings, its phases in order, and the servers they run against.

``run`` measures the store alone first (bench/store.py's append loop, in this process,
before anything else runs), then starts a nameserver, a broker and the echo server
(bench/servers.py) and runs the chosen phases, each after the broker has settled.  Each
phase runs its load in child processes (``roles``) against the echo and the broker and
prints its line (``report``); the figures gather in the result ``report.summary_json``
turns into the final JSON line.
"""

from __future__ import annotations

import argparse
import gc
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import Server, create_topic, max_offsets, settle, start_cluster, start_server  # bench/servers.py

from .frames import BATCH, CONSUMER_GROUP, E2E_TOPIC, QUEUES, TOPIC
from .report import catchup_line, e2e_line, fmt_ingest, print_client_catchup, vs
from .roles import BENCH, ENTRY, loadgen, official, official_child, ours_child


@dataclass
class Settings:
    """Durations and load shapes of one run."""

    warmup_s: float = 1.0
    measure_s: float = 3.0
    connections: int = 4
    single_window: int = 32
    batch_window: int = 4
    official_threads: int = 16
    e2e_rate: int = 5_000
    e2e_measure_s: float = 5.0
    catchup_max: int = 400_000
    ceiling_single: int = 100_000
    ceiling_batch: int = 200_000
    ceiling_repeat: int = 3
    ours_warmup_s: float = 0.5  # our client's and the official's one-thread phases
    ours_measure_s: float = 2.0
    ours_async_window: int = 256
    ours_catchup_max: int = 64_000

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            warmup_s=0.5,
            measure_s=1.0,
            e2e_measure_s=2.0,
            catchup_max=50_000,
            ceiling_single=20_000,
            ceiling_batch=40_000,
            ceiling_repeat=1,
            ours_measure_s=1.0,
            ours_catchup_max=20_000,
        )


PHASES = (
    "ceiling",
    "one_at_a_time",
    "raw_single",
    "raw_batch",
    "official_single",
    "official_batch",
    "ours_sync1",
    "ours_sync",
    "ours_async",
    "ours_batch",
    "catchup",
    "ours_push",
    "ours_pull",
    "official_push",
    "e2e",
)


def store_ceiling(work: Path, single_n: int, batch_n: int, repeat: int) -> dict[str, float]:
    """The store's own append rates in this process: bench/store.py's method, median of runs.

    Each run opens a fresh store (first segment warm, one batch per queue written first),
    appends pre-built messages one at a time or pre-encoded batches of 32, and times it.
    """
    sys.path.insert(0, str(BENCH))
    import store as store_bench  # bench/store.py

    directory = work / "ceiling"
    try:
        single = [store_bench.bench_append(directory, single_n, 1)["append_per_s"] for _ in range(repeat)]
        batch = [store_bench.bench_append(directory, batch_n, BATCH)["append_per_s"] for _ in range(repeat)]
    finally:
        gc.unfreeze()
        shutil.rmtree(directory, ignore_errors=True)
    return {"single": statistics.median(single), "batch": statistics.median(batch)}


def ingest_spec(addr: str, s: Settings, batch: int) -> dict[str, Any]:
    return {
        "kind": "ingest",
        "addr": addr,
        "topic": TOPIC,
        "batch": batch,
        "connections": s.connections,
        "window": s.single_window if batch == 1 else s.batch_window,
        "warmup_s": s.warmup_s,
        "measure_s": s.measure_s,
    }


def catchup_ends(starts: list[int], ends: list[int], cap: int) -> list[int]:
    """Per-queue end offsets covering at most ``cap`` messages in all."""
    per_queue = cap // len(ends)
    return [min(end, start + per_queue) for start, end in zip(starts, ends, strict=True)]


def ours_modes(s: Settings) -> list[dict[str, Any]]:
    """Our producer's modes, one per phase: their names are the phases'."""
    threads = s.official_threads
    return [
        {"name": "ours_sync1", "kind": "sync", "threads": 1},
        {"name": "ours_sync", "kind": "sync", "threads": threads},
        {"name": "ours_async", "kind": "async", "window": s.ours_async_window},
        {"name": "ours_batch", "kind": "batch", "threads": threads},
    ]


def ours_producer(
    phases: set[str], s: Settings, namesrv: Server, broker: Server, echo: Server, work: Path, figures: dict
) -> None:
    """Our Producer's modes against the echo, then the broker: one child for each, all modes
    in turn (0.5 s warm-up, 2 s measured each).  With ``ours_sync1`` the official client
    is measured with one thread too, against the broker, with the same durations."""
    modes = [mode for mode in ours_modes(s) if mode["name"] in phases]
    if not modes:
        return
    spec = {
        "kind": "send",
        "topic": TOPIC,
        "modes": modes,
        "warmup_s": s.ours_warmup_s,
        "measure_s": s.ours_measure_s,
    }
    budget = len(modes) * (s.ours_warmup_s + s.ours_measure_s + 25) + 30
    settle(broker)
    echo_r = ours_child({**spec, "namesrv": echo.addr}, budget)
    settle(broker)
    broker_r = ours_child({**spec, "namesrv": namesrv.addr}, budget)
    official_one = None
    if "ours_sync1" in phases:
        settle(broker)
        official_one = official(namesrv.addr, work / "home", 1, 1, s.ours_warmup_s, s.ours_measure_s)
    for mode in modes:
        name = mode["name"]
        b = broker_r if "failed" in broker_r else broker_r.get(name, {"failed": "no result"})
        e = echo_r if "failed" in echo_r else echo_r.get(name, {"failed": "no result"})
        figures[name] = {"broker": b, "echo": e}
        if name == "ours_sync1":
            figures[name]["official"] = ref = official_one
            label = "our client, 1 thread,  send       "
        elif name == "ours_sync":
            ref = figures.get("official_single", {}).get("broker")
            label = f"our client, {mode['threads']} threads, send       "
        elif name == "ours_async":
            ref = figures.get("official_single", {}).get("broker")
            label = f"our client, send_async, {mode['window']} out   "
        else:
            ref = figures.get("official_batch", {}).get("broker")
            label = f"our client, {mode['threads']} threads, send_batch "
        print(fmt_ingest(label, b, e, None) + vs(b, ref, "official"))
    if official_one is not None:
        print(fmt_ingest("official client, 1 thread, send_sync", official_one, None, None))


def client_catchup(phase: str, namesrv: str, ends: list[int], work: Path) -> dict[str, Any]:
    """A client's catch-up of the first ``ends[q]`` messages of every queue, a new group each."""
    spec: dict[str, Any] = {
        "kind": "pull" if phase == "ours_pull" else "push",
        "namesrv": namesrv,
        "topic": TOPIC,
        "group": f"{CONSUMER_GROUP}_{phase}_{os.getpid()}",
        "ends": ends,
        "timeout_s": 60,
    }
    if phase != "official_push":
        return ours_child(spec, spec["timeout_s"] + 30)
    return official_child(spec, work / "home", timeout=spec["timeout_s"] + 30)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure the store alone, then start the servers and run the chosen phases."""
    s = Settings.quick() if args.quick else Settings()
    phases = set(args.only.split(",")) if args.only else set(PHASES)
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-broker-"))
    result: dict[str, Any] = {"settings": s, "figures": {}, "ceiling": {}}
    servers: list[Server] = []
    try:
        if "ceiling" in phases:
            # First, alone: the broker's own start-up work must not overlap it.
            result["ceiling"] = ceiling = store_ceiling(
                work, s.ceiling_single, s.ceiling_batch, s.ceiling_repeat
            )
            print(
                f"store alone (this process): single {ceiling['single']:,.0f}/s, "
                f"batch of 32 {ceiling['batch']:,.0f}/s"
            )
        namesrv, broker = start_cluster(work, shlex.split(args.broker_prefix or ""))
        servers += [broker, namesrv]
        echo = start_server([sys.executable, str(ENTRY), "--role", "echo"], "echo", work / "echo.log")
        servers.append(echo)
        create_topic(broker.addr, TOPIC, QUEUES)
        create_topic(broker.addr, E2E_TOPIC, QUEUES)
        print(f"broker {broker.addr}, nameserver {namesrv.addr}, echo {echo.addr}; work dir {work}")
        run_phases(phases, s, namesrv, broker, echo, work, result)
    finally:
        for server in servers:
            server.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return result


def run_phases(
    phases: set[str], s: Settings, namesrv: Server, broker: Server, echo: Server, work: Path, result: dict
) -> None:
    """The load phases, in order, each after the broker has settled (see ``settle``)."""
    figures, ceiling = result["figures"], result["ceiling"]
    if "one_at_a_time" in phases:
        settle(broker)
        spec = {**ingest_spec(echo.addr, s, 1), "connections": 1, "window": 1}
        echo_r = loadgen(spec)
        broker_r = loadgen({**spec, "addr": broker.addr})
        figures["one_at_a_time"] = {"broker": broker_r, "echo": echo_r}
        print(fmt_ingest("raw frames, one at a time  ", broker_r, echo_r, None))
    for batch, phase in ((1, "raw_single"), (BATCH, "raw_batch")):
        if phase not in phases:
            continue
        settle(broker)
        echo_r = loadgen(ingest_spec(echo.addr, s, batch))
        broker_r = loadgen(ingest_spec(broker.addr, s, batch))
        figures[phase] = {"broker": broker_r, "echo": echo_r}
        label = "raw frames, single sends   " if batch == 1 else "raw frames, batches of 32  "
        print(fmt_ingest(label, broker_r, echo_r, ceiling.get("single" if batch == 1 else "batch")))
    for batch, phase in ((1, "official_single"), (BATCH, "official_batch")):
        if phase not in phases:
            continue
        settle(broker)
        home = work / "home"
        echo_r = official(echo.addr, home, s.official_threads, batch, s.warmup_s, s.measure_s)
        broker_r = official(namesrv.addr, home, s.official_threads, batch, s.warmup_s, s.measure_s)
        figures[phase] = {"broker": broker_r, "echo": echo_r}
        label = f"official client, {s.official_threads} threads, " + (
            "send_sync     " if batch == 1 else "send_batch(32)"
        )
        print(fmt_ingest(label, broker_r, echo_r, None))
    ours_producer(phases, s, namesrv, broker, echo, work, figures)
    if "catchup" in phases:
        settle(broker)
        ends = preload(broker.addr, s)
        settle(broker)
        figures["catchup"] = catchup(broker.addr, echo.addr, s, ends)
    consumers = [p for p in ("ours_push", "ours_pull", "official_push") if p in phases]
    if consumers:
        settle(broker)
        ends = catchup_ends([0] * QUEUES, preload(broker.addr, s), s.ours_catchup_max)
        for phase in consumers:
            settle(broker)
            figures[phase] = client_catchup(phase, namesrv.addr, ends, work)
        print_client_catchup(figures)
    if "e2e" in phases:
        settle(broker)
        figures["e2e"] = e2e(broker.addr, s)


def preload(broker_addr: str, s: Settings) -> list[int]:
    """Queue ends of TOPIC once it holds ``catchup_max`` messages (ingest phases usually did it).

    Tops it up with 1-second runs of batches from the load generator, at most 10 of them.
    """
    ends = max_offsets(broker_addr, TOPIC, QUEUES)
    for _ in range(10):
        if sum(ends) >= s.catchup_max:
            break
        loadgen({**ingest_spec(broker_addr, s, BATCH), "warmup_s": 0.0, "measure_s": 1.0})
        ends = max_offsets(broker_addr, TOPIC, QUEUES)
    return ends


def catchup(broker_addr: str, echo_addr: str, s: Settings, ends: list[int]) -> dict[str, Any]:
    """Pull ``catchup_max`` stored messages from the start of every queue; the echo serves as many."""
    starts = [0] * QUEUES
    ends = catchup_ends(starts, ends, s.catchup_max)
    spec = {
        "kind": "catchup",
        "topic": TOPIC,
        "connections": 2,
        "starts": starts,
        "ends": ends,
        "timeout_s": 60,
    }
    broker_r = loadgen({**spec, "addr": broker_addr})
    echo_r = loadgen({**spec, "addr": echo_addr})
    print(catchup_line(broker_r, echo_r))
    return {"broker": broker_r, "echo": echo_r}


def e2e(broker_addr: str, s: Settings) -> dict[str, Any]:
    """Paced sends at ``e2e_rate`` with a long-polling consumer on the same broker."""
    spec = {
        "kind": "e2e",
        "addr": broker_addr,
        "topic": E2E_TOPIC,
        "rate": s.e2e_rate,
        "connections": 2,
        "suspend_ms": 5_000,
        "starts": max_offsets(broker_addr, E2E_TOPIC, QUEUES),
        "warmup_s": s.warmup_s,
        "measure_s": s.e2e_measure_s,
        "timeout_s": 15,
    }
    r = loadgen(spec)
    print(e2e_line(s.e2e_rate, r))
    return r
