"""A run's Parquet tables, read in the console process with pyarrow (no Spark to view them).

Tables are directories of ``part-*.parquet`` files (spark_reports/outputs.py); the reports
directory may be local or any filesystem pyarrow opens by URI (``hdfs://``, ``s3://``...).
Rows come out as JSON-ready dicts (timestamps as epoch ms), as CSV, or as the Parquet
files themselves (one file as is, several zipped).  A page of rows may be sorted by any
column over the whole table (``page``); how its values are shown is display.py's.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from spark_reports.outputs import TABLES

MAX_ROWS = 5000  # one JSON page at most


class TableMissing(LookupError):
    """The run has no such table (unknown name, or the run did not write it)."""


def table_names(kind: str) -> list[str]:
    """The tables a run of ``kind`` writes, in the contract's order."""
    return list(TABLES.get(kind, {}))  # type: ignore[call-overload]


def table_columns(kind: str, table: str) -> list[str]:
    """The columns the contract gives ``table`` of a ``kind`` run, in order."""
    return list(TABLES.get(kind, {}).get(table, ()))  # type: ignore[call-overload]


def _fs(path: str) -> tuple[pafs.FileSystem, str]:
    if "://" in path:
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), path


def part_files(output: str, kind: str, table: str) -> tuple[pafs.FileSystem, list[str]]:
    """The filesystem and the Parquet files of ``table`` (sorted); TableMissing otherwise."""
    if table not in table_names(kind):
        raise TableMissing(f"a {kind} report has no table {table!r} (tables: {', '.join(table_names(kind))})")
    fs, base = _fs(f"{output.rstrip('/')}/{table}")
    try:
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    except (FileNotFoundError, OSError):
        raise TableMissing(f"the run wrote no table {table!r}") from None
    files = sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.File
        and i.base_name.endswith(".parquet")
        and not i.base_name.startswith(("_", "."))
    )
    if not files:
        raise TableMissing(f"the run wrote no table {table!r}")
    return fs, files


def read(output: str, kind: str, table: str) -> pa.Table:
    """The whole table (every part file, in order)."""
    fs, files = part_files(output, kind, table)
    parts = [pq.read_table(f, filesystem=fs) for f in files]
    return pa.concat_tables(parts, promote_options="default") if len(parts) > 1 else parts[0]


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float) and value != value:  # NaN
        return None
    return value


def as_rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts, timestamps as epoch ms (JSON-ready)."""
    return [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]


ColumnType = Literal["time", "int", "float", "bool", "text"]


def column_type(data_type: pa.DataType) -> ColumnType:
    """What a column holds, as the page formats and sorts it."""
    if pa.types.is_timestamp(data_type) or pa.types.is_date(data_type):
        return "time"
    if pa.types.is_integer(data_type):
        return "int"
    if pa.types.is_floating(data_type) or pa.types.is_decimal(data_type):
        return "float"
    if pa.types.is_boolean(data_type):
        return "bool"
    return "text"


def page(
    output: str,
    kind: str,
    table: str,
    limit: int,
    offset: int,
    sort: str | None = None,
    descending: bool = False,
) -> dict[str, Any]:
    """``limit`` rows from ``offset`` with the columns, their types and the total count.

    Unsorted, it reads no more than the page needs: the count comes from the files'
    metadata and the rows from the first ``offset + limit`` (a day's lag_queue is ~830 k
    rows).  Sorted by ``sort`` (a column; ValueError for another name), it reads that one
    column whole, orders it (nulls last, ties in file order) and takes the page's rows.
    """
    fs, files = part_files(output, kind, table)
    data = ds.dataset(files, filesystem=fs, format="parquet")
    limit, offset = max(1, min(MAX_ROWS, limit)), max(0, offset)
    names = data.schema.names
    if sort is not None and sort not in names:
        raise ValueError(f"the table {table!r} has no column {sort!r} (columns: {', '.join(names)})")
    count = data.count_rows()
    if offset >= count:
        rows = data.schema.empty_table()
    elif sort is None:
        rows = data.head(offset + limit).slice(offset, limit)
    else:
        keys = data.to_table(columns=[sort]).column(sort)
        order = pc.array_sort_indices(
            keys, order="descending" if descending else "ascending", null_placement="at_end"
        )
        rows = data.take(order.slice(offset, limit))
    return {
        "table": table,
        "columns": names,
        "types": {f.name: column_type(f.type) for f in data.schema},
        "count": count,
        "offset": offset,
        "limit": limit,
        "sort": {"column": sort, "descending": descending} if sort is not None else None,
        "rows": as_rows(rows),
    }


def as_csv(output: str, kind: str, table: str) -> bytes:
    """The whole table as CSV with a header (times ISO 8601)."""
    sink = io.BytesIO()
    pacsv.write_csv(read(output, kind, table), sink)
    return sink.getvalue()


def as_parquet(output: str, kind: str, table: str) -> tuple[bytes, str]:
    """The table's Parquet data: ``(bytes, "parquet")`` for a single file, or a zip of every
    part file (``(bytes, "zip")``) when Spark wrote several."""
    fs, files = part_files(output, kind, table)
    if len(files) == 1:
        with fs.open_input_stream(files[0]) as f:
            return f.read(), "parquet"
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_STORED) as archive:
        for path in files:
            with fs.open_input_stream(path) as f:
                archive.writestr(f"{table}/{path.rsplit('/', 1)[-1]}", f.read())
    return sink.getvalue(), "zip"


def column_sums(
    data: pa.Table, keys: tuple[str, ...], values: tuple[str, ...]
) -> dict[tuple, dict[str, float]]:
    """``{key tuple: {value column: sum}}`` over the whole table."""
    if data.num_rows == 0:
        return {}
    grouped = data.group_by(list(keys)).aggregate([(v, "sum") for v in values]).to_pylist()
    return {tuple(row[k] for k in keys): {v: row[f"{v}_sum"] or 0 for v in values} for row in grouped}
