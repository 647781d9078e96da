"""The Spark schemas of the reports' inputs, declared once.

* ``message_schema``: the rows of the ``quiver`` data source (one per stored message);
* ``OFFSETS_SCHEMA`` / ``COUNTERS_SCHEMA``: the offset-persistence job's history files
  (console/maintenance/history.py writes them; JSON lines, times in epoch ms).

Timestamps are Spark ``timestamp`` (UTC instants); offsets and sizes ``long``.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

# Columns of a message row, in order (the body, last, only when asked for).
MESSAGE_FIELDS: tuple[StructField, ...] = (
    StructField("topic", StringType(), False),
    StructField("broker", StringType(), False),
    StructField("queue_id", IntegerType(), False),
    StructField("queue_offset", LongType(), False),
    StructField("commit_log_offset", LongType(), False),
    StructField("msg_id", StringType(), False),
    StructField("unique_key", StringType(), True),
    StructField("tags", StringType(), True),
    StructField("keys", StringType(), True),
    StructField("born_timestamp", TimestampType(), False),
    StructField("store_timestamp", TimestampType(), False),
    StructField("born_host", StringType(), False),
    StructField("store_host", StringType(), False),
    StructField("body_size", IntegerType(), False),
    StructField("reconsume_times", IntegerType(), False),
    StructField("properties", MapType(StringType(), StringType(), True), False),
)
BODY_FIELD = StructField("body", BinaryType(), False)


def message_schema(include_body: bool) -> StructType:
    """The data source's schema; ``body`` is a column only when ``includeBody`` is set."""
    return StructType([*MESSAGE_FIELDS, *((BODY_FIELD,) if include_body else ())])


OFFSETS_SCHEMA = StructType(
    [
        StructField("ts", LongType()),
        StructField("cluster", StringType()),
        StructField("broker", StringType()),
        StructField("broker_addr", StringType()),
        StructField("group", StringType()),
        StructField("topic", StringType()),
        StructField("queue_id", IntegerType()),
        StructField("consumer_offset", LongType()),
        StructField("broker_offset", LongType()),
        StructField("min_offset", LongType()),
        StructField("store_timestamp", LongType()),
    ]
)

COUNTERS_SCHEMA = StructType(
    [
        StructField("ts", LongType()),
        StructField("cluster", StringType()),
        StructField("broker", StringType()),
        StructField("broker_addr", StringType()),
        StructField("boot_timestamp", LongType()),
        StructField("kind", StringType()),
        StructField("topic", StringType()),
        StructField("group", StringType()),
        StructField("total", LongType()),
        # the counter's total when the UTC day began (absent in rows written before it was kept)
        StructField("morning", LongType()),
    ]
)
