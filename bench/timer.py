"""Timer-message lateness: any delivery time, at 1,000 msgs/s, beside delay level 1 in one run.

    .venv/bin/python bench/timer.py [--rate 1000] [--seconds 10] [--quick]
                                    [--min-delay-ms 1000] [--max-delay-ms 3000]
                                    [--modes timer,level] [--broker-prefix CMD] [--keep DIR]

Why (the timer-message issue): a timer message must reach its consumer at most 100 ms after
the time it asked for at p99, at 1,000 timer messages/s, as delay levels do (bench/delay.py).

A nameserver and a broker (``python -m broker_core`` child processes on free loopback
ports, ASYNC_FLUSH, ``standaloneMaintenance`` left at auto with no platform: the broker's
own delay scan delivers, scanning then sleeping until the next message is due, 10 to 100
ms).  Our producer (``broker_core.client``, one synchronous send at a time) sends ``--rate``
messages a second, paced by the clock, for ``--seconds`` into a topic of 4 queues; a
PushConsumer (CONSUME_FROM_FIRST_OFFSET, subscribed before the first send) takes them.

Modes, one after the other on the same broker, same rate and length:

* ``timer``: each message carries ``TIMER_DELIVER_MS`` = its send time + a delay drawn
  uniformly from ``--min-delay-ms``..``--max-delay-ms`` (1-3 s), so later sends often fall
  due before earlier ones.  Requested time = that property (the broker keeps it and adds
  ``TIMER_OUT_MS``, the same value: it does not round);
* ``level``: delay level 1 (1 s), the reference the target comes from.  Requested time =
  the SCHEDULE_TOPIC_XXXX record's store timestamp + 1000 ms, the broker's own rule, read
  back after the run (as bench/delay.py does).

Before each mode's clock starts, a warm-up as on a broker that has run a while: one plain
and one message of the mode's kind into each queue, all received.

Per mode: sent, received, missing and duplicated (must be 0), early (received before the
requested time: must be 0), and lateness = listener time (``time.time()``, the broker's
clock) - requested time, p50/p90/p99/max, split into *scan* (the delivered copy's store
timestamp - requested: when the broker re-stored it) and *hand-off* (listener time - that
store timestamp).  *Overtakes*: messages delivered to their queue after one sent later to
it (none for delay levels, most for timers spread over 2 s).  CPU of the broker from the
first send to the last arrival.  Then the ratios timer / level and timer p99 / target, and
one JSON line of every figure last.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from lateness import schedule_store_times, send_until_routed, summary, wait_for  # bench/lateness.py
from servers import create_topic, process_cpu_seconds, start_cluster  # bench/servers.py

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import (
    PROPERTY_SCHEDULE_OFFSET,
    PROPERTY_TIMER_DELIVER_MS,
    MessageExt,
)

MODES = ("timer", "level")
TOPIC_PREFIX = "TimerBench-"  # one topic per mode: a mode's consumer sees only its messages
QUEUES = 4
BROKER_NAME = "bench-broker"  # servers.start_cluster's
LEVEL_DELAY_MS = 1000  # level 1 of the default messageDelayLevel
TARGET_P99_MS = 100.0


class Receiver:
    """Per bench message: (index, listener ms, requested ms or None, delivered copy's store ts,
    SCHEDULE_OFFSET, queue id), in arrival order."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.got: list[tuple[int, float, int | None, int, str, int]] = []
        self.other = 0
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        now = time.time() * 1000
        with self.lock:
            for msg in msgs:
                if not msg.body.startswith(self.prefix):
                    self.other += 1  # a warm-up message
                    continue
                props = msg.properties
                asked = props.get(PROPERTY_TIMER_DELIVER_MS)
                self.got.append(
                    (
                        int(msg.body[len(self.prefix) :]),
                        now,
                        int(asked) if asked is not None else None,
                        msg.store_timestamp,
                        props.get(PROPERTY_SCHEDULE_OFFSET, ""),
                        msg.queue_id,
                    )
                )
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.got)


