"""Run the whole check suite: lint (ruff), types (mypy), then each pytest invocation, with one
summary at the end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from broker_core.speedups import PURE_PYTHON_ENV

REPO = Path(__file__).resolve().parents[4]

# pytest's "no tests were collected": a suite that ran nothing has not passed.
PYTEST_NO_TESTS = 5


@dataclass(frozen=True)
class Step:
    """One command of the suite; ``pytest`` steps also report test counts.  Steps with
    ``together`` set run at the same time as the next ones that have it (see ``SHARDS``)."""

    label: str
    argv: list[str]
    pytest: bool = False
    together: bool = False
    env: dict[str, str] | None = None  # added to this process's environment for the step


# The whole suite runs in three parts by default: the browser tests alone (the most
# sensitive to a busy machine: Chromium against a whole platform), then two pytest processes
# at once, each with its own temporary directory: the broker-side tests (our servers and the
# official clients only), niced, beside the rest of the platform's (Django, Redis, Celery,
# Spark), which share nothing with them.  About 14 min instead of 21 on this 2-core machine.
# QUIVER_TEST_SHARDS=1 runs everything in one process instead.  Every other directory of
# tests/ goes to the platform's shard, so a new one is never left out.
BROKER_SHARD = ("tests/unit", "tests/integration", "tests/conformance", "tests/v5")
BROWSER_SHARD = ("tests/browser",)


@dataclass
class Counts:
    """Test outcomes summed over pytest steps."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0

    def add_junit(self, path: Path) -> Counts | None:
        """Add the outcomes from a JUnit XML report; return them, or None if it is unreadable."""
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            return None
        step = Counts()
        for suite in root.iter("testsuite"):
            tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
            failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            step.passed += tests - failed - skipped
            step.failed += failed
            step.skipped += skipped
        self.passed += step.passed
        self.failed += step.failed
        self.skipped += step.skipped
        return step

    def __str__(self) -> str:
        return f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"


def suite(pytest_args: list[str], *, lint: bool = True) -> list[Step]:
    """Return the steps to run, in order; add a pytest invocation here to run it separately."""
    python = sys.executable
    steps = []
    if lint:
        steps.append(Step("lint", [python, "-m", "ruff", "check", "."]))
        # The type checker: broker_core strictly, the Django and Spark edges checked
        # (pyproject.toml's [tool.mypy] says which files and how).
        steps.append(Step("types", [python, "-m", "mypy"]))
    if pytest_args:  # a chosen part of the suite
        steps.append(Step("tests", [python, "-m", "pytest", *pytest_args], pytest=True))
        return steps
    # The unit tests again with the compiled helpers switched off: their pure-Python twins
    # (the store's record writers and decoders, the index loop) stay correct on machines
    # without a compiler.  About a minute; it runs first, alone.
    steps.append(
        Step(
            "tests (pure Python)",
            [python, "-m", "pytest", "tests/unit"],
            pytest=True,
            env={PURE_PYTHON_ENV: "1"},
        )
    )
    if os.environ.get("QUIVER_TEST_SHARDS", "2") == "1":
        steps.append(Step("tests", [python, "-m", "pytest"], pytest=True))
        return steps
    steps.append(Step("tests (browser)", [python, "-m", "pytest", *BROWSER_SHARD], pytest=True))
    platform = sorted(
        f"tests/{d.name}" for d in (REPO / "tests").iterdir() if d.is_dir() and d.name != "__pycache__"
    )
    platform = [d for d in platform if d not in BROKER_SHARD and d not in BROWSER_SHARD]
    for label, dirs in (("tests (platform)", platform), ("tests (brokers)", list(BROKER_SHARD))):
        steps.append(Step(label, [python, "-m", "pytest", *dirs], pytest=True, together=True))
    return steps


