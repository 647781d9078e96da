"""The Spark reports at scale: the ``quiver`` source's scan rate beside a direct read, and
the wall time of both reports, in one run.

    .venv/bin/python bench/reports.py [--messages 1000000] [--queues 8] [--quick]

Why (issue 7): the reports read the message log through the broker protocol; how fast
that is, next to reading the same messages with our own Python consumer, and how it
scales with Spark's cores, decides how large a period a report can cover.

Setup: a nameserver and a broker as child processes (bench/servers.py); ``--messages``
messages (100-400-byte bodies, 8 tags) sent in batches of 32 to a topic of ``--queues``
queues, in 40 rounds; after each round 6 consumer groups commit offsets (each a different
share of what is stored) and the offset-persistence job's history row is written, as the
platform does every 5 s.

Figures, each over every message of the topic:
* ``direct``: our ``PullConsumer`` reading each queue from its first to its last offset,
  32 messages a pull, one pull at a time (what an application would do);
* ``rangescan``: the same read through ``broker_core.client.rangescan`` (8 pulls in
  flight), in this process: what one Spark task does, without Spark;
* ``spark local[1]`` and ``spark local[2]``: ``spark.read.format("quiver")`` summing
  ``body_size`` (every row built and handed to Spark); session start not counted, a
  warm-up query first;
* ``traffic report`` and ``lag report`` on local[2]: the job's ``run`` and the Parquet
  writes (``python -m spark_reports`` adds the session start, reported separately);
* ``lag report over a day``: the same job over a day of history rows, one every 5 s for
  each of the benchmark's group queues (the last real snapshot's rows repeated with
  moving offsets: the input size a daily lag report meets, ~830 k rows).
* ``small window`` (issue 20): a traffic report over a window of 10,000 messages, end to
  end as the platform runs it, session start included: a one-shot ``python -m
  spark_reports`` and the warm session (``python -m spark_reports serve``) asked twice (its
  first run starts Spark, the next finds it warm); on ``local[*]`` and on a standalone
  master and worker started here from the installed pyspark (``spark_reports.localcluster``,
  a worker whose Python has none of this project).
Then the ratios, and one JSON line of every figure last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from servers import create_topic, start_cluster  # bench/servers.py

from broker_core.client.admin import AdminClient
from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.client.rangescan import ScanStats, scan_queue

TOPIC = "ReportsBench"
GROUPS = 6
ROUNDS = 40


def fill(namesrv: str, broker: str, messages: int, history: Path) -> float:
    """Send the messages in ROUNDS rounds, with group offsets and a history row after each."""
    started = time.perf_counter()
    per_round = max(1, messages // ROUNDS)
    sent = 0
    with Producer("bench-reports", namesrv) as producer:
        for _round in range(ROUNDS):
            batch: list[Message] = []
            for _ in range(min(per_round, messages - sent)):
                size = 100 + (sent * 37) % 300
                batch.append(Message(TOPIC, b"r" * size, tags=f"tag{sent % 8}"))
                sent += 1
                if len(batch) == 32:
                    producer.send_batch(batch)
                    batch = []
            if batch:
                producer.send_batch(batch)
            asyncio.run(_commit_and_snapshot(namesrv, broker, history))
        while sent < messages:  # the remainder of an uneven split
            producer.send(Message(TOPIC, b"r" * 100, tags="tag0"))
            sent += 1
    return time.perf_counter() - started


async def _commit_and_snapshot(namesrv: str, broker: str, history: Path) -> None:
    from console.maintenance import history as history_files

    async with AdminClient(namesrv) as admin:
        stats = await admin.topic_stats(TOPIC)
        for g in range(GROUPS):
            share = (g + 1) / (GROUPS + 1)
            offsets = {q.queue: int(q.max_offset * share) for q in stats.queues}
            await admin.update_consumer_offsets(f"bench-group-{g}", offsets)
        snapshot = await admin.offset_snapshot(broker)
        history_files.append_snapshot(history, snapshot, "default", broker)


def direct_read(namesrv: str, queues: int) -> tuple[int, float]:
    """Every message through our PullConsumer, one pull of 32 at a time."""
    consumer = PullConsumer("bench-reports-direct", namesrv).start()
    count = 0
    started = time.perf_counter()
    try:
        for mq in consumer.fetch_queues(TOPIC):
            offset, end = consumer.min_offset(mq), consumer.max_offset(mq)
            while offset < end:
                result = consumer.pull(mq, "*", offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                count += len(result.messages)
                offset = result.next_begin_offset
    finally:
        consumer.shutdown()
    return count, time.perf_counter() - started


def rangescan_read(namesrv: str, broker: str, queues: int) -> tuple[int, float]:
    """Every message through rangescan (pipelined pulls), one queue after another."""

    async def go() -> int:
        async with AdminClient(namesrv) as admin:
            stats = await admin.topic_stats(TOPIC)
            total = 0
            for q in stats.queues:
                scan = ScanStats()
                async for batch in scan_queue(admin, broker, q.queue, q.min_offset, q.max_offset, stats=scan):
                    total += len(batch)
            return total

    started = time.perf_counter()
    count = asyncio.run(go())
    return count, time.perf_counter() - started


def spark_scan(namesrv: str, master: str) -> tuple[int, float, float]:
    """(messages, seconds, session start seconds) for a full scan on ``master``."""
    from pyspark.sql import functions as F

    from spark_reports.session import get_session

    t0 = time.perf_counter()
    spark = get_session(f"bench-{master}", master=master)
    start_s = time.perf_counter() - t0
    if spark.sparkContext.master != master:
        raise SystemExit(f"asked for {master}, the session runs {spark.sparkContext.master}")
    reader = spark.read.format("quiver").option("namesrv", namesrv).option("topics", TOPIC)
    # Warm-up: the Python workers start and plan a scan that finds nothing newer than now.
    reader.option("startTime", str(int(time.time() * 1000) + 60_000)).load().collect()
    reader = spark.read.format("quiver").option("namesrv", namesrv).option("topics", TOPIC)
    started = time.perf_counter()
    row = reader.load().agg(F.count(F.lit(1)).alias("n"), F.sum("body_size").alias("b")).first()
    seconds = time.perf_counter() - started
    return int(row["n"]), seconds, start_s


def reports(namesrv: str, history: Path, out: Path, since: int, until: int) -> dict[str, float]:
    """Both reports on the running (local[2]) session; seconds each, tables written."""
    from pyspark.sql import SparkSession

    from spark_reports.jobs import lag, traffic
    from spark_reports.jobs.common import ReportParams, write_tables
    from spark_reports.outputs import LAG_TABLES, TRAFFIC_TABLES

    spark = SparkSession.getActiveSession()
    assert spark is not None
    figures = {}
    for name, job, columns in (("traffic", traffic, TRAFFIC_TABLES), ("lag", lag, LAG_TABLES)):
        params = ReportParams("default", namesrv, str(history), str(out / name), since, until)
        started = time.perf_counter()
        tables, summary = job.run(spark, params)
        write_tables(params.out, tables, columns)
        figures[name] = time.perf_counter() - started
        figures[f"{name}_input_rows"] = summary["inputRows"]
    return figures


SMALL = 10_000
SMALL_TOPIC = "ReportsBenchSmall"


def small_window(namesrv: str, broker: str, work: Path) -> dict[str, Any]:
    """A traffic report over a window of ``SMALL`` messages, end to end as the platform runs
    it: a one-shot ``python -m spark_reports`` (Spark started for it), and the warm session
    (``python -m spark_reports serve``) asked twice, the first time starting Spark; each on
    ``local[*]`` and on a standalone master and worker started here (bare worker Python)."""
    from spark_reports.localcluster import standalone_cluster

    create_topic(broker, SMALL_TOPIC, 8)
    time.sleep(1.0)
    since = int(time.time() * 1000) - 1
    with Producer("bench-reports-small", namesrv) as producer:
        for start in range(0, SMALL, 32):
            batch = range(start, min(start + 32, SMALL))
            messages = [Message(SMALL_TOPIC, b"s" * (100 + i % 300), tags=f"t{i % 4}") for i in batch]
            producer.send_batch(messages)
    asyncio.run(_commit_and_snapshot(namesrv, broker, work / "history"))
    until = int(time.time() * 1000) + 1
    argv = [
        "traffic", "--cluster", "default", "--namesrv", namesrv, "--history", str(work / "history"),
        "--since", str(since), "--until", str(until),
    ]  # fmt: skip
    figures: dict[str, Any] = {"small_messages": SMALL}
    masters = {"local": "local[*]"}
    with standalone_cluster(work / "standalone") as cluster:
        masters["standalone"] = cluster.master
        for name, master in masters.items():
            out = work / f"small-{name}"
            started = time.perf_counter()
            cold = [sys.executable, "-m", "spark_reports", *argv, "--out", str(out / "cold")]
            cold += ["--master", master]
            done = subprocess.run(cold, capture_output=True, text=True, check=False)
            figures[f"small_{name}_cold_s"] = time.perf_counter() - started
            last = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
            if last["event"] != "done" or last["summary"]["messages"] != SMALL:
                raise SystemExit(f"the small {name} report failed: {last}")
            figures.update(_warm_runs(name, master, argv, out))
    return figures


def _warm_runs(name: str, master: str, argv: list[str], out: Path) -> dict[str, float]:
    """The warm session for ``master`` asked twice: seconds from asking to ``done``."""
    from spark_reports.warm import request

    socket_path = out / "warm.sock"
    out.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "spark_reports", "serve", "--socket", str(socket_path), "--master", master],
        stdout=subprocess.DEVNULL, stderr=(out / "serve.log").open("wb"),
    )  # fmt: skip
    figures = {}
    try:
        deadline = time.monotonic() + 60
        while not socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        for attempt in ("first", "second"):
            started = time.perf_counter()
            conn = request(socket_path, [*argv, "--out", str(out / attempt), "--master", master], 600)
            conn.settimeout(None)
            with conn, conn.makefile("r") as lines:
                events = [json.loads(line) for line in lines if line.startswith("{")]
            figures[f"small_{name}_warm_{attempt}_s"] = time.perf_counter() - started
            if events[-1]["event"] != "done" or events[-1]["summary"]["messages"] != SMALL:
                raise SystemExit(f"the warm small {name} report failed: {events[-1]}")
    finally:
        server.terminate()
        server.wait(30)
    return figures


def day_of_history(history: Path, out: Path) -> tuple[int, int, int]:
    """A day of the offset-persistence job's rows (every 5 s, as ``manage.py up`` runs it),
    written in its file layout: each of the last real snapshot's rows again every 5 s, with
    offsets that keep moving (producers and groups advancing, one group falling behind).
    Returns (rows, since ms, until ms)."""
    import datetime as dt

    import orjson

    last: dict[tuple[str, str, int], dict[str, Any]] = {}
    for path in sorted((history / "offsets").glob("date=*/*.jsonl")):
        for line in path.read_bytes().splitlines():
            row = orjson.loads(line)
            last[(row["group"], row["topic"], row["queue_id"])] = row
    day = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0) - dt.timedelta(days=2)
    since = int(day.timestamp() * 1000)
    part = out / "offsets" / f"date={day.date().isoformat()}"
    part.mkdir(parents=True)
    rows = 0
    with (part / "bench-broker.jsonl").open("wb") as f:
        for step in range(86_400 // 5):
            ts = since + step * 5000
            chunk = []
            for (group, _topic, _q), row in last.items():
                produced = row["broker_offset"] + step * 10
                behind = 50 + (step * (3 if group.endswith("-0") else 1)) % 500
                consumed = max(0, produced - behind)
                chunk.append(
                    orjson.dumps(
                        {
                            **row,
                            "ts": ts,
                            "broker_offset": produced,
                            "consumer_offset": consumed,
                            "store_timestamp": ts - behind * 100,
                        }
                    )
                )
            f.write(b"\n".join(chunk) + b"\n")
            rows += len(chunk)
    return rows, since, since + 86_400_000


def lag_day(namesrv: str, history: Path, out: Path) -> dict[str, float]:
    """The lag report over a day of history (local[2])."""
    from pyspark.sql import SparkSession

    from spark_reports.jobs import lag
    from spark_reports.jobs.common import ReportParams, write_tables
    from spark_reports.outputs import LAG_TABLES

    rows, since, until = day_of_history(history, out / "day-history")
    spark = SparkSession.getActiveSession()
    assert spark is not None
    params = ReportParams("default", namesrv, str(out / "day-history"), str(out / "lag-day"), since, until)
    started = time.perf_counter()
    tables, summary = lag.run(spark, params)
    write_tables(params.out, tables, LAG_TABLES)
    return {
        "lag_day_rows": summary["inputRows"],
        "report_lag_day_s": time.perf_counter() - started,
        "lag_day_written_rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="100,000 messages")
    args = parser.parse_args()
    messages = 100_000 if args.quick else args.messages
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-reports-"))
    namesrv, broker = start_cluster(work, [])
    figures: dict[str, Any] = {"messages": messages, "queues": args.queues}
    try:
        create_topic(broker.addr, TOPIC, args.queues)
        time.sleep(1.0)  # the next registration carries the topic to the nameserver
        since = int(time.time() * 1000) - 1
        figures["fill_s"] = fill(namesrv.addr, broker.addr, messages, work / "history")
        until = int(time.time() * 1000) + 1
        print(f"filled {messages:,} messages in {figures['fill_s']:.1f} s", flush=True)

        n, s = direct_read(namesrv.addr, args.queues)
        figures.update(direct_messages=n, direct_s=s, direct_rate=n / s)
        n, s = rangescan_read(namesrv.addr, broker.addr, args.queues)
        figures.update(rangescan_messages=n, rangescan_s=s, rangescan_rate=n / s)
        from pyspark.sql import SparkSession

        for master in ("local[1]", "local[2]"):
            active = SparkSession.getActiveSession()
            if active is not None:
                active.stop()
            n, s, start_s = spark_scan(namesrv.addr, master)
            key = master.replace("[", "").replace("]", "")
            figures.update({f"spark_{key}_messages": n, f"spark_{key}_s": s, f"spark_{key}_rate": n / s})
            figures[f"spark_{key}_session_start_s"] = start_s
        rep = reports(namesrv.addr, work / "history", work / "reports", since, until)
        figures.update({f"report_{k}_s" if not k.endswith("rows") else k: v for k, v in rep.items()})
        figures.update(lag_day(namesrv.addr, work / "history", work))
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()  # the small window's runs start their own
        figures.update(small_window(namesrv.addr, broker.addr, work))
    finally:
        broker.stop()
        namesrv.stop()
        shutil.rmtree(work, ignore_errors=True)

    figures["ratio_spark1_vs_direct"] = figures["spark_local1_rate"] / figures["direct_rate"]
    figures["ratio_spark2_vs_direct"] = figures["spark_local2_rate"] / figures["direct_rate"]
    figures["ratio_spark2_vs_spark1"] = figures["spark_local2_rate"] / figures["spark_local1_rate"]
    figures["ratio_rangescan_vs_direct"] = figures["rangescan_rate"] / figures["direct_rate"]
    print()
    print(f"{'read':<28}{'messages':>12}{'seconds':>10}{'msgs/s':>12}")
    for label, key in (
        ("direct (PullConsumer)", "direct"),
        ("rangescan (8 in flight)", "rangescan"),
        ("spark local[1]", "spark_local1"),
        ("spark local[2]", "spark_local2"),
    ):
        n, s, rate = figures[key + "_messages"], figures[key + "_s"], figures[key + "_rate"]
        print(f"{label:<28}{n:>12,}{s:>10.2f}{rate:>12,.0f}")
    print(f"\ntraffic report over {messages:,} messages: {figures['report_traffic_s']:.1f} s")
    print(f"lag report over {figures['lag_input_rows']:,} history rows: {figures['report_lag_s']:.1f} s")
    print(
        f"lag report over a day of history ({figures['lag_day_rows']:,} rows, a snapshot every 5 s): "
        f"{figures['report_lag_day_s']:.1f} s"
    )
    print(f"traffic report over a window of {SMALL:,} messages, end to end (Spark's start included):")
    for name in ("local", "standalone"):
        first, second = figures[f"small_{name}_warm_first_s"], figures[f"small_{name}_warm_second_s"]
        print(
            f"  {name:<11} one-shot {figures[f'small_{name}_cold_s']:.1f} s; warm session: first run "
            f"{first:.1f} s, next {second:.1f} s"
        )
    figures["small_local_warm_target_met"] = figures["small_local_warm_second_s"] <= 10.0
    print(
        f"session start: local[1] {figures['spark_local1_session_start_s']:.1f} s, local[2] "
        f"{figures['spark_local2_session_start_s']:.1f} s"
    )
    print(
        f"ratios: spark local[1] / direct {figures['ratio_spark1_vs_direct']:.2f}, "
        f"local[2] / direct {figures['ratio_spark2_vs_direct']:.2f}, "
        f"local[2] / local[1] {figures['ratio_spark2_vs_spark1']:.2f}, "
        f"rangescan / direct {figures['ratio_rangescan_vs_direct']:.2f}"
    )
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
