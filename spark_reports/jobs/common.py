"""What the report jobs share: their parameters, topic resolution, and the load step."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_reports.options import SourceOptionError
from spark_reports.outputs import write_summary


@dataclass(frozen=True)
class ReportParams:
    """One run's inputs: the cluster, the period ``[since_ms, until_ms)`` and where things are."""

    cluster: str
    namesrv: str
    history: str
    out: str
    since_ms: int
    until_ms: int
    topics: list[str] = field(default_factory=list)
    bucket_seconds: int = 60
    # Extra options for the quiver source (accessKey/secretKey, maxMessagesPerPartition...).
    source_options: dict[str, str] = field(default_factory=dict)

    def check(self) -> None:
        """Raise ``SourceOptionError`` for a period or bucket that makes no sense."""
        if self.until_ms <= self.since_ms:
            raise SourceOptionError(f"the period ends ({self.until_ms}) before it begins ({self.since_ms})")
        if self.bucket_seconds < 1:
            raise SourceOptionError("the bucket must be at least one second")


def to_epoch_ms(value: dt.datetime) -> int:
    """A timestamp Spark collected (naive, in this process's local time) as epoch milliseconds:
    how a summary carries its times (spark_reports/outputs.py), so the console formats every
    report time one way."""
    return round(value.timestamp() * 1000)


def epoch_ms(column: str) -> Column:
    """An epoch-milliseconds column as a Spark timestamp."""
    return F.timestamp_millis(F.col(column))


def write_tables(out: str, tables: dict[str, DataFrame], columns: dict[str, tuple[str, ...]]) -> None:
    """Write each table as Parquet under ``out/<name>/`` (one file per table: they are small)."""
    for name, cols in columns.items():
        tables[name].select(*cols).coalesce(1).write.mode("overwrite").parquet(f"{out.rstrip('/')}/{name}")


def finish(out: str, summary: dict[str, Any]) -> None:
    """Write ``summary.json`` last: its presence marks a complete run."""
    if "://" in out and not out.startswith("file://"):
        return  # a cluster path: the console reads the summary from the done event instead
    write_summary(Path(out.removeprefix("file://")), summary)
