"""The parent: start Quiver, look at the peers, then each scenario through each system in turn.

A peer whose port refuses the connection is skipped with the reason; before each child
the system's server is left to settle; every topic, stream or queue a run used is
deleted at the end too, in case a child died.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from servers import Server, settle, start_cluster  # bench/servers.py

from .child import child, child_budget
from .measure import settle_process
from .report import print_descriptions, progress
from .systems.quiver import quiver_description
from .workload import ADDRS, SCENARIOS, SCENARIOS_OF, SELF_STARTED, SERVER_PROCESS, SYSTEMS, Settings


def reachable(system: str) -> str | None:
    """None when the peer's port accepts a connection, else why not."""
    host, port = ADDRS[system]
    try:
        with socket.create_connection((host, port), timeout=3):
            return None
    except OSError as exc:
        return f"not running: {host}:{port}: {exc.strerror or exc}"


def server_pid(system: str) -> int | None:
    """The pid of a peer's server process (by its command name), to wait for it to go quiet;
    None when there is not exactly one."""
    wanted = SERVER_PROCESS[system]
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == wanted:
                found.append(int(comm.parent.name))
        except OSError:
            continue
    return found[0] if len(found) == 1 else None


@dataclass
class Run:
    """What one run found: each system's description or skip reason, each scenario's result."""

    settings: Settings
    systems: list[str]
    scenarios: list[str]
    flush: str
    quick: bool
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def run(args: argparse.Namespace) -> Run:
    """Start Quiver, look at the peers, then each scenario through each system in turn."""
    s = Settings.quick() if args.quick else Settings()
    if args.count:
        s.count = args.count
    systems = pick(args.only, SYSTEMS, "--only")
    scenarios = pick(args.scenarios, SCENARIOS, "--scenarios")
    result = Run(s, systems, scenarios, args.quiver_flush, args.quick)
    run_id = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-peers-"))
    servers: list[Server] = []
    used: dict[str, list[str]] = {system: [] for system in systems}
    try:
        quiver: dict[str, Any] = {}
        if "quiver" in systems:
            busy_poll = args.quiver_busy_poll
            extra = {"serverBusyPollMicros": str(busy_poll)}
            namesrv, broker = start_cluster(work, [], args.quiver_flush, extra)
            servers += [broker, namesrv]
            quiver = {
                "namesrv": namesrv.addr,
                "broker": broker.addr,
                "flush": args.quiver_flush,
                "busy_poll": busy_poll,
            }
            result.info["quiver"] = quiver_description(args.quiver_flush, busy_poll)
            print(f"quiver: broker {broker.addr}, nameserver {namesrv.addr}, work dir {work}")
        for system in systems:
            if system == "quiver":
                continue
            why = None if system in SELF_STARTED else reachable(system)
            info = {"skipped": why} if why else child({"role": "describe", "system": system}, 60)
            result.info[system] = info
        print_descriptions(result)
        for scenario in scenarios:
            result.results[scenario] = {}
            for system in systems:
                info = result.info[system]
                if "skipped" in info or "failed" in info:
                    continue
                if scenario not in SCENARIOS_OF.get(system, SCENARIOS):
                    continue
                name = f"quiver_peers_{run_id}_{scenario}"
                used[system].append(name)
                pid: int | None = None
                if system == "quiver":
                    settle(servers[0])
                    pid = servers[0].proc.pid
                elif system not in SELF_STARTED:
                    pid = server_pid(system)
                    settle_process(pid)
                spec = {
                    "role": "peer",
                    "system": system,
                    "scenario": scenario,
                    "name": name,
                    "settings": asdict(s),
                    "settle_pid": pid,
                    **quiver,
                }
                r = child(spec, child_budget(scenario, s))
                result.results[scenario][system] = r
                print(progress(scenario, system, r), flush=True)
    finally:
        for system, names in used.items():
            if names and system not in SELF_STARTED and "skipped" not in result.info.get(system, {}):
                child({"role": "cleanup", "system": system, "names": names}, 60)
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return result


def pick(value: str | None, allowed: tuple[str, ...], option: str) -> list[str]:
    """The comma-separated choice of ``option``, in the canonical order."""
    if not value:
        return list(allowed)
    chosen = {v.strip() for v in value.split(",") if v.strip()}
    unknown = chosen - set(allowed)
    if unknown:
        raise SystemExit(f"{option}: unknown {', '.join(sorted(unknown))} (choose from {','.join(allowed)})")
    return [a for a in allowed if a in chosen]
