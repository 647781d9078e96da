"""Where a paced message's send-to-listener time goes, stage by stage, in one run.

    python bench/timeline.py [--rate 2000] [--seconds 5] [--runs 1]

bench/peers.py's latency scenario for Quiver (one Producer sending stamped 1 KiB messages
at a fixed rate, one PushConsumer with default settings long-polling the topic's 8 queues)
with timestamps taken along the way.  Every process on the machine reads the same
monotonic clock, so the stamp a message carries (its send time) can be compared with
times taken in the broker (bench/timeline_probe.py wraps its send handler and its pull
answer) and in the consumer (its decode of a pull's answer, its hand-over to a consume
thread, the listener's call).  Stages, each a p50 and p90 over the measured messages:

1. to the broker: the producer's send path, the loopback, the broker's wake-up, read and
   frame decode, up to its send handler;
2. the broker's send handler: header, checks, append, dispatch (a held pull is woken),
   the answer built;
3. to the pull's answer: the woken pull resumes on the broker's loop and builds its answer;
5. to the consumer: that answer written, the consumer's loop woken, read and decoded;
5. consumer, decoded to handed over: the batch checked, queued for a consume thread;
6. consumer, handed over to the listener: a consume thread woken and given the GIL;

and the totals: the producer's acknowledgement and send-to-listener.  The wrappers cost
about a microsecond per call each, so the totals are a little above bench/peers.py's.
Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # this checkout's broker_core

import orjson  # noqa: E402
from lateness import send_until_routed  # noqa: E402  (bench/lateness.py)
from peerbench.measure import Latencies, pace  # noqa: E402
from peerbench.workload import QUIVER_PULL_BATCH, QUIVER_QUEUES, STAMP, Settings  # noqa: E402
from servers import create_topic, describe_probe, machine_probe, percentile, settle, start_cluster  # noqa: E402

from broker_core.client.config import ClientConfig  # noqa: E402
from broker_core.client.consumer import push  # noqa: E402
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer  # noqa: E402
from broker_core.client.consumer.workers import ConsumeWorkers  # noqa: E402
from broker_core.client.message import Message  # noqa: E402
from broker_core.client.producer.producer import Producer  # noqa: E402
from broker_core.remoting.blocking import BlockingConnection  # noqa: E402

TOPIC = "TimelineTopic"
STAGES = (
    ("producer", "1. producer: message, queue, header, up to the request"),
    ("to_broker", "2. to the broker (encode, write, wake-up, read, decode)"),
    ("send_handler", "3. broker: send handler (append, dispatch, answer)"),
    ("to_pull_answer", "4. broker: the woken pull builds its answer"),
    ("to_consumer", "5. to the consumer (write, wake-up, read, decode)"),
    ("to_hand_over", "6. consumer: decoded to handed over"),
    ("to_listener", "7. consumer: handed over to the listener"),
    ("ack", "producer's acknowledgement (total)"),
    ("end_to_end", "send to listener (total)"),
)


class ClientTimes:
    """The consumer's side: when each stamped message was decoded, handed over, consumed."""

    def __init__(self) -> None:
        self.decoded: dict[int, int] = {}
        self.handed: dict[int, int] = {}
        self.consumed: dict[int, int] = {}
        self.requested: dict[int, int] = {}
        self.acked: dict[int, int] = {}

    def install(self) -> None:
        """Wrap the producer's blocking request, the consumer's record decoder and its
        consume pool's ``submit``."""
        request = BlockingConnection.request
        decode = push.iter_records
        submit = ConsumeWorkers.submit
        requested, decoded, handed = self.requested, self.decoded, self.handed

        def timed_request(conn: BlockingConnection, cmd: Any, timeout: float) -> Any:
            body = cmd.body
            if body is not None and len(body) >= STAMP.size:
                requested[STAMP.unpack_from(body)[0]] = time.perf_counter_ns()
            return request(conn, cmd, timeout)

        def timed_decode(body: bytes) -> Any:
            now = time.perf_counter_ns()
            records = list(decode(body))
            for msg in records:
                if len(msg.body) >= STAMP.size:
                    decoded[STAMP.unpack_from(msg.body)[0]] = now
            return records

        def timed_submit(pool: ConsumeWorkers, fn: Any, *args: Any) -> None:
            now = time.perf_counter_ns()
            for msg in args[-1] if args and isinstance(args[-1], list) else ():
                if len(msg.body) >= STAMP.size:
                    handed[STAMP.unpack_from(msg.body)[0]] = now
            submit(pool, fn, *args)

        BlockingConnection.request = timed_request  # type: ignore[method-assign]
        push.iter_records = timed_decode  # type: ignore[assignment]
        ConsumeWorkers.submit = timed_submit  # type: ignore[method-assign]


