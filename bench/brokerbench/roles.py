"""The child processes: one module per role, one contract, all run through the entry script.

Every load runs in a child process of its own (its own GIL and event loop, as a real
application has): ``bench/broker.py --role ROLE SPEC``.  A role is a function of its JSON
spec that does its load and prints one JSON line; the echo server prints its address
instead and serves until SIGINT.  The parent's side is here too: ``run_child`` runs a role
with a hard timeout and reads its line back (``{"failed": why}`` when there is none).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Protocol

from servers import run_script  # bench/servers.py

from .echo import echo_main
from .frames import TOPIC
from .official import official_role
from .ours import ours_main
from .rawframes import loadgen_main

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
ENTRY = BENCH / "broker.py"  # what the children run, as the user does


class Role(Protocol):
    """A child's part: given its spec, do the load and print one JSON line."""

    def __call__(self, spec: dict[str, Any]) -> None: ...


def echo_role(spec: dict[str, Any]) -> None:
    """The echo server (it takes no spec: one shape of answers for every load)."""
    echo_main()


ROLES: dict[str, Role] = {
    "loadgen": loadgen_main,  # raw frames: rawframes.py
    "echo": echo_role,  # echo.py
    "official": official_role,  # the official client: official.py
    "ours": ours_main,  # our client: ours.py
}


def run_role(role: str, spec: str | None) -> None:
    """In the child: run ``role`` on its JSON ``spec``."""
    ROLES[role](json.loads(spec) if spec else {})


def run_child(args: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run the entry script as a child (``--role ...``) with a hard timeout; return its last JSON line."""
    return run_script(ENTRY, args, timeout, env)


def loadgen(spec: dict[str, Any]) -> dict[str, Any]:
    """The raw-frame load generator on ``spec`` (its budget: the spec's durations + 30 s)."""
    budget = spec.get("warmup_s", 0) + spec.get("measure_s", 0) + spec.get("timeout_s", 0) + 30
    return run_child(["--role", "loadgen", json.dumps(spec)], timeout=budget)


def official_env(home: Path) -> dict[str, str]:
    """The official client's environment: HOME a temp dir (for its logs), this checkout first."""
    home.mkdir(parents=True, exist_ok=True)
    return {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}


def official_child(spec: dict[str, Any], home: Path, timeout: float) -> dict[str, Any]:
    """The official client in a child process."""
    return run_child(["--role", "official", json.dumps(spec)], timeout=timeout, env=official_env(home))


def official(
    namesrv: str, home: Path, threads: int, batch: int, warmup: float, measure: float
) -> dict[str, Any]:
    """The official client's sending load in a child process (HOME: a temp dir, for its logs)."""
    spec = {
        "namesrv": namesrv,
        "topic": TOPIC,
        "threads": threads,
        "batch": batch,
        "warmup_s": warmup,
        "measure_s": measure,
    }
    return official_child(spec, home, timeout=warmup + measure + 60)


def ours_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One of our clients in a child process (its own GIL, as the official client has)."""
    return run_child(["--role", "ours", json.dumps(spec)], timeout=timeout)
