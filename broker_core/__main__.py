"""Command line: ``python -m broker_core <command>``.

* ``namesrv [-c FILE]``: run a nameserver (``listenPort`` and friends, RocketMQ style).
* ``broker -c FILE``: run a broker from a RocketMQ-style broker.conf.
* ``proxy -c rmq-proxy.json``: run the gRPC endpoint for RocketMQ 5 clients
  (``broker_core.proxy``) in front of a cluster's brokers.
* ``store check --store DIR``: report on a store (geometry, records, damaged ranges, a
  torn tail, consume queues) without changing a byte; exit 1 when problems are found.
  ``--repair`` recovers it as a broker start would and prints each change.
* ``store rebuild --store DIR``: rebuild consume queues and index from the commit log.
* mqadmin-style admin commands (``clusterList``, ``topicList``, ``consumerProgress``...,
  see ``broker_core.cli.admin``), also installed as ``quiver-admin``.

``quiver-namesrv`` and ``quiver-broker`` are the first two as console scripts.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import Any

from broker_core.cli.admin import add_admin_commands, run_command_line
from broker_core.config import (
    NamesrvConfig,
    StoreConfig,
    load_broker_config,
    load_properties,
    unsupported_settings,
)
from broker_core.errors import ConfigError
from broker_core.namesrv.server import NamesrvServer
from broker_core.store.geometry import resolve_geometry
from broker_core.store.inspect import describe, inspect_store
from broker_core.store.store import MessageStore

log = logging.getLogger("broker_core")


def store_check(args: argparse.Namespace) -> int:
    """Report on a store without changing it; exit 1 when problems are found."""
    root = Path(args.store).resolve()
    try:
        report = inspect_store(root, tail_segments=args.tail)
    except ConfigError as exc:
        print(f"store: {root}\n  PROBLEM: {exc}\n  check: 1 problem(s)")
        return 1
    for line in describe(report):
        print(line)
    return 1 if report.problems else 0


def store_repair(args: argparse.Namespace) -> int:
    """Recover a store as the broker's start would (``--repair``; ``rebuild`` also
    rebuilds consume queues and index) and say exactly what changed; then check it."""
    root = Path(args.store).resolve()
    if not (root / "commitlog").is_dir():
        return store_check(args)  # nothing to repair, and a store is the broker's to create
    try:
        # Recovery walks only the newest segments: the check's walk finds damage anywhere.
        report = inspect_store(root, tail_segments=args.tail)
        store = MessageStore(StoreConfig(str(root), warm_mapped_file_enable=False), adopt_geometry=True)
    except ConfigError as exc:
        print(f"store: {root}\n  PROBLEM: {exc}")
        return 1
    if args.rebuild:
        store.rebuild_consume_queues()
        print("  changed: deleted every consume queue, index file and the checkpoint, to rebuild them")
    with store.open():
        now = store.clock_ms()
        store.record_damage([dataclasses.replace(r, found_ms=now) for r in report.new_damage])
        for change in store.recovery_changes:
            print(f"  changed: {change}")
        if not store.recovery_changes and not args.rebuild:
            print("  changed: nothing (the store needed no repair)")
    return store_check(args)


def namesrv(args: argparse.Namespace) -> int:
    """Run a nameserver until SIGINT/SIGTERM."""
    props = load_properties(args.config) if args.config else {}
    config, unknown = NamesrvConfig.from_properties(props)
    for key in unknown:
        print(f"warning: {args.config}: unknown nameserver setting {key!r} (ignored)", file=sys.stderr)
    return _serve(NamesrvServer(config))


def broker(args: argparse.Namespace) -> int:
    """Run a broker until SIGINT/SIGTERM."""
    from broker_core.broker.controller import BrokerController

    config, store_config, unknown = load_broker_config(load_properties(args.config))
    for key in unknown:
        print(f"warning: {args.config}: unknown broker setting {key!r} (ignored)", file=sys.stderr)
    for warning in unsupported_settings(config, store_config):
        print(f"warning: {args.config}: {warning}", file=sys.stderr)
        log.warning("%s: %s", args.config, warning)
    try:
        resolve_geometry(store_config, adopt=False)
    except ConfigError as exc:
        print(f"error: {args.config}: {exc}", file=sys.stderr)
        return 1
    return _serve(BrokerController(config, store_config))


def proxy(args: argparse.Namespace) -> int:
    """Run the gRPC proxy until SIGINT/SIGTERM (on uvloop: grpc.aio runs on any asyncio loop,
    and this one costs less per RPC; ``broker_core.proxy.server`` has the figures)."""
    from broker_core.proxy.config import load_proxy_config
    from broker_core.proxy.server import ProxyServer

    try:
        config, unknown = load_proxy_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for key in unknown:
        print(f"warning: {args.config}: unknown proxy setting {key!r} (ignored)", file=sys.stderr)
    return _serve(ProxyServer(config))


def _serve(server: Any, *, uvloop_loop: bool = True) -> int:
    """Run an asyncio server (on uvloop unless told not to) until a signal asks it to stop."""
    import asyncio
    import signal

    import uvloop

    async def run() -> None:
        # Handlers first: a stop requested during start-up must still close things cleanly.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await server.start()
        print(f"listening on {server.address}", flush=True)
        await stop.wait()
        await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop if uvloop_loop else None) as runner:
        runner.run(run())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m broker_core", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    ns = commands.add_parser("namesrv", help="run a nameserver")
    ns.add_argument("-c", "--config", help="a RocketMQ-style namesrv.conf (key = value)")
    ns.set_defaults(func=namesrv)
    br = commands.add_parser("broker", help="run a broker")
    br.add_argument("-c", "--config", required=True, help="a RocketMQ-style broker.conf (key = value)")
    br.set_defaults(func=broker)
    px = commands.add_parser("proxy", help="run the gRPC endpoint for RocketMQ 5 clients")
    px.add_argument("-c", "--config", help="RocketMQ's rmq-proxy.json (JSON object of proxy settings)")
    px.set_defaults(func=proxy)
    store = commands.add_parser("store", help="inspect or repair a message store")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    check = store_commands.add_parser("check", help="report on a store directory, changing nothing")
    check.add_argument("--store", required=True, help="the store's root directory")
    check.add_argument(
        "--tail", type=int, default=None, metavar="N", help="walk only the last N commit-log segments"
    )
    check.add_argument(
        "--repair",
        action="store_true",
        help="recover the store (as a broker start would) and say what changed",
    )
    check.set_defaults(func=lambda a: store_repair(a) if a.repair else store_check(a), rebuild=False)
    rebuild = store_commands.add_parser(
        "rebuild", help="rebuild consume queues and index from the commit log (changes the store)"
    )
    rebuild.add_argument("--store", required=True, help="the store's root directory")
    rebuild.set_defaults(func=store_repair, rebuild=True, tail=None)
    add_admin_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_command_line(build_parser(), argv)


def namesrv_main() -> int:
    """Entry point of ``quiver-namesrv``: ``python -m broker_core namesrv`` with the same options."""
    return main(["namesrv", *sys.argv[1:]])


def broker_main() -> int:
    """Entry point of ``quiver-broker``: ``python -m broker_core broker`` with the same options."""
    return main(["broker", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
