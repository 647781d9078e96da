"""The lag report: how far behind each group is, per queue and over time, and where it goes.

extract: the offset history of the period (each snapshot: a queue's committed offset, its
         max offset, and the store time of the message at the committed offset);
transform: pure DataFrame functions, one per table of ``spark_reports.outputs``;
load: Parquet tables and ``summary.json``.

Definitions (the console shows the same words):
* lag = max offset - committed offset (never below 0);
* seconds behind = snapshot time - store time of the message at the committed offset,
  0 when nothing is behind (RocketMQ's "consume delay");
* per group and topic, the queues' last snapshot in each bucket (``--bucket-seconds``) is
  summed (seconds behind: the worst queue); rates are offset increases per second between
  buckets; time to drain = lag / (consume rate - produce rate) when the group gains, else
  null (never, at these rates);
* growing: lag at the end is above lag at the start and its least-squares slope is
  positive, over at least three buckets; stalled: lag grew while no committed offset moved.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark_reports.history import read_offsets
from spark_reports.jobs.common import ReportParams, epoch_ms
from spark_reports.outputs import LAG_TABLES

MIN_TREND_SAMPLES = 3
WORST = 10


def extract(spark: SparkSession, params: ReportParams) -> DataFrame:
    offsets = read_offsets(spark, params.history, params.since_ms, params.until_ms, params.cluster)
    if params.topics:
        offsets = offsets.where(F.col("topic").isin(params.topics))
    return offsets


def lag_queue(offsets: DataFrame) -> DataFrame:
    """One row per snapshot and queue, with lag and seconds behind."""
    lag = F.greatest(F.col("broker_offset") - F.col("consumer_offset"), F.lit(0))
    behind = F.when(
        (lag > 0) & (F.col("store_timestamp") > 0),
        F.greatest((F.col("ts") - F.col("store_timestamp")) / 1000.0, F.lit(0.0)),
    ).otherwise(F.lit(0.0))
    rows = offsets.withColumn("lag", lag).withColumn("seconds_behind", behind)
    return rows.withColumn("ts", epoch_ms("ts")).select(*LAG_TABLES["lag_queue"])


def lag_group(queues: DataFrame, bucket_seconds: int) -> DataFrame:
    """Per group and topic and bucket: the queues' last snapshot in the bucket, summed."""
    bucket = F.timestamp_seconds(F.floor(F.unix_timestamp("ts") / bucket_seconds) * bucket_seconds).alias(
        "bucket"
    )
    keyed = queues.withColumn("bucket", bucket)
    last = Window.partitionBy("bucket", "broker", "group", "topic", "queue_id").orderBy(F.desc("ts"))
    latest = keyed.withColumn("n", F.row_number().over(last)).where(F.col("n") == 1)
    summed = latest.groupBy("bucket", "group", "topic").agg(
        F.sum("lag").alias("lag"),
        F.max("seconds_behind").alias("seconds_behind"),
        F.sum("consumer_offset").alias("consumed_to"),
        F.sum("broker_offset").alias("produced_to"),
        F.max("ts").alias("at"),
    )
    series = Window.partitionBy("group", "topic").orderBy("bucket")
    elapsed = F.col("at").cast("double") - F.lag("at").over(series).cast("double")  # seconds
    # try_divide: a zero interval (two snapshots in one millisecond) is no rate, not an error.
    consume = F.try_divide(
        F.greatest(F.col("consumed_to") - F.lag("consumed_to").over(series), F.lit(0)), elapsed
    )
    produce = F.try_divide(
        F.greatest(F.col("produced_to") - F.lag("produced_to").over(series), F.lit(0)), elapsed
    )
    rated = summed.withColumn("consume_rate", F.when(elapsed > 0, consume)).withColumn(
        "produce_rate", F.when(elapsed > 0, produce)
    )
    return rated.select(
        F.col("bucket").alias("ts"),
        "group",
        "topic",
        "lag",
        "seconds_behind",
        "consume_rate",
        "produce_rate",
        _drain("lag", "consume_rate", "produce_rate").alias("drain_seconds"),
        "consumed_to",
        "produced_to",
        "at",
    )


def _drain(lag: str, consume: str, produce: str) -> Any:
    gain = F.col(consume) - F.col(produce)
    return F.when(F.col(lag) == 0, F.lit(0.0)).when(gain > 0, F.try_divide(F.col(lag), gain))


