"""The ``quiver`` PySpark data source: a topic's messages as a DataFrame, read over the protocol.

    spark.dataSource.register(QuiverDataSource)      # session.get_session() does this
    df = spark.read.format("quiver").option("namesrv", "127.0.0.1:9876").option("topics", "Orders").load()

The driver plans partitions (``planner.plan``: broker, topic, queue, offset range; big
ranges split); each executor reads its own partitions with pipelined tool pulls
(``broker_core.client.rangescan``) and hands Spark Arrow record batches, so nothing but
query results reaches the driver.  Options: ``spark_reports.options``; columns:
``spark_reports.schemas.MESSAGE_FIELDS``.

Filters on ``store_timestamp`` (>, >=, <, <=, =) are pushed down into the offset ranges
when Spark offers them (``spark.sql.python.filterPushdown.enabled``, set by our session),
so a SQL query over the last hour reads the last hour only.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import operator
from collections.abc import AsyncGenerator, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from broker_core.client.rangescan import ScanStats, scan_queue
from broker_core.model.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
)
from spark_reports.options import ScanOptions
from spark_reports.planner import QueueRange, admin_client, plan
from spark_reports.schemas import message_schema

SOURCE_NAME = "quiver"
log = logging.getLogger(__name__)
# Rows per Arrow batch handed to Spark.
BATCH_ROWS = 8192
_TS = pa.timestamp("us", tz="UTC")
_ARROW_FIELDS = [
    pa.field("topic", pa.string(), False),
    pa.field("broker", pa.string(), False),
    pa.field("queue_id", pa.int32(), False),
    pa.field("queue_offset", pa.int64(), False),
    pa.field("commit_log_offset", pa.int64(), False),
    pa.field("msg_id", pa.string(), False),
    pa.field("unique_key", pa.string()),
    pa.field("tags", pa.string()),
    pa.field("keys", pa.string()),
    pa.field("born_timestamp", _TS, False),
    pa.field("store_timestamp", _TS, False),
    pa.field("born_host", pa.string(), False),
    pa.field("store_host", pa.string(), False),
    pa.field("body_size", pa.int32(), False),
    pa.field("reconsume_times", pa.int32(), False),
    pa.field("properties", pa.map_(pa.string(), pa.string()), False),
]
_SCHEMAS = {
    False: pa.schema(_ARROW_FIELDS),
    True: pa.schema([*_ARROW_FIELDS, pa.field("body", pa.binary(), False)]),
}


class QuiverDataSource(DataSource):
    """``format("quiver")``: the messages of a Quiver (or RocketMQ 4) cluster's topics."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return message_schema(ScanOptions.parse(self.options).include_body)

    def reader(self, schema: StructType) -> DataSourceReader:
        return QuiverReader(ScanOptions.parse(self.options))


