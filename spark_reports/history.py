"""Read the platform's offset history and counters (console/maintenance/history.py writes them).

The files are JSON lines under ``<history>/offsets/date=YYYY-MM-DD/`` and
``<history>/counters/date=YYYY-MM-DD/``; ``history`` is a local directory or any
Hadoop-compatible path (``hdfs://...``, ``s3a://...``) when Spark runs on a cluster.
Only the days the period touches are read (the ``date=`` partitions), a torn last line
is dropped, and a history that does not exist yet reads as no rows, not an error.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_reports.schemas import COUNTERS_SCHEMA, OFFSETS_SCHEMA


def _days(since_ms: int, until_ms: int) -> list[str]:
    first = dt.datetime.fromtimestamp(since_ms / 1000, tz=dt.UTC).date()
    last = dt.datetime.fromtimestamp(max(since_ms, until_ms - 1) / 1000, tz=dt.UTC).date()
    return [(first + dt.timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]


def _read(
    spark: SparkSession, base: str, schema: StructType, cluster: str | None, since_ms: int, until_ms: int
) -> DataFrame:
    paths = [f"{base.rstrip('/')}/date={day}" for day in _days(since_ms, until_ms)]
    frames = []
    for path in paths:
        try:
            frames.append(spark.read.schema(schema).option("mode", "DROPMALFORMED").json(path))
        except AnalysisException as exc:
            if "PATH_NOT_FOUND" not in str(exc) and "Path does not exist" not in str(exc):
                raise
    if not frames:
        return spark.createDataFrame([], schema)
    df = frames[0]
    for more in frames[1:]:
        df = df.unionByName(more)
    df = df.where(F.col("ts").isNotNull() & (F.col("ts") >= since_ms) & (F.col("ts") < until_ms))
    if cluster:
        df = df.where(F.col("cluster") == cluster)
    return df


def read_offsets(
    spark: SparkSession, history: str, since_ms: int, until_ms: int, cluster: str | None = None
) -> DataFrame:
    """Offset snapshots with ``since_ms <= ts < until_ms`` (``OFFSETS_SCHEMA``)."""
    return _read(spark, f"{history.rstrip('/')}/offsets", OFFSETS_SCHEMA, cluster, since_ms, until_ms)


def read_counters(
    spark: SparkSession, history: str, since_ms: int, until_ms: int, cluster: str | None = None
) -> DataFrame:
    """Put/get counter snapshots with ``since_ms <= ts < until_ms`` (``COUNTERS_SCHEMA``)."""
    return _read(spark, f"{history.rstrip('/')}/counters", COUNTERS_SCHEMA, cluster, since_ms, until_ms)


def input_bytes(history: str, kind: str, since_ms: int, until_ms: int) -> int | None:
    """Bytes of the ``kind`` (offsets, counters) files the period's days hold: the run's input
    size.  None for a Hadoop path (Spark reads it; this process may not)."""
    if "://" in history and not history.startswith("file://"):
        return None
    base = Path(history.removeprefix("file://")) / kind
    total = 0
    for day in _days(since_ms, until_ms):
        part = base / f"date={day}"
        if part.is_dir():
            total += sum(f.stat().st_size for f in part.iterdir() if f.is_file())
    return total
