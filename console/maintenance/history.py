"""The offset history and traffic counters: date-partitioned JSON-lines files.

The offset-persistence job appends one snapshot per broker every few seconds; the Spark
lag and traffic reports (spark_reports/history.py), the console's charts and the alert
check read them (``offset_rows``, ``queue_lag`` here).  Layout, under the history
directory (``QUIVER_HISTORY_DIR``, ``<data dir>/history`` by default)::

    offsets/date=YYYY-MM-DD/<broker>.jsonl    ts, cluster, broker, broker_addr, group, topic,
                                              queue_id, consumer_offset, broker_offset,
                                              min_offset, store_timestamp
    counters/date=YYYY-MM-DD/<broker>.jsonl   ts, cluster, broker, broker_addr, boot_timestamp,
                                              kind (put|get|produce), topic, group,
                                              total, morning

``date=`` directories are what Spark's partition discovery reads as a column.  Times are
epoch milliseconds, dates UTC.  A counter's ``total`` runs from the broker's boot and its
``morning`` is what it had counted when the UTC day began, so a day's first row still says
how much of the total came that day (``counter_baseline``).  Only the run holding a
broker's overlap lock writes that broker's file, and each snapshot goes out in one
``write``, so lines never interleave; a crash can leave at most a torn last line, which
readers skip as malformed.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from broker_core.client.adminmodels import OffsetSnapshot

OFFSETS = "offsets"
COUNTERS = "counters"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def partition_date(ts_ms: int) -> str:
    """The UTC date of ``ts_ms`` as the partition value (``2026-11-23``)."""
    return dt.datetime.fromtimestamp(ts_ms / 1000, tz=dt.UTC).date().isoformat()


def _file_name(broker_name: str, broker_addr: str) -> str:
    return _UNSAFE.sub("_", f"{broker_name}@{broker_addr}") + ".jsonl"


def snapshot_rows(
    snapshot: OffsetSnapshot, cluster: str, broker_addr: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The offset rows and counter rows one snapshot contributes."""
    base = {"ts": snapshot.timestamp_ms, "cluster": cluster, "broker": snapshot.broker_name}
    base["broker_addr"] = broker_addr
    offsets = [
        {
            **base,
            "group": row.group,
            "topic": row.topic,
            "queue_id": row.queue_id,
            "consumer_offset": row.consumer_offset,
            "broker_offset": row.broker_offset,
            "min_offset": row.min_offset,
            "store_timestamp": row.store_timestamp,
        }
        for row in snapshot.queues
    ]
    put_mornings, get_mornings = snapshot.topic_puts_morning, snapshot.group_gets_morning
    counters = [
        {
            **base,
            "boot_timestamp": snapshot.boot_timestamp,
            "kind": "put",
            "topic": topic,
            "group": None,
            "total": n,
            **({} if put_mornings is None else {"morning": put_mornings.get(topic, 0)}),
        }
        for topic, n in snapshot.topic_puts.items()
    ]
    counters += [
        {
            **base,
            "boot_timestamp": snapshot.boot_timestamp,
            "kind": "get",
            "topic": topic,
            "group": group,
            "total": n,
            **({} if get_mornings is None else {"morning": get_mornings.get((group, topic), 0)}),
        }
        for (group, topic), n in snapshot.group_gets.items()
    ]
    # What each producer group had stored per topic (the message log does not say).
    counters += [
        {
            **base,
            "boot_timestamp": snapshot.boot_timestamp,
            "kind": "produce",
            "topic": topic,
            "group": group,
            "total": n,
            "morning": snapshot.producer_puts_morning.get((group, topic), 0),
        }
        for (group, topic), n in snapshot.producer_puts.items()
    ]
    return offsets, counters


def counter_baseline(row: dict[str, Any], day: dt.date) -> int | None:
    """What a counter had counted before ``day`` began, for the first row of its series that
    day: its ``morning``; for rows without one (a broker that does not report it), 0 when
    the broker booted that day (everything it counted came that day), else unknown (``None``:
    the row is only a baseline for the next)."""
    if "morning" in row:
        return int(row["morning"] or 0)
    day_start_ms = int(dt.datetime.combine(day, dt.time(), tzinfo=dt.UTC).timestamp() * 1000)
    return 0 if int(row.get("boot_timestamp") or 0) >= day_start_ms else None


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"".join(orjson.dumps(row) + b"\n" for row in rows)
    with path.open("ab") as f:
        f.write(data)