def run_once(work: Path, s: Settings) -> dict[str, Any]:
    """One broker, one paced run; the stages' p50 and p90 in µs."""
    out = work / "broker-times.json"
    namesrv, broker = start_cluster(work, [sys.executable, str(HERE / "timeline_probe.py"), str(out)])
    times = ClientTimes()
    times.install()
    try:
        create_topic(broker.addr, TOPIC, QUIVER_QUEUES)
        lat = Latencies(s)

        def listener(msgs: list[Any]) -> ConsumeStatus:
            now = time.perf_counter_ns()
            for msg in msgs:
                if len(msg.body) >= STAMP.size:
                    times.consumed[STAMP.unpack_from(msg.body)[0]] = now
                    lat.got(msg.body)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "TimelineGroup",
            namesrv.addr,
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            consume_message_batch_max_size=QUIVER_PULL_BATCH,
        )
        consumer.subscribe(TOPIC, "*").register_listener(listener)
        producer = Producer("TimelineProducer", namesrv.addr, config=ClientConfig(namesrv_addr=namesrv.addr))
        producer.start()
        send_until_routed(producer, TOPIC)  # the route's first lookup; not a stamped message
        consumer.start()
        settle(broker)

        def send(body: bytes) -> None:
            producer.send(Message(TOPIC, body))
            times.acked[STAMP.unpack_from(body)[0]] = time.perf_counter_ns()

        lat = Latencies(s)
        sent, errors, first_error = pace(lat, send)
        lat.wait_all(sent)
        producer.shutdown()
        threading.Thread(target=consumer.shutdown, daemon=True).start()
        time.sleep(0.2)
    finally:
        broker.stop()
        namesrv.stop()
    seen = orjson.loads(out.read_bytes())
    handled = {stamp: (entered, returned) for stamp, entered, returned in seen["sends"]}
    answered = {stamp: replied for stamp, replied in seen["pulls"]}
    stages: dict[str, list[float]] = {name: [] for name, _ in STAGES}
    for stamp, acked in times.acked.items():
        if stamp < lat.window_ns or stamp not in handled or stamp not in answered:
            continue
        client = (times.requested, times.decoded, times.handed, times.consumed)
        if any(stamp not in seen_at for seen_at in client):
            continue
        entered, returned = handled[stamp]
        points = {
            "producer": times.requested[stamp] - stamp,
            "to_broker": entered - times.requested[stamp],
            "send_handler": returned - entered,
            "to_pull_answer": answered[stamp] - returned,
            "to_consumer": times.decoded[stamp] - answered[stamp],
            "to_hand_over": times.handed[stamp] - times.decoded[stamp],
            "to_listener": times.consumed[stamp] - times.handed[stamp],
            "ack": acked - stamp,
            "end_to_end": times.consumed[stamp] - stamp,
        }
        for name, ns in points.items():
            stages[name].append(ns / 1000)
    result: dict[str, Any] = {"sent": sent, "send_errors": errors, "first_error": first_error}
    result["measured"] = len(stages["end_to_end"])
    for name, values in stages.items():
        values.sort()
        result[name] = {
            "p50_us": round(percentile(values, 0.5), 1),
            "p90_us": round(percentile(values, 0.9), 1),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=2000, help="messages a second (default 2,000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds (default 5)")
    parser.add_argument("--runs", type=int, default=1, help="runs, each with a fresh broker (default 1)")
    args = parser.parse_args()
    s = Settings(latency_rate=args.rate, latency_warmup_s=1.0, latency_s=args.seconds)
    probe = machine_probe()
    print(f"quiver latency timeline: {args.rate:,} msgs/s for {args.seconds:g} s, {args.runs} run(s)")
    print(describe_probe(probe))
    runs = []
    for _ in range(args.runs):
        work = Path(tempfile.mkdtemp(prefix="quiver-bench-timeline-"))
        try:
            runs.append(run_once(work, s))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'stage':60s} " + "  ".join(f"run {i + 1} p50 / p90 µs" for i in range(len(runs))))
    for name, label in STAGES:
        cells = "  ".join(f"{run[name]['p50_us']:8.1f} / {run[name]['p90_us']:7.1f}     " for run in runs)
        print(f"{label:60s} {cells}")
    print(f"{'measured messages':60s} " + "  ".join(f"{run['measured']:18,d}" for run in runs))
    print(
        json.dumps({"bench": "timeline", "rate": args.rate, "seconds": args.seconds, **probe, "runs": runs})
    )


if __name__ == "__main__":
    main()
