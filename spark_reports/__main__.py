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
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_reports.java import JavaRuntimeMissing
from spark_reports.jobs.common import ReportParams, finish, write_tables
from spark_reports.options import SourceOptionError, parse_time
from spark_reports.outputs import TABLES
from spark_reports.planner import SourceUnavailableError

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

    def __init__(self, spark: Any, report: Callable[[int, int], None], interval_s: float = 0.5) -> None:
        self.tracker = spark.sparkContext.statusTracker()
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
        for job_id in self.tracker.getJobIdsForGroup(None):
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


def run(kind: str, params: ReportParams, master: str | None) -> dict[str, Any]:
    """Build, write and summarize one report; returns the summary."""
    from spark_reports.jobs import lag, traffic
    from spark_reports.session import get_session

    started = time.monotonic()
    spark = get_session(f"quiver-{kind}-report", master=master)
    with StageProgress(spark, lambda done, total: emit("progress", stagesDone=done, stagesTotal=total)):
        job = traffic if kind == "traffic" else lag
        tables, summary = job.run(spark, params)
        write_tables(params.out, tables, TABLES[kind])  # type: ignore[index]
    summary.update(
        kind=kind,
        cluster=params.cluster,
        since=params.since_ms,
        until=params.until_ms,
        durationSeconds=round(time.monotonic() - started, 3),
    )
    finish(params.out, summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    try:
        kind, params, master = parse_args(sys.argv[1:] if argv is None else argv)
        summary = run(kind, params, master)
    except SourceOptionError as exc:
        emit("error", message=str(exc))
        return EXIT_BAD_INPUT
    except (SourceUnavailableError, JavaRuntimeMissing) as exc:
        emit("error", message=str(exc))
        return EXIT_FAILED
    except Exception as exc:  # a Spark failure: its Python-side cause, when it has one
        emit("error", message=spark_error_message(exc))
        return EXIT_BAD_INPUT if "SourceOptionError" in str(exc) else EXIT_FAILED
    emit("done", summary=summary)
    return 0


def spark_error_message(exc: BaseException) -> str:
    """The line that says what went wrong, out of a Spark error that wraps a Python one.

    An error raised in the data source's planning or reading reaches the driver as a
    PythonException or AnalysisException whose text holds the original traceback; the
    last ``...Error: message`` line of ours is the one to show.
    """
    text = str(exc)
    for marker in (
        "SourceOptionError: ",
        "SourceUnavailableError: ",
        "AdminError: ",
        "AdminUnreachableError: ",
    ):
        at = text.rfind(marker)
        if at >= 0:
            return text[at + len(marker) :].splitlines()[0].strip()
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return f"{type(exc).__name__}: {first}"


if __name__ == "__main__":
    sys.exit(main())