class Command(BaseCommand):
    help = (
        "Run ruff, mypy and the test suite with this interpreter. Arguments other than this command's "
        "own options are passed to pytest (after `--`, all of them are)."
    )
    requires_system_checks: list[str] = []
    own_flags = frozenset({"--no-lint", "--failfast", "-h", "--help"})

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--no-lint", action="store_true", help="skip `ruff check .` and mypy")
        parser.add_argument("--failfast", action="store_true", help="stop after the first failing step")
        parser.add_argument("pytest_args", nargs="*", help="arguments for pytest")

    def run_from_argv(self, argv: list[str]) -> None:
        """Split the command line so pytest receives its options in their original order."""
        own, self.passthrough = split_args(argv[2:], self.own_flags)
        super().run_from_argv([*argv[:2], *own])

    def handle(
        self, *args: Any, no_lint: bool, failfast: bool, pytest_args: list[str], **options: Any
    ) -> None:
        pytest_args = [*getattr(self, "passthrough", []), *pytest_args]
        self.stdout.write(f"runtests: browser: {ensure_chromium()}")
        self.stdout.write(f"runtests: Java client: {ensure_java_client()}")
        counts = Counts()
        failures: list[tuple[str, int]] = []
        with tempfile.TemporaryDirectory(prefix="quiver-runtests-") as reports:
            steps = suite(pytest_args, lint=not no_lint)
            alone = [step for step in steps if not step.together]
            together = [step for step in steps if step.together]
            for step in alone:
                code = self.run_step(step, Path(reports), counts)
                if code != 0:
                    failures.append((step.label, code))
                    if failfast:
                        break
            else:
                if together:
                    failures.extend(self.run_together(together, Path(reports), counts))
        if failures:
            self.stdout.write(
                "runtests: FAILED: " + ", ".join(f"{label} (exit {code})" for label, code in failures)
            )
        else:
            self.stdout.write("runtests: every step passed")
        self.stdout.write(f"runtests: {counts}")
        if failures:
            sys.exit(failures[0][1])

    def run_together(self, steps: list[Step], reports: Path, counts: Counts) -> list[tuple[str, int]]:
        """Run pytest steps at once: the first prints as it goes, the others' output follows
        when they end.  Each has its own --basetemp (pytest's cleanup of old temporary
        directories would otherwise remove one another's while in use)."""
        running = []
        for index, step in enumerate(steps):
            report = reports / f"tests-{index}.xml"
            basetemp = reports / f"tmp-{index}"
            argv = [*step.argv[:3], f"--junitxml={report}", f"--basetemp={basetemp}", *step.argv[3:]]
            self.stdout.write(f"runtests: {step.label}: python {' '.join(step.argv[1:])}")
            self.stdout.flush()
            log = None if index == 0 else open(reports / f"tests-{index}.log", "wb")  # noqa: SIM115
            # The shards after the first run niced: the platform's shard (Spark, Chromium, a
            # whole `up`) has the tests most sensitive to a busy machine.
            niced = [] if index == 0 or not shutil.which("nice") else ["nice", "-n", "10"]
            proc = subprocess.Popen(
                [*niced, *argv], cwd=REPO, stdout=log, stderr=subprocess.STDOUT if log else None
            )
            running.append((step, report, proc, log))
        failures = []
        for index, (step, report, proc, log) in enumerate(running):
            code = proc.wait()
            if log is not None:
                log.close()
                self.stdout.write(f"runtests: {step.label}: its output")
                self.stdout.flush()
                sys.stdout.buffer.write((reports / f"tests-{index}.log").read_bytes())
                sys.stdout.flush()
            step_counts = counts.add_junit(report)
            outcome = "ok" if code == 0 else f"exit {code}"
            if code == PYTEST_NO_TESTS:
                outcome = "no tests ran"
            if step_counts is not None:
                outcome += f" ({step_counts})"
            self.stdout.write(f"runtests: {step.label}: {outcome}")
            if code != 0:
                failures.append((step.label, code))
        return failures

    def run_step(self, step: Step, reports: Path, counts: Counts) -> int:
        """Run one step in the repository root and return its exit status."""
        argv = step.argv
        report = reports / f"{step.label}.xml"
        if step.pytest:
            argv = [*argv[:3], f"--junitxml={report}", *argv[3:]]
        shown = "".join(f"{key}={value} " for key, value in (step.env or {}).items())
        self.stdout.write(f"runtests: {step.label}: {shown}python {' '.join(step.argv[1:])}")
        env = {**os.environ, **step.env} if step.env else None
        try:
            code = subprocess.run(argv, cwd=REPO, env=env).returncode
        except KeyboardInterrupt:
            raise CommandError(f"interrupted during {step.label}", returncode=130) from None
        except OSError as exc:
            raise CommandError(f"cannot run {step.label}: {exc}") from exc
        outcome = "ok" if code == 0 else f"exit {code}"
        if step.pytest:
            step_counts = counts.add_junit(report)
            if code == PYTEST_NO_TESTS:
                outcome = "no tests ran"
            if step_counts is not None:
                outcome += f" ({step_counts})"
        self.stdout.write(f"runtests: {step.label}: {outcome}")
        return code


