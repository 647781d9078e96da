"""A system in a child process (``bench/peers.py --role peer SPEC``): describe, clean up, or run
one scenario, and print its result as one JSON line.

Each system runs each scenario in a process of its own, so clients never share a process
(or a GIL, or an event loop); ``child`` is the parent's side, with a hard timeout.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from servers import run_script  # bench/servers.py

from .measure import catchup_timeout
from .system import System
from .systems.echo import EchoCeiling
from .systems.nats_jetstream import Nats
from .systems.quiver import Quiver
from .systems.rabbitmq import Rabbit
from .systems.redis_streams import Redis
from .workload import Settings, Unavailable

ENTRY = Path(__file__).resolve().parent.parent / "peers.py"  # what the children run, as the user does

ADAPTERS: dict[str, Callable[[dict[str, Any]], System]] = {
    "quiver": Quiver,
    "redis": Redis,
    "nats": Nats,
    "rabbitmq": Rabbit,
    "echo": EchoCeiling,
}


def peer_main(spec: dict[str, Any]) -> dict[str, Any]:
    """Child process: one system's describe, cleanup or scenario; its result as a dict
    (``{"skipped": why}`` when the system turns out to be unavailable, even mid-way)."""
    try:
        return run_role(ADAPTERS[spec["system"]](spec), spec)
    except Unavailable as exc:
        return {"skipped": str(exc)}


def run_role(system: System, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec's role through ``system``: its description, a cleanup, or one scenario."""
    role = spec["role"]
    if role == "describe":
        return system.describe()
    if role == "cleanup":
        for name in spec["names"]:
            try:
                system.delete(name)
            except Exception:
                pass  # already gone
        return {"cleaned": spec["names"]}
    s = Settings(**spec["settings"])
    scenario = spec["scenario"]
    gc.collect()
    gc.freeze()
    if system.creates_own_topic:  # NATS creates and deletes its stream inside its event loop
        if scenario == "catchup":
            return system.catchup(s, spec.get("settle_pid"))
        return getattr(system, scenario)(s)
    system.create()
    try:
        if scenario == "catchup":
            return system.catchup(s, spec.get("settle_pid"))
        return getattr(system, scenario)(s)
    finally:
        system.delete(spec["name"])


def child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``peer_main`` in a child process (the entry script) with a hard timeout."""
    return run_script(ENTRY, ["--role", "peer", json.dumps(spec)], timeout)


def child_budget(scenario: str, s: Settings) -> float:
    """A scenario child's hard timeout, seconds."""
    if scenario == "catchup":
        return 2 * catchup_timeout(s) + 3 * s.count / 1000 + 120  # preload, push, pull, settles
    if scenario == "latency":
        return 3 * (s.latency_warmup_s + s.latency_s) + 60
    return 2 * (s.warmup_s + s.measure_s) + 90