def measure(
    mode: str,
    namesrv_addr: str,
    broker_pid: int,
    args: argparse.Namespace,
    seconds: float,
    level_offset: int,
    dump: Path | None,
) -> dict[str, Any]:
    """Send ``args.rate`` messages of ``mode`` a second for ``seconds``; the lateness figures.

    ``level_offset``: where this run's entries start in SCHEDULE_TOPIC_XXXX queue 0 (the
    warm-ups of earlier runs are before it)."""
    total = int(args.rate * seconds)
    topic = TOPIC_PREFIX + mode
    prefix = f"{mode[0]}-".encode()
    rng = random.Random(7)
    span = args.max_delay_ms - args.min_delay_ms

    def kind(msg: Message) -> Message:
        if mode == "timer":
            delay = args.min_delay_ms + (rng.random() * span if span else 0)
            msg.properties[PROPERTY_TIMER_DELIVER_MS] = str(time.time_ns() // 1_000_000 + int(delay))
        else:
            msg.delay_level = 1
        return msg

    producer = Producer(f"timer-bench-{mode}", namesrv_addr).start()
    receiver = Receiver(prefix)
    consumer = None
    send_errors = 0
    try:
        send_until_routed(producer, topic)
        consumer = (
            PushConsumer(f"timer-bench-{mode}", namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            .subscribe(topic)
            .register_listener(receiver)
            .start()
        )
        wait_for(lambda: receiver.other > 0, 60, "the consumer's first message")
        for queue_id in range(QUEUES):
            mq = MessageQueue(topic, BROKER_NAME, queue_id)
            producer.send(Message(topic, b"warm-up"), queue=mq)
            producer.send(kind(Message(topic, b"warm-up")), queue=mq)
        wait_for(lambda: receiver.other >= 1 + 2 * QUEUES, 60, "the warm-up messages")
        time.sleep(1.0)  # its pulls are held on the broker again by now
        cpu_before = process_cpu_seconds(broker_pid)
        start = time.perf_counter()
        for i in range(total):
            ahead = start + i / args.rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
            try:
                producer.send(kind(Message(topic, prefix + str(i).encode())))
            except Exception:
                send_errors += 1
        send_seconds = time.perf_counter() - start
        deadline = time.monotonic() + args.max_delay_ms / 1000 + 20
        while receiver.count() < total - send_errors and time.monotonic() < deadline:
            time.sleep(0.05)
        busy_s = time.perf_counter() - start
        cpu = process_cpu_seconds(broker_pid) - cpu_before
        time.sleep(1.5)  # a duplicate, if one were coming
    finally:
        if consumer is not None:
            consumer.shutdown()
        producer.shutdown()
    with receiver.lock:
        got = list(receiver.got)
    scheduled = (
        schedule_store_times(
            namesrv_addr, BROKER_NAME, 0, level_offset + total + QUEUES, "timer-bench-reader"
        )
        if mode == "level"
        else {}
    )
    seen: dict[int, int] = {}
    lateness: list[float] = []
    scan: list[float] = []
    handoff: list[float] = []
    rows = ["index,requested_ms,delivered_store_ms,received_ms"]
    early = unmatched = overtakes = 0
    highest: dict[int, int] = {}  # per queue, the highest index delivered there so far
    for index, received_ms, asked, delivered_ts, marker, queue_id in got:
        seen[index] = seen.get(index, 0) + 1
        if seen[index] > 1:
            continue  # a duplicate: its first delivery counts
        if index < highest.get(queue_id, -1):
            overtakes += 1  # a message sent after this one to its queue was delivered before it
        highest[queue_id] = max(highest.get(queue_id, -1), index)
        if mode == "timer":
            requested = asked
        else:
            level, _, offset = marker.partition(":")
            entry = scheduled.get(int(offset)) if level == "1" and offset.isdigit() else None
            ok = entry is not None and entry[1] == prefix + str(index).encode()
            requested = entry[0] + LEVEL_DELAY_MS if entry is not None and ok else None
        if requested is None:
            unmatched += 1
            continue
        early += received_ms < requested
        lateness.append(received_ms - requested)
        scan.append(delivered_ts - requested)
        handoff.append(received_ms - delivered_ts)
        rows.append(f"{index},{requested},{delivered_ts},{received_ms:.3f}")
    if dump is not None:
        dump.write_text("\n".join(rows) + "\n")
    return {
        "sent": total - send_errors,
        "send_errors": send_errors,
        "send_rate": round((total - send_errors) / send_seconds, 1),
        "received": len(seen),
        "missing": total - send_errors - len(seen),
        "duplicates": sum(n - 1 for n in seen.values()),
        "early": early,
        "unmatched": unmatched,
        "overtakes": overtakes,
        "lateness_ms": summary(lateness),
        "scan_ms": summary(scan),
        "handoff_ms": summary(handoff),
        "broker_cpu_cores": round(cpu / busy_s, 3),
    }


def fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="messages a second (1000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each mode sends (10)")
    parser.add_argument("--quick", action="store_true", help="a 3 s smoke run per mode")
    parser.add_argument("--min-delay-ms", type=int, default=1000, help="timer: shortest delay (1000)")
    parser.add_argument("--max-delay-ms", type=int, default=3000, help="timer: longest delay (3000)")
    parser.add_argument("--modes", default=",".join(MODES), help="timer,level (in this order)")
    parser.add_argument("--broker-prefix", help="command put before the broker's (e.g. a profiler)")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (logs, store, <mode>.csv)")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in MODES for m in modes):
        raise SystemExit(f"--modes: a comma-separated list out of {','.join(MODES)}")
    if args.rate <= 0 or args.seconds <= 0 or not 0 < args.min_delay_ms <= args.max_delay_ms:
        raise SystemExit("--rate and --seconds must be positive, 0 < --min-delay-ms <= --max-delay-ms")
    seconds = 3.0 if args.quick else args.seconds
    print(
        f"timer benchmark: {args.rate} msgs/s for {seconds:g} s per mode, timer delays "
        f"{args.min_delay_ms}-{args.max_delay_ms} ms, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}",
        flush=True,
    )
    prefix = shlex.split(args.broker_prefix) if args.broker_prefix else []
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="quiver-timer-") as tmp:
        work = Path(args.keep).resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        namesrv, broker = start_cluster(work, prefix)
        try:
            level_offset = 0
            for mode in modes:
                create_topic(broker.addr, TOPIC_PREFIX + mode, QUEUES)
                print(f"{mode}: running ...", flush=True)
                dump = work / f"{mode}.csv" if args.keep else None
                results[mode] = measure(
                    mode, namesrv.addr, broker.proc.pid, args, seconds, level_offset, dump
                )
                if mode == "level":
                    level_offset += results[mode]["sent"] + QUEUES
        finally:
            broker.stop()
            namesrv.stop()

    print()
    print(f"lateness at {args.rate} msgs/s, ms after the requested time (listener time.time() - requested)")
    head = [
        "mode",
        "sent",
        "recv",
        "miss",
        "dup",
        "early",
        "p50",
        "p90",
        "p99",
        "max",
        "scan p99",
        "hand-off p99",
    ]
    widths = [7, 7, 7, 5, 4, 6, 8, 8, 8, 9, 9, 13]
    print("".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(head, widths, strict=True))))
    for mode, r in results.items():
        lat = r["lateness_ms"]
        cells = [mode, r["sent"], r["received"], r["missing"], r["duplicates"], r["early"]]
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
            f"{fmt(r['handoff_ms']['p99'])}/{fmt(r['handoff_ms']['max'])} ms, send rate {r['send_rate']}/s, "
            f"broker CPU {r['broker_cpu_cores']} cores, overtakes {r['overtakes']}"
            + (f", unmatched {r['unmatched']}" if r["unmatched"] else "")
        )

    out: dict[str, Any] = {
        "bench": "timer",
        "rate": args.rate,
        "seconds": seconds,
        "min_delay_ms": args.min_delay_ms,
        "max_delay_ms": args.max_delay_ms,
        "target_p99_ms": TARGET_P99_MS,
    }
    for mode, r in results.items():
        for key in (
            "sent",
            "received",
            "missing",
            "duplicates",
            "early",
            "unmatched",
            "overtakes",
            "send_rate",
        ):
            out[f"{mode}_{key}"] = r[key]
        for part in ("lateness", "scan", "handoff"):
            for stat in ("p50", "p90", "p99", "max"):
                out[f"{mode}_{part}_{stat}_ms"] = r[f"{part}_ms"][stat]
        out[f"{mode}_broker_cpu_cores"] = r["broker_cpu_cores"]
    if "timer" in results and "level" in results:
        for stat in ("p50", "p99", "max"):
            t, lv = results["timer"]["lateness_ms"][stat], results["level"]["lateness_ms"][stat]
            out[f"ratio_timer_level_{stat}"] = round(t / lv, 3) if t is not None and lv else None
        print(
            f"timer / level: p50 {out['ratio_timer_level_p50']}x, p99 {out['ratio_timer_level_p99']}x, "
            f"max {out['ratio_timer_level_max']}x"
        )
    if "timer" in results:
        r = results["timer"]
        p99 = r["lateness_ms"]["p99"]
        out["timer_p99_over_target"] = round(p99 / TARGET_P99_MS, 3) if p99 is not None else None
        out["target_met"] = bool(
            p99 is not None
            and p99 <= TARGET_P99_MS
            and r["missing"] == 0
            and r["duplicates"] == 0
            and r["early"] == 0
        )
        verdict = "met" if out["target_met"] else "MISSED"
        print(
            f"target (timer p99 <= {TARGET_P99_MS:.0f} ms, nothing missing, duplicated or early): {verdict} "
            f"(p99 / target {out['timer_p99_over_target']})"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
