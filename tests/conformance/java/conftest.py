"""Run the official RocketMQ Java client (4.9.8, built from source into ``lib/``) against
our servers: the scenarios in ``src/`` are compiled once per session, and each test runs
one of them in a JVM of its own, reading what it saw as JSON lines."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from .classpath import HERE, classpath, missing_packages

# Set by .ci/run: a machine without the Java client's parts fails these tests, not skips them.
REQUIRE_ENV = "QUIVER_REQUIRE_JAVA_CLIENT"


@pytest.fixture(scope="session")
def java_classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Compile the scenarios; return the classpath to run them with."""
    missing = missing_packages()
    if missing:
        reason = (
            f"the Java client needs Debian packages {', '.join(missing)} (manage.py runtests installs them)"
        )
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("java-classes")
    sources = sorted(str(path) for path in (HERE / "src").rglob("*.java"))
    argv = ["javac", "--release", "8", "-encoding", "UTF-8", "-nowarn", "-cp", classpath(), "-d", str(out)]
    result = subprocess.run([*argv, *sources], capture_output=True, text=True)
    assert result.returncode == 0, f"javac failed:\n{result.stderr}"
    return f"{out}{os.pathsep}{classpath()}"


class JavaRun:
    """One scenario running in its own JVM: its JSON lines as they come, its log on failure."""

    def __init__(self, proc: asyncio.subprocess.Process, scenario: str, log: Path) -> None:
        self.proc = proc
        self.scenario = scenario
        self.log = log
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            if line.startswith(b"{"):
                self.events.append(json.loads(line))
                self._changed.set()
        self._changed.set()

    def of(self, event: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["event"] == event]

    def why(self) -> str:
        tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return f"{self.scenario}: events {self.events[-5:]}\nstderr:\n{tail}"

    async def wait_for(self, done: Callable[[JavaRun], bool], timeout: float = 60.0) -> None:
        """Wait until ``done(self)`` holds; fail with what the scenario saw if it never does."""
        try:
            async with asyncio.timeout(timeout):
                while not done(self):
                    if self._reader.done():
                        raise AssertionError(f"the scenario ended first: {self.why()}")
                    self._changed.clear()
                    # Woken by this run's lines, and every 0.2 s for a condition on others.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), 0.2)
        except TimeoutError:
            raise AssertionError(f"not done within {timeout} s: {self.why()}") from None

    async def finish(self, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Close stdin (the end for scenarios run with expect=0); wait for a clean exit."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        try:
            async with asyncio.timeout(timeout):
                await self._reader
                code = await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"did not finish within {timeout} s: {self.why()}") from None
        assert code == 0, f"exited {code}: {self.why()}"
        return self.events


@contextlib.asynccontextmanager
async def java(
    classes: str, scenario: str, home: Path, *, props: dict[str, str] | None = None, **options: Any
) -> AsyncIterator[JavaRun]:
    """Start ``Main <scenario> key=value...`` with ``home`` as its user.home (the client's
    logs go there) and ``props`` as -D system properties; kill it on the way out if the test
    left it running."""
    home.mkdir(parents=True, exist_ok=True)
    java_bin = shutil.which("java") or "java"
    defines = [f"-D{key}={value}" for key, value in {"user.home": str(home), **(props or {})}.items()]
    argv = [java_bin, "-Xms64m", "-Xmx256m", *defines, "-cp", classes, "quiver.conformance.Main", scenario]
    argv += [f"{key}={value}" for key, value in options.items()]
    log = home / f"{scenario}.stderr"
    with log.open("wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr
        )
    run = JavaRun(proc, scenario, log)
    try:
        yield run
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        run._reader.cancel()


async def run_java(classes: str, scenario: str, home: Path, **kwargs: Any) -> list[dict[str, Any]]:
    """Run a scenario that ends by itself (expect=N, or one that sends); return its events."""
    async with java(classes, scenario, home, **kwargs) as run:
        return await run.finish(timeout=float(kwargs.get("timeout", 60000)) / 1000 + 30)


class JavaClient:
    """The scenarios against one nameserver, each run with a home of its own under ``where``."""

    def __init__(self, classes: str, where: Path, namesrv: str, props: dict[str, str] | None = None) -> None:
        self.classes, self.where, self.namesrv, self.props = classes, where, namesrv, props
        self.runs = 0

    def _home(self, scenario: str) -> Path:
        self.runs += 1
        return self.where / f"java-{self.runs}-{scenario}"

    async def run(self, scenario: str, **options: Any) -> list[dict[str, Any]]:
        """Run a scenario to its end; return its events."""
        options = {"namesrv": self.namesrv, "props": self.props, **options}
        return await run_java(self.classes, scenario, self._home(scenario), **options)

    def start(self, scenario: str, **options: Any) -> contextlib.AbstractAsyncContextManager[JavaRun]:
        """Start a scenario that runs alongside the test (see ``java``)."""
        options = {"namesrv": self.namesrv, "props": self.props, **options}
        return java(self.classes, scenario, self._home(scenario), **options)