def apt_install(packages: list[str]) -> bool | None:
    """``apt-get install`` Debian packages (after ``apt-get update`` if the first try fails);
    None when this machine cannot (not root, or no apt-get), else whether it worked."""
    if not shutil.which("apt-get") or os.geteuid() != 0:
        return None
    install = ["apt-get", "install", "-y", "-qq", *packages]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    if subprocess.run(install, **quiet).returncode != 0:  # type: ignore[call-overload]
        subprocess.run(["apt-get", "update", "-qq"], **quiet)  # type: ignore[call-overload]
        return bool(subprocess.run(install, **quiet).returncode == 0)  # type: ignore[call-overload]
    return True


def ensure_chromium() -> str:
    """Install Debian's Chromium for the browser tests when it is missing; say how it stands.

    Playwright cannot download its own browser here, so the suite drives Debian's. On a
    machine where it cannot be installed (not root, no apt-get) the browser tests say why
    they skip, or fail when ``QUIVER_REQUIRE_BROWSER`` is set (as ``.ci/run`` sets it).
    """
    if shutil.which("chromium"):
        return "chromium found"
    installed = apt_install(["chromium"])
    if installed is None:
        return "chromium missing and not installable here (needs root and apt-get): browser tests skip"
    if not installed:
        return "installing chromium failed (apt-get install -y chromium): browser tests skip"
    return "chromium installed (apt-get install chromium)" if shutil.which("chromium") else "chromium missing"


def ensure_java_client() -> str:
    """Install the Debian packages the official Java client's scenarios need (a JDK, netty,
    commons-*: tests/conformance/java/classpath.py names them) when some are missing; say
    how it stands.  Without them those tests skip, or fail under ``QUIVER_REQUIRE_JAVA_CLIENT``
    (``.ci/run`` sets it)."""
    from tests.conformance.java.classpath import missing_packages

    missing = missing_packages()
    if not missing:
        return "Debian packages found"
    installed = apt_install(missing)
    if installed is None:
        return (
            f"{' '.join(missing)} missing and not installable here (needs root and apt-get): Java tests skip"
        )
    still = missing_packages()
    if still:
        return f"installing {' '.join(still)} failed: Java tests skip"
    return f"installed {' '.join(missing)}"


def split_args(args: list[str], own_flags: frozenset[str]) -> tuple[list[str], list[str]]:
    """Split arguments into this command's flags and pytest's, keeping pytest's in order."""
    own: list[str] = []
    passthrough: list[str] = []
    for index, arg in enumerate(args):
        if arg == "--":
            passthrough.extend(args[index + 1 :])
            break
        (own if arg in own_flags else passthrough).append(arg)
    return own, passthrough
