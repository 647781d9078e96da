"""Peers benchmark: one workload through Quiver, Redis Streams, NATS JetStream and RabbitMQ, in one run.

    python bench/peers.py [--quick] [--count N] [--only quiver,redis,nats,rabbitmq,echo]
                          [--scenarios sync,sync8,batch,catchup,latency] [--quiver-flush ASYNC_FLUSH]

What it measures and how: bench/peerbench/__init__.py; the code is that package, one
adapter per system behind one protocol and one module per part.  This file is the
command, and the entry point of its child processes (``--role peer SPEC``).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # this checkout's broker_core (as bench/servers.py does)

from peerbench.cli import main  # noqa: E402  (bench/peerbench/, beside this file)

if __name__ == "__main__":
    main()