class QuiverReader(DataSourceReader):
    """Plans on the driver, reads on the executors; picklable (options and ranges only)."""

    def __init__(self, options: ScanOptions) -> None:
        self.options = options
        self.pushed: list[tuple[str, int]] = []  # (operator, epoch ms) on store_timestamp

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 (Spark's name)
        """Take the bounds on ``store_timestamp``; Spark still checks every filter it gets back."""
        for f in filters:
            bound = _time_bound(f)
            if bound is None:
                yield f
            else:
                self.pushed.append(bound)
                yield f  # returned too: the ranges are widened bounds, Spark checks exactly

    def partitions(self) -> Sequence[InputPartition]:
        start_ms, end_ms = self.options.start_ms, self.options.end_ms
        for op, ms in self.pushed:
            if op in (">", ">=", "="):
                start_ms = ms if start_ms is None else max(start_ms, ms)
            if op in ("<", "<=", "="):  # end_ms is exclusive
                end_ms = ms + 1 if end_ms is None else min(end_ms, ms + 1)
        options = self.options
        if (start_ms, end_ms) != (options.start_ms, options.end_ms):
            options = _with_times(options, start_ms, end_ms)
        return [InputPartition(r) for r in plan(options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        queue_range: QueueRange | None = partition.value
        if queue_range is None:  # no ranges planned: Spark still runs one empty partition
            return
        yield from read_range(self.options, queue_range)


def read_range(
    options: ScanOptions, queue_range: QueueRange, stats: ScanStats | None = None
) -> Iterator[pa.RecordBatch]:
    """The messages of one partition as Arrow batches (blocking; an event loop of its own).

    The loop runs once per batch of ``BATCH_ROWS`` messages, not once per pull: the pulls
    in flight complete while it runs, and the Arrow batch is built while they wait.
    """
    loop = asyncio.new_event_loop()
    stats = stats if stats is not None else ScanStats()
    admin = admin_client(options)
    scan = scan_queue(
        admin,
        queue_range.addr,
        queue_range.queue,
        queue_range.start,
        queue_range.end,
        stats=stats,
        depth=options.pipeline_depth,
    )
    try:
        done = False
        while not done:
            rows, done = loop.run_until_complete(_next_rows(scan, queue_range))
            if rows:
                yield to_arrow(rows, queue_range.broker, options.include_body)
        if stats.missing:  # in the executor's log: the rows are what is stored, no more
            log.warning(
                "%s queue %d [%d, %d): %d offsets no longer stored (expired) or never written: skipped",
                queue_range.topic,
                queue_range.queue_id,
                queue_range.start,
                queue_range.end,
                stats.missing,
            )
    finally:
        try:
            loop.run_until_complete(scan.aclose())
            loop.run_until_complete(admin.close())
        finally:
            loop.close()


async def _next_rows(
    scan: AsyncGenerator[list[MessageExt], None], queue_range: QueueRange
) -> tuple[list[MessageExt], bool]:
    """About ``BATCH_ROWS`` messages within the range's times; and whether the scan ended."""
    rows: list[MessageExt] = []
    while len(rows) < BATCH_ROWS:
        try:
            batch = await anext(scan)
        except StopAsyncIteration:
            return rows, True
        rows.extend(_in_time(batch, queue_range.start_ms, queue_range.end_ms))
    return rows, False


def _in_time(batch: list[MessageExt], start_ms: int | None, end_ms: int | None) -> list[MessageExt]:
    if start_ms is None and end_ms is None:
        return batch
    lo = start_ms if start_ms is not None else -(2**63)
    hi = end_ms if end_ms is not None else 2**63
    return [m for m in batch if lo <= m.store_timestamp < hi]


_FIELDS = operator.attrgetter(
    "topic",
    "queue_id",
    "queue_offset",
    "commit_log_offset",
    "msg_id",
    "born_timestamp",
    "store_timestamp",
    "born_host",
    "store_host",
    "reconsume_times",
)
_TS_MS = pa.timestamp("ms", tz="UTC")
_PROPERTIES = pa.map_(pa.string(), pa.string())


def to_arrow(messages: list[MessageExt], broker: str, include_body: bool) -> pa.RecordBatch:
    """One Arrow record batch of ``messages`` in the source's column order.

    The columns come out of one C-level transpose (attrgetter + zip) and the properties
    map from flat key and value lists, not one Python loop per column: building the batch
    is most of an executor's time per message.
    """
    topic, queue_id, queue_offset, phys, msg_id, born, stored, born_host, store_host, reconsume = zip(
        *map(_FIELDS, messages), strict=True
    )
    props = [m.properties for m in messages]
    keys = pa.array(list(itertools.chain.from_iterable(props)), pa.string())
    values = pa.array(list(itertools.chain.from_iterable(p.values() for p in props)), pa.string())
    offsets = pa.array(list(itertools.accumulate(map(len, props), initial=0)), pa.int32())
    columns: list[Any] = [
        topic,
        [broker] * len(messages),
        queue_id,
        queue_offset,
        phys,
        msg_id,
        [p.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) for p in props],
        [p.get(PROPERTY_TAGS) for p in props],
        [p.get(PROPERTY_KEYS) for p in props],
        pa.array(born, pa.int64()).cast(_TS_MS).cast(_TS),
        pa.array(stored, pa.int64()).cast(_TS_MS).cast(_TS),
        born_host,
        store_host,
        [len(m.body) for m in messages],
        reconsume,
        pa.MapArray.from_arrays(offsets, keys, values, type=_PROPERTIES),
    ]
    if include_body:
        columns.append([m.uncompressed_body() for m in messages])
    schema = _SCHEMAS[include_body]
    arrays = [
        col if isinstance(col, pa.Array) else pa.array(col, f.type)
        for col, f in zip(columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _time_bound(f: Filter) -> tuple[str, int] | None:
    """``(operator, epoch ms)`` for a comparison of ``store_timestamp`` with a time, else None."""
    ops = {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<", LessThanOrEqual: "<=", EqualTo: "="}
    op = ops.get(type(f))
    if op is None or tuple(getattr(f, "attribute", ())) != ("store_timestamp",):
        return None
    value = getattr(f, "value", None)
    if not isinstance(value, dt.datetime):
        return None
    # A naive datetime is the worker's local time, as Spark made it (datetime.fromtimestamp);
    # .timestamp() reads it back the same way.  Bounds are inclusive either side (">" and
    # "<" widened by the partition planning): Spark's own check is the exact one.
    return op, int(value.timestamp() * 1000)


def _with_times(options: ScanOptions, start_ms: int | None, end_ms: int | None) -> ScanOptions:
    from dataclasses import replace

    return replace(options, start_ms=start_ms, end_ms=end_ms)
