"""Start a broker with timestamps on its send and pull paths (for bench/timeline.py).

    python bench/timeline_probe.py OUT python -m broker_core broker -c broker.conf

Runs ``python -m broker_core ...`` in this process after wrapping two methods, so that
every stamped message (its body's first 8 bytes: the sender's ``time.perf_counter_ns()``,
a monotonic clock every process on the machine shares) leaves three times behind:

* ``SendProcessor.handle`` entered and returned (the request decoded, dispatched, the
  record appended and dispatched, the answer built);
* ``PullProcessor._reply`` called with the message as the first record of its body (a
  held pull woken by that append, its answer being built).

At exit (the broker stops on SIGINT) they go to OUT as JSON: ``{"sends": [[stamp, entered,
returned], ...], "pulls": [[stamp, replied], ...]}``.  A wrapper costs about a
microsecond per call; the broker is otherwise the one users run.
"""

from __future__ import annotations

import atexit
import runpy
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))  # this checkout's broker_core

import orjson  # noqa: E402

from broker_core.broker.processors.pull import PullProcessor  # noqa: E402
from broker_core.broker.processors.send import SendProcessor  # noqa: E402
from broker_core.model.message import HEADER_V4_SIZE  # noqa: E402

STAMP_BYTES = 8
"""A stamped body's first 8 bytes (bench/peerbench/workload.py ``STAMP``)."""


def instrument(out: Path) -> None:
    """Wrap the two methods and write what they saw to ``out`` at exit."""
    sends: list[tuple[int, int, int]] = []
    pulls: list[tuple[int, int]] = []
    handle = SendProcessor.handle
    reply = PullProcessor._reply

    def timed_handle(self: SendProcessor, request: Any, conn: Any) -> Any:
        entered = time.perf_counter_ns()
        answer = handle(self, request, conn)
        body = request.body
        if len(body) >= STAMP_BYTES:
            sends.append(
                (int.from_bytes(body[:STAMP_BYTES], "big", signed=True), entered, time.perf_counter_ns())
            )
        return answer

    def timed_reply(*args: Any, **kwargs: Any) -> Any:
        body = kwargs.get("body", args[5] if len(args) > 5 else b"")
        if len(body) >= HEADER_V4_SIZE + STAMP_BYTES:  # the first record's body starts there
            stamp = int.from_bytes(body[HEADER_V4_SIZE : HEADER_V4_SIZE + STAMP_BYTES], "big", signed=True)
            pulls.append((stamp, time.perf_counter_ns()))
        return reply(*args, **kwargs)

    SendProcessor.handle = timed_handle  # type: ignore[method-assign]
    PullProcessor._reply = staticmethod(timed_reply)  # type: ignore[method-assign]
    atexit.register(lambda: out.write_bytes(orjson.dumps({"sends": sends, "pulls": pulls})))


def main() -> None:
    out, command = Path(sys.argv[1]), sys.argv[2:]
    if command[1:3] != ["-m", "broker_core"]:
        raise SystemExit("usage: timeline_probe.py OUT python -m broker_core broker -c CONF")
    instrument(out)
    sys.argv = ["broker_core", *command[3:]]
    runpy.run_module("broker_core", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
