"""``python -m spark_reports traffic|lag ...``: one report run, what the Celery task launches.

    python -m spark_reports traffic --cluster default --namesrv 127.0.0.1:9876 \\
        --history var/history --out var/reports/<run id> --since 1764064800000 --until 1764068400000

Speaks JSON lines on stdout (``spark_reports.outputs``): progress as Spark stages finish,
then ``done`` with the summary, or ``error`` with a message a person can act on (exit 2
for bad input: options, unknown topic; 1 for the rest: cluster unreachable, no Java).
Spark's own logging goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spark_reports.executorenv import ExecutorEnvError
from spark_reports.java import JavaRuntimeMissing
from spark_reports.jobs.common import ReportParams, finish, write_tables
from spark_reports.options import SourceOptionError, parse_time
from spark_reports.outputs import TABLES
from spark_reports.planner import SourceUnavailableError
from spark_reports.session import SparkMasterUnreachable

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


def emit(event: str, **fields: Any) -> None:
    """One JSON line on stdout (flushed: the parent reads as we go)."""
    sys.stdout.write(json.dumps({"event": event, **fields}, default=str) + "\n")
    sys.stdout.flush()


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line as an error event, not a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SourceOptionError(f"{self.prog}: {message}")


def parse_args(argv: list[str]) -> tuple[str, ReportParams, str | None]:
    parser = _Parser(prog="python -m spark_reports", description="Build one traffic or lag report.")
    parser.add_argument("kind", choices=sorted(TABLES))
    parser.add_argument("--cluster", default="", help="the cluster's name in the offset history")
    parser.add_argument("--namesrv", required=True, help="nameserver address(es), a:p;b:p")
    parser.add_argument("--history", required=True, help="the offset history directory (or Hadoop path)")
    parser.add_argument("--out", required=True, help="the run's output directory (or Hadoop path)")
    parser.add_argument("--since", required=True, help="start of the period: epoch ms or ISO 8601")
    parser.add_argument("--until", required=True, help="end of the period (exclusive)")
    parser.add_argument("--topics", default="", help="comma-separated topics (default: all user topics)")
    parser.add_argument("--bucket-seconds", type=int, default=60, help="lag series bucket")
    parser.add_argument("--master", default=None, help="Spark master (default SPARK_MASTER or local[*])")
    parser.add_argument(
        "--source-option", action="append", default=[], metavar="KEY=VALUE", help="a quiver source option"
    )
    args = parser.parse_args(argv)
    since, until = parse_time("since", args.since), parse_time("until", args.until)
    assert since is not None and until is not None
    extra = {}
    for item in args.source_option:
        key, sep, value = item.partition("=")
        if not sep:
            raise SourceOptionError(f"--source-option {item!r} is not KEY=VALUE")
        extra[key] = value
    params = ReportParams(
        cluster=args.cluster,
        namesrv=args.namesrv,
        history=args.history,
        out=args.out,
        since_ms=since,
        until_ms=until,
        topics=[t.strip() for t in args.topics.split(",") if t.strip()],
        bucket_seconds=args.bucket_seconds,
        source_options=extra,
    )
    params.check()
    return args.kind, params, args.master


class StageProgress:
    """Report Spark stages done / total as they change, from a daemon thread."""

    def __init__(
        self,
        spark: Any,
        report: Callable[[int, int], None],
        interval_s: float = 0.5,
        group: str | None = None,
    ) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.group = group
        self.report = report
        self.interval_s = interval_s
        self.stages: dict[int, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stage-progress", daemon=True)

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def poll(self) -> tuple[int, int]:
        for job_id in self.tracker.getJobIdsForGroup(self.group):
            job = self.tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job else ():
                info = self.tracker.getStageInfo(stage_id)
                done = info is None or (info.numTasks > 0 and info.numCompletedTasks >= info.numTasks)
                self.stages[stage_id] = self.stages.get(stage_id, False) or done
        return sum(self.stages.values()), len(self.stages)

    def _loop(self) -> None:
        last = (-1, -1)
        while not self._stop.wait(self.interval_s):
            try:
                now = self.poll()
            except Exception:  # the JVM is going away at the end of the run
                return
            if now != last:
                self.report(*now)
                last = now


def run(
    kind: str, params: ReportParams, master: str | None, emit: Callable[..., None] = emit
) -> dict[str, Any]:
    """Build, write and summarize one report; returns the summary.  Its Spark jobs carry a
    job group of their own, so the progress counts this run's stages only (a warm session
    has run others before)."""
    from spark_reports.jobs import lag, traffic
    from spark_reports.session import get_session

    started = time.monotonic()
    spark = get_session(f"quiver-{kind}-report", master=master)
    group = f"quiver-{kind}-{uuid.uuid4().hex}"
    spark.sparkContext.setJobGroup(group, f"the {kind} report", interruptOnCancel=True)
    progress = StageProgress(
        spark, lambda done, total: emit("progress", stagesDone=done, stagesTotal=total), group=group
    )
    try:
        with progress:
            job = traffic if kind == "traffic" else lag
            tables, summary = job.run(spark, params)
            write_tables(params.out, tables, TABLES[kind])  # type: ignore[index]
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    summary.update(
        kind=kind,
        cluster=params.cluster,
        since=params.since_ms,
        until=params.until_ms,
        durationSeconds=round(time.monotonic() - started, 3),
    )
    finish(params.out, summary)
    return summary


# Failures said as they are: a bad option or period, an unknown topic, an unreachable
# cluster or master, no Java, a bad executor setting.
_PLAIN_ERRORS = (
    SourceOptionError,
    SourceUnavailableError,
    JavaRuntimeMissing,
    SparkMasterUnreachable,
    ExecutorEnvError,
)


def error_message(exc: BaseException) -> str:
    """The sentence a failed run shows (in the ``error`` event, the console, the run's record)."""
    return str(exc) if isinstance(exc, _PLAIN_ERRORS) else spark_error_message(exc)


def exit_code(exc: BaseException) -> int:
    """2 for bad input (a bad option, even one found by a Spark worker), else 1."""
    if isinstance(exc, SourceOptionError) or "SourceOptionError" in str(exc):
        return EXIT_BAD_INPUT
    return EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # the platform's warm session (spark_reports/warm.py)
        from spark_reports import warm

        return warm.main(argv[1:])
    try:
        kind, params, master = parse_args(argv)
        summary = run(kind, params, master)
    except Exception as exc:
        if not isinstance(exc, _PLAIN_ERRORS):
            # The whole text (Spark's, with the worker's traceback in it) goes to stderr,
            # which the console keeps as the run's log; the event carries the sentence.
            traceback.print_exc(file=sys.stderr)
        emit("error", message=error_message(exc))
        return exit_code(exc)
    emit("done", summary=summary)
    return 0


# An exception line of a Python traceback ("ModuleNotFoundError: No module named 'x'") and a
# frame line ('  File "/x/datasource.py", line 27, in <module>').
_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)): (.+)$"
)
_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')
_OUR_ERRORS = ("SourceOptionError", "SourceUnavailableError", "AdminError", "AdminUnreachableError")