def append_snapshot(
    history_dir: Path, snapshot: OffsetSnapshot, cluster: str, broker_addr: str
) -> tuple[int, int]:
    """Append one broker's snapshot to the day's files; return (offset rows, counter rows)."""
    offsets, counters = snapshot_rows(snapshot, cluster, broker_addr)
    day = f"date={partition_date(snapshot.timestamp_ms)}"
    name = _file_name(snapshot.broker_name, broker_addr)
    _append(history_dir / OFFSETS / day / name, offsets)
    _append(history_dir / COUNTERS / day / name, counters)
    return len(offsets), len(counters)


def offset_rows(
    history_dir: Path, since_ms: int, until_ms: int, *, containing: bytes | None = None
) -> Iterator[dict[str, Any]]:
    """The offset rows of the days ``[since_ms, until_ms]`` touches, file by file (rows of
    those days outside the range included: callers filter on ``ts``).

    ``containing``: only lines holding these bytes are parsed (a group's name, quoted), a
    cheap filter before JSON.  Torn lines (a crash mid-write) and unreadable files are skipped.
    """
    day = dt.date.fromisoformat(partition_date(since_ms))
    last = dt.date.fromisoformat(partition_date(until_ms))
    while day <= last:
        for path in sorted((history_dir / OFFSETS / f"date={day.isoformat()}").glob("*.jsonl")):
            try:
                lines = path.read_bytes().splitlines()
            except OSError:
                continue
            for line in lines:
                if containing is not None and containing not in line:
                    continue
                try:
                    yield orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
        day += dt.timedelta(days=1)


def recorded_between(history_dir: Path, since_ms: int, until_ms: int, cluster: str) -> bool:
    """Whether the platform recorded any snapshot of ``cluster`` in ``[since_ms, until_ms)``:
    whether it was watching the cluster then (offsets or put/get counters).

    Cheap: each file of the days the range touches is judged by its first row (when its
    recording began) and its modification time (when it last grew).
    """
    day = dt.date.fromisoformat(partition_date(since_ms))
    last = dt.date.fromisoformat(partition_date(max(since_ms, until_ms - 1)))
    while day <= last:
        for kind in (OFFSETS, COUNTERS):
            for path in (history_dir / kind / f"date={day.isoformat()}").glob("*.jsonl"):
                try:
                    with path.open("rb") as f:
                        first = orjson.loads(f.readline())
                    grew_ms = path.stat().st_mtime * 1000
                except (OSError, orjson.JSONDecodeError):
                    continue
                if (
                    first.get("cluster") == cluster
                    and first.get("ts", until_ms) < until_ms
                    and grew_ms >= since_ms
                ):
                    return True
        day += dt.timedelta(days=1)
    return False


def queue_lag(row: dict[str, Any]) -> int:
    """An offset row's lag: messages from the next one to consume (the committed offset, or
    the first still stored when expiry passed it) to the queue's end; never below 0.  The
    group list, the alerts and the Spark lag report count it the same way."""
    next_offset = max(int(row["consumer_offset"]), int(row.get("min_offset") or 0))
    return max(0, int(row["broker_offset"]) - next_offset)


def prune(history_dir: Path, keep_days: int, today: dt.date | None = None) -> list[str]:
    """Delete the partitions older than ``keep_days`` days (today counts as one); return them."""
    today = today or dt.datetime.now(dt.UTC).date()
    oldest_kept = today - dt.timedelta(days=keep_days - 1)
    removed = []
    for kind in (OFFSETS, COUNTERS):
        base = history_dir / kind
        if not base.is_dir():
            continue
        for part in sorted(base.iterdir()):
            name = part.name
            if not (part.is_dir() and name.startswith("date=")):
                continue
            try:
                day = dt.date.fromisoformat(name.removeprefix("date="))
            except ValueError:
                continue  # not ours: leave it
            if day < oldest_kept:
                shutil.rmtree(part, ignore_errors=True)
                removed.append(f"{kind}/{name}")
    return removed
