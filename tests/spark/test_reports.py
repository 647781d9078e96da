"""The traffic and lag reports in a real local[2] session, against a real broker with
traffic these tests generate; every figure is checked against a count made independently
(from what was sent, from the broker's own answers, or from a plain-Python read)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.messagequeue import MessageQueue
from spark_reports.jobs import lag, traffic
from spark_reports.jobs.common import ReportParams, write_tables
from spark_reports.outputs import LAG_TABLES, TRAFFIC_TABLES, read_summary
from tests.console.conftest import Servers
from tests.servers import wait_for
from tests.spark.conftest import admin_run, create_topic, record_history

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
FAILING_GROUP = "traffic-failing"
READER_GROUP = "traffic-reader"


def minute_of(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms // 60_000 * 60, tz=dt.UTC)


def hour_of(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms // 3_600_000 * 3600, tz=dt.UTC)


def utc(value: dt.datetime) -> dt.datetime:
    """A timestamp read back from Parquet (naive UTC) as an aware UTC datetime."""
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def stored(servers: Servers, topic: str) -> list[Any]:
    """Every message of ``topic`` read in plain Python (no Spark): the independent count."""
    return admin_run(
        servers.namesrv_addr, lambda admin: admin.messages_by_time(topic, 0, 2**62, limit=100_000)
    )


def total(servers: Servers, topic: str) -> int:
    return admin_run(servers.namesrv_addr, lambda admin: admin.topic_stats(topic)).total_messages


@pytest.fixture(scope="module")
def traffic_run(
    spark: SparkSession, cluster: Servers, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Traffic of three producers into two topics, a group whose every attempt fails (retry
    and DLQ traffic), a group whose offsets move; then the traffic report over it."""
    history_dir = tmp_path_factory.mktemp("history")
    since = int(time.time() * 1000) - 1
    create_topic(cluster, "TrafficA", 4)
    create_topic(cluster, "TrafficB", 2)
    create_topic(cluster, "TrafficFail", 1)
    plan = {"p0": [("TrafficA", 120)], "p1": [("TrafficA", 80), ("TrafficB", 50)], "p2": [("TrafficB", 30)]}
    sent: list[dict[str, Any]] = []
    for name, sends in plan.items():
        config = ClientConfig(namesrv_addr=cluster.namesrv_addr, instance_name=name)
        with Producer(f"traffic-{name}", config=config) as producer:
            for topic, count in sends:
                for i in range(count):
                    tag = ("red", "green", "blue", None)[i % 4]
                    body = bytes([65 + i % 26]) * (10 + (i * 37) % 900)
                    producer.send(Message(topic, body, tags=tag))
                    sent.append({"producer": name, "topic": topic, "tag": tag, "size": len(body)})
    with Producer("traffic-fail-producer", cluster.namesrv_addr) as producer:
        for i in range(10):
            producer.send(Message("TrafficFail", b"doomed %d" % i, tags="doomed"))
    # Every attempt fails: the first goes back through %RETRY%, the second to %DLQ%.
    consumer = PushConsumer(FAILING_GROUP, cluster.namesrv_addr, max_reconsume_times=1)
    consumer.subscribe("TrafficFail").register_listener(lambda msgs: ConsumeStatus.RECONSUME_LATER)
    consumer.start()
    try:
        wait_for(lambda: _has_topic(cluster, f"%DLQ%{FAILING_GROUP}", 10), 60, "ten dead letters")
    finally:
        consumer.shutdown()
    # A group that reads all of TrafficB (its counters record what the broker handed it).
    reader = PushConsumer(READER_GROUP, cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    reader.subscribe("TrafficB").register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    reader.start()
    try:
        wait_for(
            lambda: (
                admin_run(
                    cluster.namesrv_addr, lambda admin: admin.consume_stats(READER_GROUP, "TrafficB")
                ).total_lag
                == 0
            ),
            60,
            "the reader to catch up",
        )
    finally:
        reader.shutdown()
    record_history(cluster, history_dir)
    until = int(time.time() * 1000) + 1
    params = ReportParams("default", cluster.namesrv_addr, str(history_dir), "", since, until)
    tables, summary = traffic.run(spark, params)
    rows = {name: [r.asDict() for r in df.collect()] for name, df in tables.items()}
    return {"sent": sent, "summary": summary, "rows": rows, "consumed": 80, "since": since}


def _has_topic(cluster: Servers, topic: str, count: int) -> bool:
    try:
        return total(cluster, topic) >= count
    except Exception:
        return False


def _commit(cluster: Servers, group: str, offsets: dict[MessageQueue, int]) -> None:
    admin_run(cluster.namesrv_addr, lambda admin: admin.update_consumer_offsets(group, offsets))


def test_traffic_per_topic_and_minute_equals_what_the_broker_stored(
    spark: SparkSession, cluster: Servers, traffic_run: dict[str, Any]
) -> None:
    rows = traffic_run["rows"]
    for topic in ("TrafficA", "TrafficB", "TrafficFail", f"%RETRY%{FAILING_GROUP}", f"%DLQ%{FAILING_GROUP}"):
        messages = stored(cluster, topic)
        per_minute: dict[dt.datetime, list[int]] = defaultdict(list)
        per_hour: dict[dt.datetime, list[int]] = defaultdict(list)
        for m in messages:
            per_minute[minute_of(m.store_timestamp)].append(len(m.body))
            per_hour[hour_of(m.store_timestamp)].append(len(m.body))
        for table, key, expected in (
            ("topic_minute", "minute", per_minute),
            ("topic_hour", "hour", per_hour),
        ):
            got = {utc(r[key]): r for r in rows[table] if r["topic"] == topic}
            assert set(got) == set(expected), (topic, table)
            for bucket, sizes in expected.items():
                row = got[bucket]
                assert (row["messages"], row["bytes"], row["max_size"]) == (
                    len(sizes),
                    sum(sizes),
                    max(sizes),
                )
                assert row["avg_size"] == pytest.approx(sum(sizes) / len(sizes))


def test_traffic_counts_sizes_tags_and_producers_as_sent(traffic_run: dict[str, Any]) -> None:
    sent, rows = traffic_run["sent"], traffic_run["rows"]
    for topic in ("TrafficA", "TrafficB"):
        mine = [s for s in sent if s["topic"] == topic]
        hours = [r for r in rows["topic_hour"] if r["topic"] == topic]
        assert sum(r["messages"] for r in hours) == len(mine)
        assert sum(r["bytes"] for r in hours) == sum(s["size"] for s in mine)
        assert max(r["max_size"] for r in hours) == max(s["size"] for s in mine)
        producers = Counter(s["producer"] for s in mine)
        assert max(r["producers"] for r in hours) == len(producers)
        top = sorted((r for r in rows["top_producers"] if r["topic"] == topic), key=lambda r: r["rank"])
        assert [r["messages"] for r in top] == sorted(producers.values(), reverse=True)
        assert all(r["producer"].startswith("127.0.0.1:") or ":" in r["producer"] for r in top)
        tags = Counter(s["tag"] or "" for s in mine)
        got = {r["tag"]: (r["messages"], r["rank"]) for r in rows["top_tags"] if r["topic"] == topic}
        assert {t: n for t, (n, _rank) in got.items()} == dict(tags)
        ranked = sorted(got, key=lambda t: got[t][1])
        assert ranked == sorted(tags, key=lambda t: (-tags[t], t))
        sizes = defaultdict(int)
        for s in mine:
            sizes[s["tag"] or ""] += s["size"]
        assert {r["tag"]: r["bytes"] for r in rows["top_tags"] if r["topic"] == topic} == dict(sizes)


def test_traffic_summary_retry_and_dlq_share_and_peak(cluster: Servers, traffic_run: dict[str, Any]) -> None:
    summary = traffic_run["summary"]
    topics = ("TrafficA", "TrafficB", "TrafficFail", f"%RETRY%{FAILING_GROUP}", f"%DLQ%{FAILING_GROUP}")
    counts = {t: total(cluster, t) for t in topics}
    assert counts[f"%DLQ%{FAILING_GROUP}"] == 10 and counts[f"%RETRY%{FAILING_GROUP}"] == 10
    everything = sum(counts.values())
    assert summary["messages"] == everything
    assert summary["retryMessages"] == 10 and summary["dlqMessages"] == 10
    assert summary["missingMessages"] == 0
    assert summary["retryShare"] == pytest.approx(10 / everything)
    assert summary["dlqShare"] == pytest.approx(10 / everything)
    assert set(topics) <= set(summary["topics"])
    per_minute: Counter[dt.datetime] = Counter()
    for topic in topics:
        for m in stored(cluster, topic):
            per_minute[minute_of(m.store_timestamp)] += 1
    peak_minute, peak = max(per_minute.items(), key=lambda item: (item[1], -item[0].timestamp()))
    assert summary["peakMinute"] == {
        "minute": int(peak_minute.timestamp() * 1000),
        "messages": peak,
    }


def test_consumption_per_group_is_what_the_broker_handed_it(traffic_run: dict[str, Any]) -> None:
    rows = [r for r in traffic_run["rows"]["consumption_minute"] if r["group"] == READER_GROUP]
    assert sum(r["consumed"] for r in rows) == traffic_run["consumed"]  # all of TrafficB
    assert {r["topic"] for r in rows} == {"TrafficB"}
    failing = [r for r in traffic_run["rows"]["consumption_minute"] if r["group"] == FAILING_GROUP]
    # ten handed out from TrafficFail, then each once more from the retry topic
    assert {r["topic"]: r["consumed"] for r in failing} == {"TrafficFail": 10, f"%RETRY%{FAILING_GROUP}": 10}
    assert traffic_run["summary"]["consumed"] >= traffic_run["consumed"] + 20


def test_producer_groups_are_counted_per_topic(traffic_run: dict[str, Any]) -> None:
    """The groups, not their connections: the brokers count what each group had stored."""
    rows = traffic_run["rows"]["producer_groups"]
    by_topic: dict[str, dict[str, int]] = defaultdict(dict)
    for r in rows:
        by_topic[r["topic"]][r["group"]] = r["messages"]
    assert by_topic["TrafficA"] == {"traffic-p0": 120, "traffic-p1": 80}
    assert by_topic["TrafficB"] == {"traffic-p1": 50, "traffic-p2": 30}
    assert by_topic["TrafficFail"] == {"traffic-fail-producer": 10}
    ranks = sorted((r["rank"], r["group"]) for r in rows if r["topic"] == "TrafficA")
    assert ranks == [(1, "traffic-p0"), (2, "traffic-p1")]
    assert traffic_run["summary"]["producerGroups"] >= 4


@pytest.fixture(scope="module")
def lag_run(
    spark: SparkSession, cluster: Servers, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """Three snapshots 1.2 s apart: ``lag-group`` consumes part of what arrives (lag grows),
    ``idle-group`` never moves (stalled); consume stats read at each snapshot."""
    history_dir = tmp_path_factory.mktemp("lag-history")
    create_topic(cluster, "LagTopic", 2)
    since = int(time.time() * 1000) - 1
    stats, stamps = [], []
    with Producer("lag-producer", cluster.namesrv_addr) as producer:
        for step in range(3):
            for i in range(40):
                producer.send(Message("LagTopic", b"lag %d %d" % (step, i)))
            wait_for(lambda step=step: total(cluster, "LagTopic") == 40 * (step + 1), 30, "stored")
            queues = admin_run(cluster.namesrv_addr, lambda admin: admin.topic_stats("LagTopic")).queues
            if step < 2:
                _commit(cluster, "lag-group", {q.queue: 10 * (step + 1) for q in queues})
            if step == 0:
                _commit(cluster, "idle-group", {q.queue: 5 for q in queues})
            stamps.append(record_history(cluster, history_dir))
            stats.append(
                {
                    group: admin_run(
                        cluster.namesrv_addr, lambda admin, g=group: admin.consume_stats(g, "LagTopic")
                    )
                    for group in ("lag-group", "idle-group")
                }
            )
            time.sleep(1.2)
    until = int(time.time() * 1000)
    params = ReportParams(
        "default", cluster.namesrv_addr, str(history_dir), "", since, until, bucket_seconds=1
    )
    tables, summary = lag.run(spark, params)
    rows = {name: [r.asDict() for r in df.collect()] for name, df in tables.items()}
    return {"stats": stats, "stamps": stamps, "rows": rows, "summary": summary}


def test_lag_per_queue_matches_the_brokers_consume_stats_at_each_instant(
    cluster: Servers, lag_run: dict[str, Any]
) -> None:
    rows = lag_run["rows"]["lag_queue"]
    for stamp, stats in zip(lag_run["stamps"], lag_run["stats"], strict=True):
        at = dt.datetime.fromtimestamp(stamp / 1000, tz=dt.UTC)
        for group, consume in stats.items():
            got = {
                r["queue_id"]: r
                for r in rows
                if r["group"] == group and utc(r["ts"]) == at and r["topic"] == "LagTopic"
            }
            assert len(got) == len(consume.queues) == 2
            for q in consume.queues:
                row = got[q.queue.queue_id]
                assert (row["broker_offset"], row["consumer_offset"], row["lag"]) == (
                    q.broker_offset,
                    q.consumer_offset,
                    q.lag,
                )
                # Seconds behind: the snapshot's time less the store time of the message at
                # the committed offset, read here with a plain pull.
                msgs, _ = admin_run(
                    cluster.namesrv_addr,
                    lambda admin, q=q: admin.browse_queue(
                        cluster.broker_addr, q.queue, q.consumer_offset, q.consumer_offset + 1, 1
                    ),
                )
                assert row["seconds_behind"] == pytest.approx((stamp - msgs[0].store_timestamp) / 1000)


def test_lag_per_group_sums_queues_and_has_rates_from_the_offsets(lag_run: dict[str, Any]) -> None:
    groups = sorted(
        (r for r in lag_run["rows"]["lag_group"] if r["group"] == "lag-group"), key=lambda r: r["ts"]
    )
    stats = [s["lag-group"] for s in lag_run["stats"]]
    assert [r["lag"] for r in groups] == [s.total_lag for s in stats]
    stamps = lag_run["stamps"]
    for i in (1, 2):
        seconds = (stamps[i] - stamps[i - 1]) / 1000
        consumed = sum(q.consumer_offset for q in stats[i].queues) - sum(
            q.consumer_offset for q in stats[i - 1].queues
        )
        produced = sum(q.broker_offset for q in stats[i].queues) - sum(
            q.broker_offset for q in stats[i - 1].queues
        )
        assert groups[i]["consume_rate"] == pytest.approx(consumed / seconds, rel=1e-3)
        assert groups[i]["produce_rate"] == pytest.approx(produced / seconds, rel=1e-3)
        assert groups[i]["drain_seconds"] is None  # producing faster than consuming: never drains


def test_lag_trend_flags_the_growing_and_the_stalled_group(lag_run: dict[str, Any]) -> None:
    trend = {r["group"]: r for r in lag_run["rows"]["lag_trend"] if r["topic"] == "LagTopic"}
    first, last = lag_run["stats"][0], lag_run["stats"][-1]
    growing, idle = trend["lag-group"], trend["idle-group"]
    assert (growing["first_lag"], growing["last_lag"]) == (
        first["lag-group"].total_lag,
        last["lag-group"].total_lag,
    )
    assert growing["samples"] == 3 and growing["growing"] and not growing["stalled"]
    assert idle["growing"] and idle["stalled"] and idle["consume_rate"] == 0
    assert growing["lag_slope_per_minute"] > 0
    summary = lag_run["summary"]
    assert {g["group"] for g in summary["growing"]} >= {"lag-group", "idle-group"}
    assert [g["group"] for g in summary["stalled"] if g["topic"] == "LagTopic"] == ["idle-group"]
    assert summary["worst"][0]["lag"] == max(s.total_lag for s in last.values())


def test_a_period_without_history_or_traffic_gives_empty_tables(
    spark: SparkSession, cluster: Servers, tmp_path: Path
) -> None:
    """Years ago: no messages, no history directory at all; every table written, empty."""
    params = ReportParams(
        "default", cluster.namesrv_addr, str(tmp_path / "none"), str(tmp_path / "out"), 0, 1000
    )
    for job, columns in ((traffic, TRAFFIC_TABLES), (lag, LAG_TABLES)):
        tables, summary = job.run(spark, params)
        write_tables(params.out, tables, columns)
        for name, cols in columns.items():
            table = pq.read_table(tmp_path / "out" / name)
            assert table.num_rows == 0 and tuple(table.column_names) == cols
    assert summary["groups"] == 0 and summary["worst"] == []


def run_cli(*args: str) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [sys.executable, "-m", "spark_reports", *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def test_the_cli_writes_tables_and_summary_and_reports_progress(cluster: Servers, tmp_path: Path) -> None:
    create_topic(cluster, "CliTopic", 1)
    with Producer("cli-producer", cluster.namesrv_addr) as producer:
        for i in range(25):
            producer.send(Message("CliTopic", b"cli %d" % i))
    wait_for(lambda: total(cluster, "CliTopic") == 25, 30, "the consume queue to hold every message")
    now = int(time.time() * 1000)
    out = tmp_path / "run"
    code, events = run_cli(
        "traffic",
        "--namesrv",
        cluster.namesrv_addr,
        "--history",
        str(tmp_path / "h"),
        "--out",
        str(out),
        "--since",
        str(now - 600_000),
        "--until",
        str(now + 1000),
        "--topics",
        "CliTopic",
        "--master",
        "local[1]",
    )
    assert code == 0, events
    assert events[-1]["event"] == "done" and events[-1]["summary"]["messages"] == 25
    progress = [e for e in events if e["event"] == "progress"]
    assert progress and all(0 <= e["stagesDone"] <= e["stagesTotal"] for e in progress)
    assert read_summary(out) == events[-1]["summary"]
    assert pq.read_table(out / "topic_hour").column("messages").to_pylist() == [25]


def test_the_cli_says_what_is_wrong(cluster: Servers, tmp_path: Path) -> None:
    common = ["--history", str(tmp_path), "--out", str(tmp_path / "o"), "--master", "local[1]"]
    code, events = run_cli(
        "traffic", "--namesrv", cluster.namesrv_addr, "--since", "10", "--until", "5", *common
    )
    assert code == 2 and "ends (5) before it begins (10)" in events[-1]["message"]
    code, events = run_cli(
        "traffic",
        "--namesrv",
        cluster.namesrv_addr,
        "--since",
        "0",
        "--until",
        "5",
        "--topics",
        "Nope",
        *common,
    )
    assert code == 2 and events[-1]["event"] == "error" and "Nope" in events[-1]["message"]
    code, events = run_cli(
        "lag", "--namesrv", cluster.namesrv_addr, "--since", "soon", "--until", "5", *common
    )
    assert code == 2 and "neither epoch milliseconds nor an ISO 8601 time" in events[-1]["message"]
    assert not (tmp_path / "o" / "summary.json").exists()


def test_one_snapshot_is_a_trend_without_slope_not_an_error(spark: SparkSession) -> None:
    """A period with a single snapshot (or all snapshots in one bucket): no variance in time,
    so no slope and no rate; Spark's ANSI division by zero must not fail the report."""
    from spark_reports.schemas import OFFSETS_SCHEMA

    rows = [(1_000_000, "default", "b", "127.0.0.1:1", "g", "T", q, 5, 9, 0, 999_000) for q in (0, 1)]
    offsets = spark.createDataFrame(rows, OFFSETS_SCHEMA)
    trend = lag.lag_trend(lag.lag_group(lag.lag_queue(offsets), 60)).collect()
    assert len(trend) == 1
    row = trend[0]
    assert (row["samples"], row["first_lag"], row["last_lag"], row["lag_slope_per_minute"]) == (1, 8, 8, 0.0)
    assert row["consume_rate"] is None and not row["growing"] and not row["stalled"]
    assert row["max_seconds_behind"] == 1.0


def _offsets(spark: SparkSession, rows: list[tuple[Any, ...]]) -> Any:
    """History rows (ts, broker, queue, consumer offset, broker offset, min offset, store ts)
    of group g on topic T, as the offset-persistence job writes them."""
    from spark_reports.schemas import OFFSETS_SCHEMA

    full = [(ts, "default", b, "127.0.0.1:1", "g", "T", q, c, p, m, st) for ts, b, q, c, p, m, st in rows]
    return spark.createDataFrame(full, OFFSETS_SCHEMA)


def test_rates_come_from_each_queues_own_increases(spark: SparkSession) -> None:
    """Broker b2 misses the middle snapshot (it did not answer): no spike when it is back,
    and a reset backwards on one queue hides nothing of the other's progress."""
    rows = [
        (0, "b1", 0, 0, 100, 0, 1), (0, "b2", 0, 0, 100, 0, 1),
        (10_000, "b1", 0, 50, 200, 0, 1),  # b2 absent
        (20_000, "b1", 0, 40, 300, 0, 1), (20_000, "b2", 0, 100, 300, 0, 1),  # b1 reset back to 40
    ]  # fmt: skip
    groups = sorted(lag.lag_group(lag.lag_queue(_offsets(spark, rows)), 10).collect(), key=lambda r: r["ts"])
    assert [r["consume_rate"] for r in groups] == [None, 5.0, 0.0 + 100 / 20]
    assert [r["produce_rate"] for r in groups] == [None, 10.0, 10.0 + 200 / 20]
    trend = lag.lag_trend(lag.lag_group(lag.lag_queue(_offsets(spark, rows)), 10)).first()
    assert trend["consume_rate"] == pytest.approx((50 + 0 + 100) / 20)


def test_an_expired_committed_offset_counts_from_the_first_stored_message(spark: SparkSession) -> None:
    """Retention removed offsets 0-79; the group is committed at 10: 20 messages are left to
    consume, not 90, and since when is unknown when the broker could not say."""
    rows = [(5_000, "b", 0, 10, 100, 80, 0), (5_000, "b", 1, 100, 100, 0, 0)]
    queues = {r["queue_id"]: r for r in lag.lag_queue(_offsets(spark, rows)).collect()}
    assert (queues[0]["lag"], queues[0]["seconds_behind"]) == (20, None)
    assert (queues[1]["lag"], queues[1]["seconds_behind"]) == (0, 0.0)


def test_a_group_that_stops_at_the_end_of_the_period_is_stalled(spark: SparkSession) -> None:
    """Busy at first, then no committed offset moves over the last three snapshots while
    the lag grows: stalled, although its rate over the whole period is not zero."""
    rows = [
        (t * 10_000, "b", 0, c, p, 0, 1) for t, (c, p) in enumerate([(0, 10), (50, 60), (50, 90), (50, 120)])
    ]
    trend = lag.lag_trend(lag.lag_group(lag.lag_queue(_offsets(spark, rows)), 10)).first()
    assert trend["stalled"] and trend["growing"] and trend["consume_rate"] > 0


def test_messages_planned_but_gone_when_read_are_counted(spark: SparkSession) -> None:
    """Queue 0 lost 3 of its 10 planned messages before the read (expiry); queue 1 gained 2
    stored meanwhile (not missing); queue 2 was planned and had nothing left."""
    from spark_reports.planner import QueueRange

    planned = [QueueRange("b", "a:1", "T", q, 0, 10) for q in (0, 1, 2)]
    rows = [("b", "T", 0)] * 7 + [("b", "T", 1)] * 12
    read = spark.createDataFrame(rows, "broker string, topic string, queue_id int")
    assert traffic.missing_messages(planned, read) == 3 + 10
