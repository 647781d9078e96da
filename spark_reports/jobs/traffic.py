"""The traffic report: what was stored and consumed, per topic, per minute and per hour.

extract: the period's messages through the ``quiver`` data source (every user topic,
         retry and DLQ topics included, unless the run names its topics) and the brokers'
         counters in the offset history, from the start of the period's first day;
transform: pure DataFrame functions below, one per table of ``spark_reports.outputs``;
load: Parquet tables and ``summary.json`` (``spark_reports.jobs.common``).

"bytes" and sizes are stored body sizes (``body_size``); in the message tables a producer
is a born host (``ip:port``: one per producer connection), since a stored message does not
name its producer group.  Producer groups and consumption come from the brokers' counters in
the offset history (console/maintenance/history.py): what each producer group had stored per
topic, and what each consumer group was handed per topic (RocketMQ's GROUP_GET_NUMS), read
as increases between snapshots.  A counter's first snapshot of a day counts from its total
when the day began, so what came before the platform's first snapshot is not lost (it is
placed in that snapshot's minute).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from broker_core.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from spark_reports.history import read_counters
from spark_reports.jobs.common import ReportParams, epoch_ms, to_epoch_ms
from spark_reports.options import ScanOptions
from spark_reports.outputs import TRAFFIC_TABLES
from spark_reports.planner import QueueRange, plan

TOP_N = 10
MESSAGE_COLUMNS = ("broker", "topic", "queue_id", "tags", "born_host", "body_size", "store_timestamp")
DAY_MS = 86_400_000


def source_options(params: ReportParams) -> dict[str, str]:
    """The ``quiver`` source's options for the period: the run's topics, else every topic but
    the system ones."""
    options = {"namesrv": params.namesrv, "startTime": str(params.since_ms), "endTime": str(params.until_ms)}
    if params.topics:
        options["topics"] = ",".join(params.topics)
    else:
        options["topicPattern"] = ".*"
    return {**options, **params.source_options}


def extract_messages(spark: SparkSession, params: ReportParams) -> DataFrame:
    """The period's messages, read by the executors."""
    return spark.read.format("quiver").options(**source_options(params)).load()


def missing_messages(planned: list[QueueRange], read: DataFrame) -> int:
    """Messages the plan counted that the read did not find: offsets expired (or a broker
    truncated) between planning and reading.  Messages stored meanwhile only add."""
    expected: Counter[tuple[str, str, int]] = Counter()
    for r in planned:
        expected[(r.broker, r.topic, r.queue_id)] += r.size
    got = {
        (row["broker"], row["topic"], row["queue_id"]): row["n"]
        for row in read.groupBy("broker", "topic", "queue_id").agg(F.count(F.lit(1)).alias("n")).collect()
    }
    return sum(max(0, n - got.get(key, 0)) for key, n in expected.items())


def extract_counters(spark: SparkSession, params: ReportParams) -> DataFrame:
    """The counter snapshots from the start of the period's first (UTC) day: each counter's
    first row in the period then has the row before it, or is the day's first (whose
    baseline is its ``morning``)."""
    day_start = params.since_ms // DAY_MS * DAY_MS
    return read_counters(spark, params.history, day_start, params.until_ms, params.cluster)


def counter_deltas(counters: DataFrame, since_ms: int) -> DataFrame:
    """Each counter row in the period with ``delta``: how much its counter grew since the
    row before (same broker, boot, kind, topic and group), or for a day's first row since the
    day began (its ``morning``; 0 when the broker booted that day; unknown otherwise, as
    ``console.maintenance.history.counter_baseline`` says).  Rows that did not grow are left out."""
    series = Window.partitionBy("broker_addr", "boot_timestamp", "kind", "topic", "group").orderBy("ts")
    day_start = F.floor(F.col("ts") / DAY_MS) * DAY_MS
    baseline = F.coalesce(
        F.lag("total").over(series),
        F.col("morning"),
        F.when(F.col("boot_timestamp") >= day_start, F.lit(0)),
    )
    deltas = counters.withColumn("delta", F.col("total") - baseline)
    return deltas.where((F.col("ts") >= since_ms) & (F.col("delta") > 0))


def topic_buckets(messages: DataFrame, unit: str) -> DataFrame:
    """Per topic and ``unit`` (minute or hour): messages, bytes, average and largest size,
    distinct producers."""
    return (
        messages.groupBy("topic", F.date_trunc(unit, "store_timestamp").alias(unit))
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.sum("body_size").alias("bytes"),
            F.avg("body_size").alias("avg_size"),
            F.max("body_size").alias("max_size"),
            F.countDistinct("born_host").alias("producers"),
        )
        .select(*TRAFFIC_TABLES[f"topic_{unit}"])
    )


