"""The lag report: how far behind each group is, per queue and over time, and where it goes.

extract: the offset history of the period (each snapshot: a queue's committed offset, its
         max offset, and the store time of the message at the committed offset);
transform: pure DataFrame functions, one per table of ``spark_reports.outputs``;
load: Parquet tables and ``summary.json``.

Definitions (the console shows the same words):
* lag = max offset - the next offset to consume (the committed one, or the queue's first
  stored message when expiry removed older ones; never below 0), as the group list counts;
* seconds behind = snapshot time - store time of that next message (RocketMQ's "consume
  delay"), 0 when nothing is behind, null when the broker could not tell;
* per group and topic, the queues' last snapshot in each bucket (``--bucket-seconds``) is
  summed (seconds behind: the worst queue); rates are each queue's offset increases per
  second since its previous snapshot, summed; time to drain = lag / (consume rate -
  produce rate) when the group gains, else null (never, at these rates);
* growing: lag at the end is above lag at the start and its least-squares slope is
  positive, over at least three buckets; stalled: over the period's last three buckets no
  committed offset moved while the lag grew.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark_reports.history import input_bytes, read_offsets
from spark_reports.jobs.common import ReportParams, epoch_ms
from spark_reports.outputs import LAG_TABLES

MIN_TREND_SAMPLES = 3
STALL_BUCKETS = 3
WORST = 10


def extract(spark: SparkSession, params: ReportParams) -> DataFrame:
    offsets = read_offsets(spark, params.history, params.since_ms, params.until_ms, params.cluster)
    if params.topics:
        offsets = offsets.where(F.col("topic").isin(params.topics))
    return offsets


def lag_queue(offsets: DataFrame) -> DataFrame:
    """One row per snapshot and queue, with lag and seconds behind (null when unknown)."""
    # What the group has still to consume starts at its committed offset, or at the queue's
    # first stored message when expiry removed the ones before it (as the group list counts).
    next_offset = F.greatest(F.col("consumer_offset"), F.coalesce("min_offset", F.lit(0)), F.lit(0))
    lag = F.greatest(F.col("broker_offset") - next_offset, F.lit(0))
    behind = (
        F.when(lag == 0, F.lit(0.0))
        .when(
            F.col("store_timestamp") > 0,
            F.greatest((F.col("ts") - F.col("store_timestamp")) / 1000.0, F.lit(0.0)),
        )
        .otherwise(F.lit(None).cast("double"))  # behind, but the broker could not say since when
    )
    rows = offsets.withColumn("lag", lag).withColumn("seconds_behind", behind)
    return rows.withColumn("ts", epoch_ms("ts")).select(*LAG_TABLES["lag_queue"])


def lag_group(queues: DataFrame, bucket_seconds: int) -> DataFrame:
    """Per group and topic and bucket: each queue's last snapshot in the bucket, summed.

    Rates come from each queue's own offset increases since its previous snapshot (never
    negative: a reset backwards moves nothing), divided by that queue's own interval, then
    summed: a queue missing from a bucket (a broker that did not answer) or reset leaves the
    others' figures whole.
    """
    bucket = F.timestamp_seconds(F.floor(F.unix_timestamp("ts") / bucket_seconds) * bucket_seconds)
    keyed = queues.withColumn("bucket", bucket)
    last = Window.partitionBy("bucket", "broker", "group", "topic", "queue_id").orderBy(F.desc("ts"))
    latest = keyed.withColumn("n", F.row_number().over(last)).where(F.col("n") == 1)
    queue = Window.partitionBy("broker", "group", "topic", "queue_id").orderBy("bucket")
    elapsed = F.col("ts").cast("double") - F.lag("ts").over(queue).cast("double")  # seconds
    consumed = F.greatest(F.col("consumer_offset") - F.lag("consumer_offset").over(queue), F.lit(0))
    produced = F.greatest(F.col("broker_offset") - F.lag("broker_offset").over(queue), F.lit(0))
    deltas = (
        latest.withColumn("elapsed", elapsed)
        .withColumn("consumed", consumed)
        .withColumn("produced", produced)
        # try_divide: a zero interval (two snapshots in one millisecond) is no rate, not an error.
        .withColumn("consume_q", F.when(F.col("elapsed") > 0, F.try_divide("consumed", "elapsed")))
        .withColumn("produce_q", F.when(F.col("elapsed") > 0, F.try_divide("produced", "elapsed")))
    )
    summed = deltas.groupBy("bucket", "group", "topic").agg(
        F.sum("lag").alias("lag"),
        F.max("seconds_behind").alias("seconds_behind"),
        F.sum("consume_q").alias("consume_rate"),
        F.sum("produce_q").alias("produce_rate"),
        F.coalesce(F.sum("consumed"), F.lit(0)).alias("consumed"),
        F.coalesce(F.sum("produced"), F.lit(0)).alias("produced"),
        F.max("ts").alias("at"),
    )
    return summed.select(
        F.col("bucket").alias("ts"),
        "group",
        "topic",
        "lag",
        "seconds_behind",
        "consume_rate",
        "produce_rate",
        _drain("lag", "consume_rate", "produce_rate").alias("drain_seconds"),
        "consumed",
        "produced",
        "at",
    )


def _drain(lag: str, consume: str, produce: str) -> Any:
    gain = F.col(consume) - F.col(produce)
    return F.when(F.col(lag) == 0, F.lit(0.0)).when(gain > 0, F.try_divide(F.col(lag), gain))


def lag_trend(groups: DataFrame) -> DataFrame:
    """Per group and topic over the period: first/last/max lag, slope, rates, flags.

    Stalled looks at the end of the period (its last ``STALL_BUCKETS`` buckets): no
    committed offset moved there while the lag grew, however busy the group was before.
    """
    t = F.col("ts").cast("double") / 60.0  # minutes: the slope is per minute
    newest = Window.partitionBy("group", "topic").orderBy(F.desc("ts"))
    ordered = groups.withColumn("t", t).withColumn("n", F.row_number().over(newest))
    tail = F.col("n") <= STALL_BUCKETS
    agg = ordered.groupBy("group", "topic").agg(
        F.count(F.lit(1)).alias("samples"),
        F.min_by("lag", "ts").alias("first_lag"),
        F.max_by("lag", "ts").alias("last_lag"),
        F.max("lag").alias("max_lag"),
        F.max("seconds_behind").alias("max_seconds_behind"),
        F.try_divide(F.covar_pop("t", "lag"), F.var_pop("t")).alias("lag_slope_per_minute"),
        F.min("at").alias("t0"),
        F.max("at").alias("t1"),
        # Increases into each bucket since the queue's previous snapshot (none into the first).
        F.sum("consumed").alias("consumed_all"),
        F.sum("produced").alias("produced_all"),
        F.sum(F.when(tail & (F.col("n") < STALL_BUCKETS), F.col("consumed"))).alias("tail_consumed"),
        F.min_by(F.when(tail, F.col("lag")), F.when(tail, -F.col("n"))).alias("tail_first_lag"),
        F.count(F.when(tail, 1)).alias("tail_samples"),
    )
    span = F.col("t1").cast("double") - F.col("t0").cast("double")
    trend = (
        agg.withColumn("consume_rate", F.when(span > 0, F.try_divide(F.col("consumed_all"), span)))
        .withColumn("produce_rate", F.when(span > 0, F.try_divide(F.col("produced_all"), span)))
        .withColumn("lag_slope_per_minute", F.coalesce("lag_slope_per_minute", F.lit(0.0)))
    )
    grew = F.col("last_lag") > F.col("first_lag")
    growing = (F.col("samples") >= MIN_TREND_SAMPLES) & grew & (F.col("lag_slope_per_minute") > 0)
    stalled = (
        (F.col("tail_samples") >= 2)
        & (F.coalesce("tail_consumed", F.lit(0)) == 0)
        & (F.col("last_lag") > F.col("tail_first_lag"))
    )
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
    }


def run(spark: SparkSession, params: ReportParams) -> tuple[dict[str, DataFrame], dict[str, Any]]:
    """Build the lag report's tables and summary (the tables not yet written)."""
    offsets = extract(spark, params).cache()
    queues = lag_queue(offsets)
    groups = lag_group(queues, params.bucket_seconds).cache()
    trend = lag_trend(groups).cache()
    tables = {"lag_queue": queues, "lag_group": groups.select(*LAG_TABLES["lag_group"]), "lag_trend": trend}
    summary = summarize(offsets.count(), groups, trend)
    summary["inputBytes"] = input_bytes(params.history, "offsets", params.since_ms, params.until_ms)
    return tables, summary
