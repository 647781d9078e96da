"""Command line: ``python -m broker_core <command>``.

* ``namesrv [-c FILE]``: run a nameserver (``listenPort`` and friends, RocketMQ style).
* ``broker -c FILE``: run a broker from a RocketMQ-style broker.conf.
* ``store check --store DIR``: open a store (recovering it if it was not closed cleanly),
  print what it holds and run every file's self-check; exit 1 when problems are found.
* ``store rebuild --store DIR``: rebuild consume queues and index from the commit log.
* mqadmin-style admin commands (``clusterList``, ``topicList``, ``consumerProgress``...,
  see ``broker_core.cli.admin``), also installed as ``quiver-admin``.

``quiver-namesrv`` and ``quiver-broker`` are the first two as console scripts.
"""

from __future__ import annotations

import argparse
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
from broker_core.namesrv.server import NamesrvServer
from broker_core.store.store import MessageStore

log = logging.getLogger("broker_core")


def _store_config(args: argparse.Namespace) -> StoreConfig:
    return StoreConfig(str(Path(args.store).resolve()), warm_mapped_file_enable=False)


def store_check(args: argparse.Namespace) -> int:
    """Open, summarise and self-check a store."""
    store = MessageStore(_store_config(args))
    if args.rebuild:
        store.rebuild_consume_queues()
    with store.open():
        log = store.commit_log
        print(f"store: {store.root}")
        print(f"  last stop: {'unclean (recovered)' if store.recovered_abnormally else 'clean'}")
        print(
            f"  commit log: {len(log.queue.files)} segment(s), offsets [{log.min_offset}, {log.max_offset})"
        )
        queues = list(store.consume_queues)
        messages = sum(cq.max_offset - cq.min_offset for cq in queues)
        print(f"  topics: {len(store.topics())}, queues: {len(queues)}, messages in queues: {messages}")
        problems = store.check()
        for problem in problems:
            print(f"  PROBLEM: {problem}")
        print("  check: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


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
    return _serve(BrokerController(config, store_config))


def _serve(server: Any) -> int:
    """Run an asyncio server on uvloop until a signal asks it to stop."""
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

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
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
    store = commands.add_parser("store", help="inspect or repair a message store")
    store_commands = store.add_subparsers(dest="store_command", required=True)
    for name, rebuild in (("check", False), ("rebuild", True)):
        sub = store_commands.add_parser(name, help=f"{name} a store directory")
        sub.add_argument("--store", required=True, help="the store's root directory")
        sub.set_defaults(func=store_check, rebuild=rebuild)
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
