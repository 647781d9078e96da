"""Run one report: ``python -m spark_reports`` as a child process, followed line by line.

The child speaks JSON lines on stdout (spark_reports/outputs.py): progress (Spark stages
done / total), then ``done`` with the summary or ``error`` with a message.  Each progress
line updates the run's row and is pushed to the run's websocket group; the outcome is
recorded, with a sentence rather than a stack trace when something is missing (Java).

The child runs in its own process group, so a timeout kills Spark's JVM with it.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from django.utils import timezone

from console.core.supervisor import child_preexec
from console.quiver import platform_settings, tls_source_options
from console.reports import services, warm
from console.reports.models import ReportRun
from nameserver.clusters import find_cluster

REPO = Path(__file__).resolve().parents[2]
STDERR_TAIL_LINES = 40
# What Spark's launcher or the JVM says when there is no usable Java runtime.
JAVA_MISSING = (
    "JAVA_HOME is not set",
    "java: not found",
    "java: command not found",
    "Unable to locate a Java Runtime",
    "No such file or directory: 'java'",
    "JAVA_GATEWAY_EXITED",
    "Java gateway process exited",
    "UnsupportedClassVersionError",
)
JAVA_HELP = (
    "Spark needs a Java runtime (Java 17 or newer) and none could be started: install one "
    "(e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME for the Celery worker"
)


def group_name(run_id: str) -> str:
    """The Channels group a run's progress is pushed to."""
    return f"report-{run_id}"


def push(run: ReportRun) -> None:
    """Tell the run's page (its websocket group) where the run is; never fails the run."""
    try:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        layer = get_channel_layer()
        if layer is not None:
            async_to_sync(layer.group_send)(group_name(str(run.id)), {"type": "report.update", **state(run)})
    except Exception:  # noqa: BLE001 - a page missing an update is no reason to stop a report
        pass


def state(run: ReportRun) -> dict[str, Any]:
    """What the run page follows: status, progress, error."""
    return {
        "id": str(run.id),
        "status": run.status,
        "stagesDone": run.stages_done,
        "stagesTotal": run.stages_total,
        "percent": run.percent,
        "error": run.error,
    }


def command(run: ReportRun, namesrv_addr: str) -> list[str]:
    """The child's command line for ``run``."""
    argv = [
        sys.executable,
        "-m",
        "spark_reports",
        run.kind,
        "--cluster",
        run.cluster,
        "--namesrv",
        namesrv_addr,
        "--history",
        platform_settings()["REPORTS_HISTORY_PATH"] or str(platform_settings()["HISTORY_DIR"]),
        "--out",
        run.output,
        "--since",
        str(run.since),
        "--until",
        str(run.until),
        "--master",
        platform_settings()["SPARK_MASTER"],
    ]
    if run.topics:
        argv += ["--topics", ",".join(run.topics)]
    return argv + tls_source_options()


@dataclass
class Outcome:
    """What the child said and how it ended."""

    summary: dict[str, Any] | None = None
    error: str = ""
    returncode: int | None = None
    timed_out: bool = False
    stderr: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=STDERR_TAIL_LINES)
    )
    stray: collections.deque[str] = field(default_factory=lambda: collections.deque(maxlen=10))

    def message(self, timeout_s: int) -> str:
        """Why the run failed, in a sentence (with the child's last words when they help)."""
        tail = "\n".join(self.stderr)
        if self.timed_out:
            return f"the report took longer than {timeout_s} s and was stopped"
        if any(sign in tail or sign in self.error for sign in JAVA_MISSING):
            return f"{JAVA_HELP}. {self.error}".strip()
        if self.error:
            return self.error
        said = "\n".join([*self.stray, tail]).strip()
        return f"the report stopped (exit status {self.returncode}) without saying why" + (
            f":\n{said[-4000:]}" if said else ""
        )


def _drain(stream: IO[str], into: collections.deque[str], log: IO[str] | None) -> None:
    """Keep the child's last words for the outcome, and every line in the run's log."""
    for line in stream:
        into.append(line.rstrip("\n"))
        if log is not None:
            log.write(line)


def _open_log(run: ReportRun, argv: list[str]) -> IO[str] | None:
    """The run's log, opened for the child's stderr (None when it cannot be written: the
    run goes on without one)."""
    path = services.run_log(str(run.id))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        log = path.open("w", encoding="utf-8", buffering=1)
    except OSError:
        return None
    log.write("$ " + " ".join(argv) + "\n")
    return log


