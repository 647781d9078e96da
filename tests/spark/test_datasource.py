"""The ``quiver`` data source in a real local[2] Spark session against a real broker."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from broker_core.client.config import ClientConfig
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from spark_reports.datasource import read_range
from spark_reports.options import ScanOptions, SourceOptionError
from spark_reports.planner import plan
from tests.console.conftest import Servers, run_servers
from tests.servers import wait_for
from tests.spark.conftest import admin_run, create_topic

pytestmark = pytest.mark.slow

TOPIC = "SparkSource"
COUNT = 600


@pytest.fixture(scope="module")
def sent(cluster: Servers) -> list[tuple[str, bytes, str]]:
    """COUNT messages in TOPIC (4 queues): (tag, body, key) of each, in sending order."""
    create_topic(cluster, TOPIC, 4)
    out = []
    with Producer("spark-source-producer", cluster.namesrv_addr) as producer:
        for i in range(COUNT):
            tag, body, key = f"tag{i % 4}", f"message {i} ".encode() * (1 + i % 7), f"key-{i}"
            producer.send(Message(TOPIC, body, tags=tag, keys=key, properties={"seq": str(i)}))
            out.append((tag, body, key))
    wait_for(lambda: _stored(cluster) == COUNT, 30, "the consume queues to hold every message")
    return out


def _stored(cluster: Servers) -> int:
    return admin_run(cluster.namesrv_addr, lambda admin: admin.topic_stats(TOPIC)).total_messages


def load(spark: SparkSession, cluster: Servers, **options: str):
    reader = spark.read.format("quiver").option("namesrv", cluster.namesrv_addr).option("topics", TOPIC)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_it_reads_every_message_once_with_its_columns(spark: SparkSession, cluster: Servers, sent) -> None:
    df = load(spark, cluster, maxMessagesPerPartition="50", includeBody="true")
    assert df.rdd.getNumPartitions() >= COUNT // 50  # 4 queues of ~150, split by 50
    rows = df.collect()
    assert len(rows) == COUNT
    by_seq = {int(r["properties"]["seq"]): r for r in rows}
    assert sorted(by_seq) == list(range(COUNT))
    for seq, (tag, body, key) in enumerate(sent):
        row = by_seq[seq]
        assert (row["tags"], row["keys"], bytes(row["body"]), row["body_size"]) == (tag, key, body, len(body))
        assert row["topic"] == TOPIC and row["broker"] == "broker-a" and row["reconsume_times"] == 0
        assert row["unique_key"] and len(row["msg_id"]) == 32 and row["store_host"] == cluster.broker_addr
    # Queue offsets are dense per queue, commit-log offsets unique.
    for queue_id in range(4):
        offsets = sorted(r["queue_offset"] for r in rows if r["queue_id"] == queue_id)
        assert offsets == list(range(len(offsets)))
    assert len({r["commit_log_offset"] for r in rows}) == COUNT


def test_the_body_is_a_column_only_when_asked_for(spark: SparkSession, cluster: Servers, sent) -> None:
    assert "body" not in load(spark, cluster).columns
    assert "body" in load(spark, cluster, includeBody="true").columns


def test_spark_sql_over_the_source_agrees_with_what_was_sent(
    spark: SparkSession, cluster: Servers, sent
) -> None:
    load(spark, cluster).createOrReplaceTempView("source_messages")
    rows = spark.sql(
        "SELECT tags, count(*) AS n, sum(body_size) AS bytes FROM source_messages GROUP BY tags"
    ).collect()
    expected: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for tag, body, _key in sent:
        expected[tag] += 1
        sizes[tag] += len(body)
    assert {r["tags"]: (r["n"], r["bytes"]) for r in rows} == {t: (expected[t], sizes[t]) for t in expected}


def test_a_time_range_reads_only_that_range(spark: SparkSession, cluster: Servers, sent) -> None:
    times = sorted(r["store_timestamp"] for r in load(spark, cluster).select("store_timestamp").collect())
    middle = times[len(times) // 2]
    start_ms = int(middle.timestamp() * 1000)
    expected = sum(1 for t in times if t >= middle)
    assert load(spark, cluster, startTime=str(start_ms)).count() == expected
    # The same bound as a SQL filter, pushed down into the offset ranges.
    df = load(spark, cluster).where(F.col("store_timestamp") >= F.lit(middle))
    assert df.count() == expected
    before = load(spark, cluster, endTime=str(start_ms)).count()
    assert before == COUNT - expected


def test_offsets_bound_the_read_per_queue(spark: SparkSession, cluster: Servers, sent) -> None:
    starts = json.dumps({TOPIC: {"broker-a:0": 10, "broker-a:1": 20}})
    ends = json.dumps({TOPIC: {"broker-a:0": 15}})
    df = load(spark, cluster, startOffsets=starts, endOffsets=ends)
    per_queue = {
        r["queue_id"]: (r["lo"], r["hi"], r["n"])
        for r in df.groupBy("queue_id")
        .agg(F.min("queue_offset").alias("lo"), F.max("queue_offset").alias("hi"), F.count("*").alias("n"))
        .collect()
    }
    assert per_queue[0] == (10, 14, 5)
    assert per_queue[1][0] == 20 and per_queue[2][0] == 0


def test_an_empty_topic_is_an_empty_frame(spark: SparkSession, cluster: Servers) -> None:
    create_topic(cluster, "SparkEmpty", 2)
    df = (
        spark.read.format("quiver")
        .option("namesrv", cluster.namesrv_addr)
        .option("topics", "SparkEmpty")
        .load()
    )
    assert df.count() == 0
    assert df.columns[:3] == ["topic", "broker", "queue_id"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "option 'namesrv' is required"),
        ({"namesrv": "127.0.0.1:1"}, "give option 'topics'"),
        ({"namesrv": "127.0.0.1:1", "topics": "A", "startTime": "yesterday"}, "neither epoch milliseconds"),
        ({"namesrv": "127.0.0.1:1", "topics": "A", "startOffsets": "{bad"}, "use earliest, latest or JSON"),
        ({"namesrv": "127.0.0.1:1", "topics": "A", "maxMessagesPerPartition": "0"}, "must be at least 1"),
        ({"namesrv": "127.0.0.1:1", "topics": "A", "includeBody": "maybe"}, "is not true or false"),
        (
            {"namesrv": "127.0.0.1:1", "topics": "A", "startTime": "2000", "endTime": "1000"},
            "before startTime",
        ),
    ],
)
def test_bad_options_say_what_is_wrong(options: dict[str, str], message: str) -> None:
    with pytest.raises(SourceOptionError, match=message):
        ScanOptions.parse(options)


def test_bad_options_reach_the_spark_user_as_that_message(spark: SparkSession) -> None:
    with pytest.raises(PySparkException, match="option 'namesrv' is required"):
        spark.read.format("quiver").option("topics", "A").load().count()


def test_an_unknown_topic_is_a_clear_error(spark: SparkSession, cluster: Servers) -> None:
    with pytest.raises(SourceOptionError, match="NoSuchTopic"):
        plan(ScanOptions.parse({"namesrv": cluster.namesrv_addr, "topics": "NoSuchTopic"}))
    with pytest.raises(PySparkException, match="NoSuchTopic"):
        spark.read.format("quiver").option("namesrv", cluster.namesrv_addr).option(
            "topics", "NoSuchTopic"
        ).load().count()


def test_an_unreachable_nameserver_is_a_clear_error(spark: SparkSession) -> None:
    from spark_reports.planner import SourceUnavailableError
    from tests.servers import free_port

    addr = f"127.0.0.1:{free_port()}"
    with pytest.raises(SourceUnavailableError, match=f"cannot reach the cluster at {addr}"):
        plan(ScanOptions.parse({"namesrv": addr, "topics": "A", "timeoutSeconds": "2"}))
    with pytest.raises(PySparkException, match="cannot reach the cluster"):
        spark.read.format("quiver").option("namesrv", addr).option("topics", "A").load().count()


def test_a_range_deleted_after_planning_is_skipped_and_counted(tmp_path: Path) -> None:
    """Files expire between planning and reading (the broker answers OFFSET_MOVED): the
    reader returns what is still stored and counts what is gone, and a new plan starts at
    the queue's new minimum offset."""
    expiry = {"fileReservedTime": 0, "deleteWhen": ";".join(f"{h:02d}" for h in range(24))}
    with run_servers(tmp_path, mappedFileSizeCommitLog=256 * 1024, **expiry) as servers:
        create_topic(servers, "Expiring", 1)
        config = ClientConfig(namesrv_addr=servers.namesrv_addr, instance_name="expiry")
        with Producer("expiry-producer", config=config, compress_over=1 << 30) as producer:
            for i in range(60):
                producer.send(Message("Expiring", bytes([i % 256]) * 16 * 1024))
        # The consume queue is written just after each send's ack: wait until it holds all.
        stats = lambda: admin_run(servers.namesrv_addr, lambda a: a.topic_stats("Expiring"))  # noqa: E731
        wait_for(lambda: stats().total_messages == 60, 30, "the consume queue to hold every message")
        options = ScanOptions.parse({"namesrv": servers.namesrv_addr, "topics": "Expiring"})
        planned = plan(options)
        assert [(p.start, p.end) for p in planned] == [(0, 60)]
        wait_for(
            lambda: admin_run(
                servers.namesrv_addr, lambda a: a.run_maintenance(servers.broker_addr, "file_expiry")
            ).details.get("commit_log_files_deleted"),
            30,
            "an expiry run that deleted files",
        )
        low = admin_run(servers.namesrv_addr, lambda a: a.topic_stats("Expiring")).queues[0].min_offset
        assert 0 < low < 60
        from broker_core.client.rangescan import ScanStats

        stats = ScanStats()
        batches = list(read_range(options, planned[0], stats))
        offsets = [o for b in batches for o in b.column("queue_offset").to_pylist()]
        assert offsets == list(range(low, 60))
        assert stats.missing == low and stats.messages == 60 - low
        assert [(p.start, p.end) for p in plan(options)] == [(low, 60)]


def test_time_bounds_are_utc_instants(spark: SparkSession, cluster: Servers, sent) -> None:
    now = dt.datetime.now(dt.UTC)
    later = (now + dt.timedelta(hours=1)).isoformat()
    assert load(spark, cluster, startTime=later).count() == 0
    assert load(spark, cluster, endTime=later).count() == COUNT
    assert time.time() > 0
