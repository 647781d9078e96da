"""Run a set of child processes as one unit: start, watch, report, and stop them together.

This is the engine behind ``manage.py up``; it knows nothing of Quiver's processes, which
are declared as ``ChildSpec`` values elsewhere. Each child runs in its own session (so its
own process group, which is how grandchildren are reached on stop) with its output in
``<log_dir>/<name>.log``. On Linux a child is also told to receive SIGTERM if the
supervisor dies without stopping it.

Not thread-safe: create and run a ``Supervisor`` from the main thread, which owns the
SIGINT/SIGTERM handlers and is the parent that children's death signal is tied to.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

HealthProbe = Callable[[], bool]

PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class ChildSpec:
    """One process to run: its command line and how the supervisor treats it.

    A service runs until stopped; a one-shot (``oneshot=True``) is expected to exit. When
    ``essential``, a service's exit or a one-shot's non-zero exit stops everything;
    otherwise it is only reported.  A one-shot with ``blocking=True`` runs to its end
    before the next child starts (a store check before the broker that opens the store).
    """

    name: str
    argv: Sequence[str]
    url: str | None = None
    health: HealthProbe | None = None
    oneshot: bool = False
    essential: bool = True
    blocking: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    # CPU niceness (0: as the supervisor); long work runs niced so it never starves the rest.
    nice: int = 0


@dataclass
class Child:
    """A started child: its spec, process, log file and what has been reported about it."""

    spec: ChildSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    log_start: int = 0
    healthy: bool | None = None
    exit_reported: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid


def http_ok(url: str, timeout_s: float = 1.0) -> HealthProbe:
    """Return a probe that is true once ``url`` answers a GET with a 2xx status."""

    def probe() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                return 200 <= response.status < 300
        except (urllib.error.URLError, OSError, ValueError):
            return False

    return probe


def tcp_open(host: str, port: int, timeout_s: float = 1.0) -> HealthProbe:
    """Return a probe that is true once ``host:port`` accepts a TCP connection."""

    def probe() -> bool:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            return False

    return probe


def tail(path: Path, lines: int = 20, start: int = 0) -> str:
    """Return the last ``lines`` lines of a log file from byte ``start`` on, or '' if unreadable."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(start, f.tell() - 64 * 1024))
            data = f.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def _load_libc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name or "libc.so.6", use_errno=True)
    except OSError:
        return None


_libc = _load_libc()


def _nice_autogroup(nice: int) -> None:
    """Give this process's scheduling autogroup the niceness ``nice``.

    Linux (``sched_autogroup_enabled``) puts each session in an autogroup and shares the
    CPU fairly between autogroups first: a process's own niceness only counts inside its
    group.  A child started in a new session (as every child here is) is therefore as
    weighty as the broker however niced it is, unless its group is niced too.  Absent or
    refused (no autogroups, another kernel), the process's own niceness still applies.
    """
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(nice))
    except OSError:
        pass


def child_preexec(parent_pid: int, *, nice: int = 0) -> Callable[[], None]:
    """Return a pre-exec hook that makes the child get SIGTERM when its parent dies (Linux)
    and, with ``nice`` > 0, run at that CPU niceness (absolute, so a niced parent's children
    are not niced twice), its session's autogroup too — how long work yields the CPU to the
    broker and the maintenance jobs."""

    def preexec() -> None:
        if nice > 0:
            os.setpriority(os.PRIO_PROCESS, 0, max(nice, os.getpriority(os.PRIO_PROCESS, 0)))
            _nice_autogroup(nice)
        if _libc is not None:
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        # The parent may have died between fork and prctl; then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class StartAborted(Exception):
    """The start was cut short: a blocking one-shot failed, or a stop was requested."""