def _kill(proc: subprocess.Popen[str]) -> None:
    """Stop the child's whole process group (Spark's JVM included)."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def follow(run: ReportRun, argv: list[str], timeout_s: int, env: dict[str, str] | None = None) -> Outcome:
    """Run ``argv`` (``python -m spark_reports ...``), update ``run`` on each progress line,
    and return how it ended: in the warm session (``warm.py``) unless
    ``QUIVER_SPARK_WARM_SECONDS`` is 0, else as a child process of its own."""
    child_env = {**os.environ, **(env or {})}
    child_env.setdefault("SPARK_MASTER", platform_settings()["SPARK_MASTER"])
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), child_env.get("PYTHONPATH", "")) if p)
    if platform_settings()["SPARK_WARM_SECONDS"] > 0:
        return _follow_warm(run, argv, timeout_s, child_env)
    return _follow_child(run, argv, timeout_s, child_env)


def _event(run: ReportRun, outcome: Outcome, line: str, log: IO[str] | None) -> None:
    """One line from the report: progress saved and pushed, the end recorded."""
    event = parse(line)
    if event is None:
        if line.strip():
            outcome.stray.append(line.rstrip("\n"))
        return
    if event.get("event") == "progress":
        done, total = int(event.get("stagesDone", 0)), int(event.get("stagesTotal", 0))
        if (done, total) != (run.stages_done, run.stages_total):
            run.stages_done, run.stages_total = done, total
            run.save(update_fields=["stages_done", "stages_total"])
            push(run)
    elif event.get("event") == "done":
        outcome.summary = event.get("summary") or {}
        outcome.returncode = 0
    elif event.get("event") == "error":
        outcome.error = str(event.get("message") or "the report failed")
        outcome.returncode = int(event.get("exitCode") or 1)
        if log is not None and event.get("detail"):
            log.write(str(event["detail"]))


def _close_log(log: IO[str] | None, outcome: Outcome, timeout_s: int) -> None:
    if log is not None:
        said = outcome.message(timeout_s) if outcome.returncode else "done"
        log.write(f"[exit status {outcome.returncode}] {said}\n")
        log.close()


def _follow_child(run: ReportRun, argv: list[str], timeout_s: int, child_env: dict[str, str]) -> Outcome:
    """The run as a child process of its own (a cold Spark session)."""
    outcome = Outcome()
    try:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,
            # A worker killed mid-run takes its report with it (Spark's JVM exits with its driver);
            # Spark runs niced, below the broker and the maintenance worker.
            preexec_fn=child_preexec(os.getpid(), nice=platform_settings()["LONG_WORK_NICE"]),
        )
    except OSError as exc:
        outcome.error = f"the report could not be started: {exc}"
        return outcome
    assert proc.stdout is not None and proc.stderr is not None
    log = _open_log(run, argv)
    stderr = threading.Thread(target=_drain, args=(proc.stderr, outcome.stderr, log), daemon=True)
    stderr.start()

    def expire() -> None:
        outcome.timed_out = True
        _kill(proc)

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        for line in proc.stdout:
            _event(run, outcome, line, None)
        proc.wait()
    finally:
        timer.cancel()
        _kill(proc)
        stderr.join(5)
        outcome.returncode = proc.returncode
        _close_log(log, outcome, timeout_s)
    return outcome


def _follow_warm(run: ReportRun, argv: list[str], timeout_s: int, child_env: dict[str, str]) -> Outcome:
    """The run in the warm session: its command line sent over the session's socket, its
    lines read back as a child's would be.  Past ``timeout_s`` the session is killed."""
    outcome = Outcome()
    master = platform_settings()["SPARK_MASTER"]
    log = _open_log(run, [*argv, f"(in the warm Spark session for {master})"])
    try:
        conn = warm.connect(master, argv[3:], child_env)  # argv less "python -m spark_reports"
    except OSError as exc:
        outcome.error = f"the report could not be started: {exc}"
        outcome.returncode = 1
        _close_log(log, outcome, timeout_s)
        return outcome
    pid = warm.peer_pid(conn)

    def expire() -> None:
        outcome.timed_out = True
        if pid is not None:
            warm.kill_pid(pid)
        conn.close()

    timer = threading.Timer(timeout_s, expire)
    timer.daemon = True
    timer.start()
    try:
        conn.settimeout(None)
        with conn.makefile("r", encoding="utf-8") as lines:
            for line in lines:
                _event(run, outcome, line, log)
    except OSError:
        pass  # closed at the timeout, or the session died: said below
    finally:
        timer.cancel()
        conn.close()
        if outcome.summary is None and not outcome.error and not outcome.timed_out:
            outcome.returncode = 1
            outcome.stderr.extend(warm.tail().splitlines())
            said = " / ".join(warm.tail(3).splitlines())
            outcome.error = f"the warm Spark session stopped during the run; its last words: {said}"
        _close_log(log, outcome, timeout_s)
    return outcome


def parse(line: str) -> dict[str, Any] | None:
    """One protocol line as a dict; None for anything else the child printed."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def execute(run_id: str, env: dict[str, str] | None = None) -> ReportRun | None:
    """Run the queued run ``run_id`` to its end and record the outcome.

    A run that is not queued any more (a redelivered task) is left alone: None.
    """
    updated = ReportRun.objects.filter(id=run_id, status=ReportRun.QUEUED).update(
        status=ReportRun.RUNNING, started=timezone.now()
    )
    if not updated:
        return None
    run = ReportRun.objects.get(id=run_id)
    push(run)
    timeout_s = platform_settings()["REPORT_TIMEOUT_SECONDS"]
    try:
        cluster = find_cluster(run.cluster)
    except LookupError as exc:
        services.finish(run, ReportRun.FAILED, error=str(exc))
        push(run)
        return run
    try:
        outcome = follow(run, command(run, cluster.namesrv_addr), timeout_s, env)
    except Exception as exc:
        services.finish(run, ReportRun.FAILED, error=f"the report could not be followed: {exc}")
        push(run)
        raise
    if outcome.returncode == 0 and outcome.summary is not None and not outcome.timed_out:
        if run.stages_total:
            run.stages_done = run.stages_total
        services.finish(run, ReportRun.SUCCEEDED, summary=outcome.summary)
    else:
        services.finish(run, ReportRun.FAILED, error=outcome.message(timeout_s))
    push(run)
    return run
