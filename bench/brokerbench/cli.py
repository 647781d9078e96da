"""The command line of ``bench/broker.py``: a run, or (``--role``) one child's part."""

from __future__ import annotations

import argparse
import json
import os

from . import __doc__ as package_doc
from .phases import PHASES, run
from .report import summary_json, targets
from .roles import ROLES, run_role


def main() -> None:
    """Parse the command line; run one child role, or the whole benchmark and its report."""
    parser = argparse.ArgumentParser(description=(package_doc or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test, not figures)")
    parser.add_argument("--only", help=f"comma-separated phases out of {','.join(PHASES)}")
    parser.add_argument("--broker-prefix", help="command put before the broker's (e.g. a profiler)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, store)")
    parser.add_argument("--role", choices=tuple(ROLES), help=argparse.SUPPRESS)
    parser.add_argument("spec", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        return run_role(args.role, args.spec)
    print(f"quiver broker benchmark: 1 KiB messages, ASYNC_FLUSH, {os.cpu_count()} cores")
    result = run(args)
    out = summary_json(result)
    for line in targets(out):
        print(line)
    print(json.dumps(out))