def top_by(messages: DataFrame, column: str, name: str, n: int = TOP_N) -> DataFrame:
    """The ``n`` most frequent values of ``column`` per topic, ranked 1..n (ties by value)."""
    counted = messages.groupBy("topic", F.coalesce(F.col(column), F.lit("")).alias(name)).agg(
        F.count(F.lit(1)).alias("messages"), F.sum("body_size").alias("bytes")
    )
    rank = F.row_number().over(Window.partitionBy("topic").orderBy(F.desc("messages"), F.asc(name)))
    return counted.withColumn("rank", rank).where(F.col("rank") <= n)


def consumption_minute(deltas: DataFrame) -> DataFrame:
    """Messages each group was handed from each topic per minute (the brokers' get counters)."""
    return (
        deltas.where(F.col("kind") == "get")
        .groupBy("group", "topic", F.date_trunc("minute", epoch_ms("ts")).alias("minute"))
        .agg(F.sum("delta").alias("consumed"))
        .select(*TRAFFIC_TABLES["consumption_minute"])
    )


def producer_groups(deltas: DataFrame) -> DataFrame:
    """Per topic, the producer groups that had messages stored in the period, ranked by how
    many (the brokers' per-group put counters)."""
    counted = (
        deltas.where(F.col("kind") == "produce")
        .groupBy("topic", "group")
        .agg(F.sum("delta").alias("messages"))
    )
    rank = F.row_number().over(Window.partitionBy("topic").orderBy(F.desc("messages"), F.asc("group")))
    return counted.withColumn("rank", rank).select(*TRAFFIC_TABLES["producer_groups"])


def summarize(
    messages: DataFrame, minute: DataFrame, consumption: DataFrame, producers: DataFrame
) -> dict[str, Any]:
    """The run's headline figures (small results collected to the driver)."""
    totals = messages.agg(
        F.count(F.lit(1)).alias("messages"),
        F.coalesce(F.sum("body_size"), F.lit(0)).alias("bytes"),
        F.countDistinct("born_host").alias("producers"),
        F.sum(F.col("topic").startswith(RETRY_GROUP_TOPIC_PREFIX).cast("long")).alias("retry"),
        F.sum(F.col("topic").startswith(DLQ_GROUP_TOPIC_PREFIX).cast("long")).alias("dlq"),
    ).first()
    assert totals is not None
    count = int(totals["messages"])
    per_minute = minute.groupBy("minute").agg(F.sum("messages").alias("messages"))
    peak = per_minute.orderBy(F.desc("messages"), F.asc("minute")).first()
    best = Window.partitionBy("topic").orderBy(F.desc("messages"), F.asc("minute"))
    peaks = minute.withColumn("n", F.row_number().over(best)).where(F.col("n") == 1).collect()
    consumed = consumption.agg(F.coalesce(F.sum("consumed"), F.lit(0))).first()
    groups = producers.select("group").distinct().count()
    retry, dlq = int(totals["retry"] or 0), int(totals["dlq"] or 0)
    return {
        "messages": count,
        "bytes": int(totals["bytes"]),
        "producers": int(totals["producers"]),
        "producerGroups": groups,
        "consumed": int(consumed[0]) if consumed else 0,
        "peakMinute": {"minute": to_epoch_ms(peak["minute"]), "messages": int(peak["messages"])}
        if peak
        else None,
        "peakByTopic": {
            row["topic"]: {"minute": to_epoch_ms(row["minute"]), "messages": int(row["messages"])}
            for row in peaks
        },
        "retryMessages": retry,
        "dlqMessages": dlq,
        "retryShare": retry / count if count else 0.0,
        "dlqShare": dlq / count if count else 0.0,
        "inputRows": count,
        "inputBytes": int(totals["bytes"]),
    }


def run(spark: SparkSession, params: ReportParams) -> tuple[dict[str, DataFrame], dict[str, Any]]:
    """Build the traffic report's tables and summary (the tables not yet written)."""
    # Only the columns the tables use are kept (and cached): ids, hosts and properties of a
    # million messages would otherwise be built into the cache and never read.
    planned = plan(ScanOptions.parse(source_options(params)))  # the same plan the executors read
    messages = extract_messages(spark, params).select(*MESSAGE_COLUMNS).cache()
    counters = extract_counters(spark, params)
    if params.topics:
        counters = counters.where(F.col("topic").isin(list(params.topics)))
    deltas = counter_deltas(counters, params.since_ms).cache()
    tables = {
        "topic_minute": topic_buckets(messages, "minute").cache(),
        "topic_hour": topic_buckets(messages, "hour"),
        "top_tags": top_by(messages, "tags", "tag").select(*TRAFFIC_TABLES["top_tags"]),
        "top_producers": top_by(messages, "born_host", "producer").select(*TRAFFIC_TABLES["top_producers"]),
        "consumption_minute": consumption_minute(deltas).cache(),
        "producer_groups": producer_groups(deltas).cache(),
    }
    summary = summarize(
        messages, tables["topic_minute"], tables["consumption_minute"], tables["producer_groups"]
    )
    summary["missingMessages"] = missing_messages(planned, messages)
    summary["topics"] = params.topics or sorted(
        r["topic"] for r in tables["topic_hour"].select("topic").distinct().collect()
    )
    return tables, summary