def lag_trend(groups: DataFrame) -> DataFrame:
    """Per group and topic over the period: first/last/max lag, slope, rates, flags."""
    t = F.col("ts").cast("double") / 60.0  # minutes: the slope is per minute
    first = Window.partitionBy("group", "topic").orderBy("ts")
    ordered = groups.withColumn("t", t).withColumn("n", F.row_number().over(first))
    agg = ordered.groupBy("group", "topic").agg(
        F.count(F.lit(1)).alias("samples"),
        F.min_by("lag", "ts").alias("first_lag"),
        F.max_by("lag", "ts").alias("last_lag"),
        F.max("lag").alias("max_lag"),
        F.max("seconds_behind").alias("max_seconds_behind"),
        F.try_divide(F.covar_pop("t", "lag"), F.var_pop("t")).alias("lag_slope_per_minute"),
        F.min("at").alias("t0"),
        F.max("at").alias("t1"),
        F.min_by("consumed_to", "ts").alias("c0"),
        F.max_by("consumed_to", "ts").alias("c1"),
        F.min_by("produced_to", "ts").alias("p0"),
        F.max_by("produced_to", "ts").alias("p1"),
    )
    span = F.col("t1").cast("double") - F.col("t0").cast("double")
    trend = (
        agg.withColumn(
            "consume_rate",
            F.when(span > 0, F.try_divide(F.greatest(F.col("c1") - F.col("c0"), F.lit(0)), span)),
        )
        .withColumn(
            "produce_rate",
            F.when(span > 0, F.try_divide(F.greatest(F.col("p1") - F.col("p0"), F.lit(0)), span)),
        )
        .withColumn("lag_slope_per_minute", F.coalesce("lag_slope_per_minute", F.lit(0.0)))
    )
    grew = F.col("last_lag") > F.col("first_lag")
    growing = (F.col("samples") >= MIN_TREND_SAMPLES) & grew & (F.col("lag_slope_per_minute") > 0)
    stalled = (F.col("samples") >= 2) & grew & (F.col("c1") == F.col("c0"))
    flags = trend.withColumn("drain_seconds", _drain("last_lag", "consume_rate", "produce_rate"))
    flags = flags.withColumn("growing", growing).withColumn("stalled", stalled)
    return flags.select(*LAG_TABLES["lag_trend"])


def summarize(offsets_rows: int, groups: DataFrame, trend: DataFrame) -> dict[str, Any]:
    """The run's headline figures (small results collected to the driver)."""
    rows = trend.collect()
    last = Window.partitionBy("group", "topic").orderBy(F.desc("ts"))
    worst = (
        groups.withColumn("n", F.row_number().over(last))
        .where(F.col("n") == 1)
        .orderBy(F.desc("lag"), "group", "topic")
        .limit(WORST)
        .collect()
    )
    return {
        "groups": len(rows),
        "growing": [
            {
                "group": r["group"],
                "topic": r["topic"],
                "lastLag": int(r["last_lag"]),
                "slopePerMinute": float(r["lag_slope_per_minute"]),
            }
            for r in sorted(rows, key=lambda r: -r["lag_slope_per_minute"])
            if r["growing"]
        ],
        "stalled": [
            {"group": r["group"], "topic": r["topic"], "lastLag": int(r["last_lag"])}
            for r in rows
            if r["stalled"]
        ],
        "worst": [
            {
                "group": r["group"],
                "topic": r["topic"],
                "lag": int(r["lag"]),
                "secondsBehind": float(r["seconds_behind"]),
            }
            for r in worst
        ],
        "inputRows": offsets_rows,
        "inputBytes": 0,
    }


def run(spark: SparkSession, params: ReportParams) -> tuple[dict[str, DataFrame], dict[str, Any]]:
    """Build the lag report's tables and summary (the tables not yet written)."""
    offsets = extract(spark, params).cache()
    queues = lag_queue(offsets)
    groups = lag_group(queues, params.bucket_seconds).cache()
    trend = lag_trend(groups).cache()
    tables = {"lag_queue": queues, "lag_group": groups.select(*LAG_TABLES["lag_group"]), "lag_trend": trend}
    return tables, summarize(offsets.count(), groups, trend)
