"""The command line of ``bench/peers.py``: a run, or (``--role peer``) one child's part."""

from __future__ import annotations

import argparse
import json
import os
import sys

from servers import describe_probe, machine_probe  # bench/servers.py

from broker_core.remoting.busypoll import DEFAULT_BUSY_POLL_MICROS, MAX_BUSY_POLL_MICROS

from . import __doc__ as package_doc
from .child import peer_main
from .report import figures, print_table, summary_json
from .runner import run
from .workload import FLUSH_MODES, SCENARIOS, SYSTEMS


def main() -> None:
    """Parse the command line; run one child's part, or the whole benchmark and its report."""
    parser = argparse.ArgumentParser(description=(package_doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows, 10,000 catch-up messages")
    parser.add_argument("--count", type=int, help="catch-up messages (default 200,000; --quick 10,000)")
    parser.add_argument("--only", help=f"comma-separated systems out of {','.join(SYSTEMS)}")
    parser.add_argument("--scenarios", help=f"comma-separated scenarios out of {','.join(SCENARIOS)}")
    parser.add_argument(
        "--quiver-flush", choices=FLUSH_MODES, default="ASYNC_FLUSH", help="our broker's flush"
    )
    parser.add_argument(
        "--quiver-busy-poll",
        type=int,
        default=DEFAULT_BUSY_POLL_MICROS,
        metavar="MICROS",
        help=(
            "our broker's serverBusyPollMicros and our producer's busy_poll_micros "
            f"(default {DEFAULT_BUSY_POLL_MICROS}, as shipped; 0: never poll before sleeping)"
        ),
    )
    parser.add_argument("--role", choices=("peer",), help=argparse.SUPPRESS)
    parser.add_argument("spec", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "peer":
        out = peer_main(json.loads(args.spec))
        print(json.dumps(out), flush=True)
        os._exit(0)  # client threads (our instance, pika) need not be waited for
    if args.count is not None and args.count <= 0:
        raise SystemExit("--count must be positive")
    if not 0 <= args.quiver_busy_poll <= MAX_BUSY_POLL_MICROS:
        raise SystemExit(f"--quiver-busy-poll must be 0 to {MAX_BUSY_POLL_MICROS}")
    probe = machine_probe()
    print(f"peers benchmark: 1 KiB messages, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(describe_probe(probe))
    result = run(args)
    table = figures(result)
    print_table(result, table)
    print(json.dumps({**summary_json(result, table), **probe}))