class Supervisor:
    """Start ``children`` in order, watch them until told to stop, then stop them all.

    ``run()`` returns the exit status for the caller to exit with: 0 after SIGINT/SIGTERM
    or once no child is left running, 1 when an essential child died or could not start.
    """

    def __init__(
        self,
        children: Sequence[ChildSpec],
        log_dir: Path,
        *,
        out: TextIO | None = None,
        summary_lines: Callable[[], Sequence[str]] | None = None,
        stop_timeout_s: float = 10.0,
        health_timeout_s: float = 30.0,
        poll_interval_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.specs = list(children)
        self.log_dir = log_dir
        self.out = out or sys.stdout
        # Extra lines printed under the process table once everything is up (URLs...).
        self.summary_lines = summary_lines
        self.stop_timeout_s = stop_timeout_s
        self.health_timeout_s = health_timeout_s
        self.poll_interval_s = poll_interval_s
        self.clock = clock
        self.children: list[Child] = []
        self._stop_requested = threading.Event()
        self._signals_received = 0

    def run(self) -> int:
        """Supervise until a stop signal or an essential child's exit; return the exit status."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            try:
                self.start()
            except OSError as exc:
                self.say(f"could not start {self.specs[len(self.children)].name}: {exc}")
                return 1
            except StartAborted as exc:
                self.say(f"start aborted: {exc}")
                return 0 if self._stop_requested.is_set() else 1
            return self.watch()
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def start(self) -> None:
        """Start every child in declaration order, each in its own session, logging to its file.

        A blocking one-shot is waited for before the next child starts; one that fails and
        is essential stops the start (``StartAborted``), as does a stop signal meanwhile.
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.specs:
            child = self._spawn(spec)
            self.children.append(child)
            if spec.oneshot and spec.blocking:
                self._wait_oneshot(child)

    def _wait_oneshot(self, child: Child) -> None:
        while child.process.poll() is None:
            if self._stop_requested.wait(self.poll_interval_s / 4):
                raise StartAborted("stop requested during start")
        child.exit_reported = True
        if self._report_exit(child):
            raise StartAborted(f"{child.spec.name} failed")

    def watch(self) -> int:
        """Poll children until a stop is requested; report exits, health and a summary."""
        deadline = self.clock() + self.health_timeout_s
        summarized = False
        while not self._stop_requested.is_set():
            for child in self.children:
                if child.exit_reported or child.process.poll() is None:
                    continue
                child.exit_reported = True
                # Reap what it left behind now, before its pid (our handle on the group) is reused.
                self._signal_group(child, signal.SIGKILL)
                if self._report_exit(child):
                    return 1
            if not summarized and self._probe_health(deadline):
                self.print_summary()
                summarized = True
            if all(child.exit_reported for child in self.children):
                self.say("no child left running")
                return 0
            self._stop_requested.wait(self.poll_interval_s)
        return 0

    def stop(self) -> None:
        """Stop every child's process group: SIGTERM, wait up to ``stop_timeout_s``, then SIGKILL.

        Safe to call more than once. A second SIGINT/SIGTERM while waiting skips to SIGKILL.
        """
        live = [c for c in reversed(self.children) if not c.exit_reported]
        running = [c.spec.name for c in live if c.process.poll() is None]
        if running:
            self.say("stopping " + ", ".join(running))
        for child in live:
            self._signal_group(child, signal.SIGTERM)
        deadline = self.clock() + self.stop_timeout_s
        hurry_at = self._signals_received + 1
        while any(c.process.poll() is None for c in live):
            if self.clock() >= deadline or self._signals_received >= hurry_at:
                break
            time.sleep(0.05)
        for child in live:
            # Also once the leader is gone: its group may still hold grandchildren.
            self._signal_group(child, signal.SIGKILL)
        for child in live:
            try:
                child.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.say(f"{child.spec.name} (pid {child.pid}) did not die")
            child.exit_reported = True
        if running:
            self.say("stopped")

    def print_summary(self) -> None:
        """Print one line per child: state, URL, pid and log file."""
        if not self.children:
            return
        self.say("processes (Ctrl-C stops them all):")
        width = max(len(c.spec.name) for c in self.children)
        for child in self.children:
            code = child.process.poll()
            if code is not None:
                state = f"exited {code}"
            elif child.spec.health is None:
                state = "running"
            else:
                state = {True: "up", False: "unhealthy", None: "starting"}[child.healthy]
            name, url = child.spec.name, child.spec.url or ""
            self.say(f"  {name:<{width}}  {state:<10} {url:<28} pid {child.pid:<7} log {child.log_path}")
        for line in self.summary_lines() if self.summary_lines else ():
            self.say(line)

    def say(self, message: str) -> None:
        """Print one line of the supervisor's own output."""
        self.out.write(message + "\n")
        self.out.flush()

    def _spawn(self, spec: ChildSpec) -> Child:
        log_path = self.log_dir / f"{spec.name}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **spec.env}
        with log_path.open("ab") as log:
            log_start = log.tell()
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(spec.argv)}\n".encode())
            log.flush()
            process = subprocess.Popen(
                list(spec.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=spec.cwd,
                env=env,
                start_new_session=True,
                preexec_fn=child_preexec(os.getpid(), nice=spec.nice),
            )
        return Child(spec, process, log_path, log_start, healthy=None if spec.health else True)

    def _report_exit(self, child: Child) -> bool:
        """Report a child that exited; return True when that must stop the platform."""
        code = child.process.returncode
        name = child.spec.name
        if child.spec.oneshot and code == 0:
            self.say(f"{name}: done")
            return False
        fatal = child.spec.essential
        what = "failed" if child.spec.oneshot else "exited"
        consequence = "stopping everything" if fatal else "not fatal"
        self.say(f"{name} {what} with status {code} ({consequence}); last lines of {child.log_path}:")
        for line in tail(child.log_path, start=child.log_start).splitlines():
            self.say(f"  | {line}")
        return fatal

    def _probe_health(self, deadline: float) -> bool:
        """Probe children not yet known healthy; return True once none is left to wait for."""
        pending = [c for c in self.children if c.healthy is None and c.process.poll() is None]
        for child in pending:
            probe = child.spec.health
            if probe is not None and probe():
                child.healthy = True
            elif self.clock() >= deadline:
                child.healthy = False
        return all(c.healthy is not None or c.process.poll() is not None for c in self.children)

    def _signal_group(self, child: Child, sig: signal.Signals) -> None:
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals_received += 1
        self._stop_requested.set()
