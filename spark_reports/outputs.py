"""What a report run leaves behind: the one owner of the reports' output format.

A run writes into its own directory, ``<reports dir>/<run id>/``::

    summary.json            the run's headline figures (``Summary`` below), written last:
                            a directory without it is an unfinished or failed run
    <table>/part-*.parquet  one Parquet table per name in ``TRAFFIC_TABLES`` / ``LAG_TABLES``

Times in tables are UTC ``timestamp`` columns (minute or hour buckets, or the history
snapshot's instant); rates are per second; sizes in bytes.  A table can be empty (no
traffic in the period) but it is always written, with its columns.

``python -m spark_reports`` (what the Celery task launches) speaks JSON lines on stdout,
one object a line, so its parent can follow it without parsing logs::

    {"event": "progress", "stagesDone": 3, "stagesTotal": 7}
    {"event": "done", "summary": {...}}                  exit status 0
    {"event": "error", "message": "..."}                 exit status 2 (bad input) or 1

The summary (camelCase keys, as the REST API shows them; times epoch ms)::

    every run     kind, cluster, since, until, inputRows, inputBytes, durationSeconds
    traffic       topics [names], messages, bytes, consumed,
                  producers (distinct born hosts: producer *connections*, ip:port; a
                  stored message does not carry its producer group),
                  producerGroups (distinct producer groups, from the brokers' counters),
                  peakMinute {minute (epoch ms), messages} (null without traffic),
                  peakByTopic {topic: {minute, messages}},
                  retryMessages, dlqMessages, retryShare, dlqShare (0..1 of all messages),
                  missingMessages (planned but gone when read: expired meanwhile)
    lag           groups (how many group/topic pairs), growing [{group, topic, lastLag,
                  slopePerMinute}], stalled [{group, topic, lastLag}], worst [{group, topic,
                  lag, secondsBehind}] (top 10 by lag at the last snapshot)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

ReportKind = Literal["traffic", "lag"]
SUMMARY_FILE = "summary.json"

# Traffic report tables and their columns, in order.
TRAFFIC_TABLES: dict[str, tuple[str, ...]] = {
    # messages stored per topic per minute / hour ("producers": distinct born hosts, i.e.
    # producer connections, not producer groups)
    "topic_minute": ("topic", "minute", "messages", "bytes", "avg_size", "max_size", "producers"),
    "topic_hour": ("topic", "hour", "messages", "bytes", "avg_size", "max_size", "producers"),
    # the most frequent tags and producer connections (born hosts) of each topic over the period
    "top_tags": ("topic", "tag", "messages", "bytes", "rank"),
    "top_producers": ("topic", "producer", "messages", "bytes", "rank"),
    # messages handed to each group per topic per minute (the brokers' get counters)
    "consumption_minute": ("group", "topic", "minute", "consumed"),
    # the producer groups that sent to each topic over the period (the brokers' counters)
    "producer_groups": ("topic", "group", "messages", "rank"),
}

# Lag report tables and their columns, in order.
LAG_TABLES: dict[str, tuple[str, ...]] = {
    # one row per history snapshot and queue
    "lag_queue": (
        "ts",
        "broker",
        "group",
        "topic",
        "queue_id",
        "consumer_offset",
        "broker_offset",
        "lag",
        "seconds_behind",
    ),
    # per group and topic at each snapshot instant (queues summed; seconds behind: the worst)
    "lag_group": (
        "ts",
        "group",
        "topic",
        "lag",
        "seconds_behind",
        "consume_rate",
        "produce_rate",
        "drain_seconds",
    ),
    # per group and topic over the whole period
    "lag_trend": (
        "group",
        "topic",
        "samples",
        "first_lag",
        "last_lag",
        "max_lag",
        "max_seconds_behind",
        "lag_slope_per_minute",
        "consume_rate",
        "produce_rate",
        "drain_seconds",
        "growing",
        "stalled",
    ),
}

TABLES: dict[ReportKind, dict[str, tuple[str, ...]]] = {"traffic": TRAFFIC_TABLES, "lag": LAG_TABLES}


def write_summary(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write ``summary.json`` atomically (temp file + rename): readers never see half of it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / (SUMMARY_FILE + ".tmp")
    tmp.write_text(json.dumps(summary, indent=1, sort_keys=True, default=str))
    tmp.replace(run_dir / SUMMARY_FILE)


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The run's summary, or None while it has none (running, failed)."""
    try:
        return json.loads((run_dir / SUMMARY_FILE).read_text())
    except FileNotFoundError:
        return None