def spark_error_message(exc: BaseException) -> str:
    """One sentence saying what went wrong, out of a Spark error that may wrap a Python one.

    An error raised in the data source's planning or reading (on the driver's Python
    worker or an executor's) reaches the driver as an AnalysisException or PythonException
    whose text holds the original traceback, and whose first line is only its heading.
    The cause is the traceback's last exception line; where is the last frame before it.
    Our own refusals (a bad option, an unknown topic) are said as they are.
    """
    text = str(exc)
    lines = text.splitlines()
    cause = None
    for index in range(len(lines) - 1, -1, -1):
        match = _EXCEPTION_LINE.match(lines[index].strip())
        if match is None:
            continue
        name, message = match.groups()
        if name in _OUR_ERRORS:
            return message.strip()
        where = next(
            (frame for frame in map(_FRAME_LINE.match, reversed(lines[:index])) if frame is not None), None
        )
        cause = f"{name}: {message.strip()}"
        if where is not None:
            path, line, function = where.groups()
            cause += f" (at {_short_path(path)}:{line}, in {function.strip()})"
        break
    if cause is None:
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return f"{type(exc).__name__}: {first}"
    heading = lines[0].strip() if lines else ""
    if "PYTHON_DATA_SOURCE" in heading or "PythonException" in type(exc).__name__ or "Python" in heading:
        return f"the report's Python code failed on a Spark worker: {cause}"
    return cause


def _short_path(path: str) -> str:
    """A traceback's file as a person reads it: from the package root when it is ours or a
    library's, else as given."""
    parts = Path(path).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[parts.index(marker) + 1 :])
    for package in ("spark_reports", "broker_core", "pyspark"):
        if package in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(package) :])
    return path


if __name__ == "__main__":
    sys.exit(main())
