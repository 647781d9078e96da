"""Broker benchmark: one broker process measured side by side with its ceilings, in one run.

    python bench/broker.py [--quick] [--only PHASE[,PHASE]] [--broker-prefix CMD] [--keep]

What it measures and how: bench/brokerbench/__init__.py; the code is that package, one
module per part.  This file is the command, and the entry point of its child processes
(``--role ROLE SPEC``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # this checkout's broker_core, before any installed one

from brokerbench.cli import main  # noqa: E402  (bench/brokerbench/, beside this file)

if __name__ == "__main__":
    main()
