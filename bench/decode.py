"""Record decoding benchmark: what a consumer spends turning a FOUND pull body into messages.

    python bench/decode.py [--quick]

A pull body of 32 records (1 KiB random bodies; TAGS, KEYS and UNIQ_KEY properties, as the
official client sends them; IPv4 hosts) is decoded over and over by:

* the pure-Python decoder (``py_iter_records``, the reference);
* ``iter_records`` as the consumers call it (the C decoder when the extension is built);
* ``_speedups.decode_records`` alone: filling MessageExt slots in C, and returning tuples
  (with and without ``MessageExt(*t)`` on top), the alternatives measured for iter_records;
* ``decode_record`` one record at a time (C, then pure Python).

Figures are microseconds per record, the best of several rounds.  The last line of output
is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker_core.model import message  # noqa: E402
from broker_core.model.message import (  # noqa: E402
    MessageExt,
    MessageInner,
    encode_host,
    finish_record,
    py_decode_record,
    py_iter_records,
)

RECORDS = 32
BODY_BYTES = 1024


def pull_body() -> tuple[bytes, list[bytes]]:
    store_host = encode_host("10.0.0.5:10911")
    records = []
    phys = 1 << 30
    for i in range(RECORDS):
        msg = MessageInner(
            "BenchTopic",
            3,
            os.urandom(BODY_BYTES),
            {"TAGS": "TagA", "KEYS": f"order-{i}", "UNIQ_KEY": f"0A00000900D0{i:020X}"},
            born_host="10.0.0.9:53412",
            born_timestamp=1_700_000_000_000 + i,
        )
        record = msg.encode(store_host)
        finish_record(record, 1000 + i, phys, 1_700_000_000_100 + i)
        phys += len(record)
        records.append(bytes(record))
    return b"".join(records), records


def per_record_us(run: Callable[[], object], calls: int, rounds: int) -> float:
    for _ in range(max(1, calls // 10)):
        run()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        best = min(best, time.perf_counter() - start)
    return best / calls / RECORDS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke test")
    args = parser.parse_args()
    calls, rounds = (300, 3) if args.quick else (3000, 7)
    body, records = pull_body()
    c_decode = message._c_decode_records
    reference = list(py_iter_records(body))
    assert list(message.iter_records(body)) == reference

    figures: dict[str, object] = {
        "bench": "decode",
        "records_per_body": RECORDS,
        "body_bytes": BODY_BYTES,
        "c_speedups": c_decode is not None,
    }
    runs: dict[str, Callable[[], object]] = {
        "python_iter_records_us": lambda: list(py_iter_records(body)),
        "iter_records_us": lambda: list(message.iter_records(body)),
        "python_decode_record_us": lambda: [py_decode_record(r) for r in records],
        "decode_record_us": lambda: [message.decode_record(r) for r in records],
    }
    if c_decode is not None:
        assert c_decode(body, MessageExt)[0] == reference
        assert [MessageExt(*t) for t in c_decode(body)[0]] == reference
        runs["c_fill_slots_us"] = lambda: c_decode(body, MessageExt)
        runs["c_tuples_us"] = lambda: c_decode(body)
        runs["c_tuples_then_messageext_us"] = lambda: [MessageExt(*t) for t in c_decode(body)[0]]
    for name, run in runs.items():
        slow = name.startswith("python_")
        us = per_record_us(run, calls // 10 if slow else calls, rounds)
        figures[name] = round(us, 3)
        print(f"{name:32} {us:8.3f} us/record  {1e6 / us:12,.0f} records/s")
    figures["iter_records_speedup"] = round(
        figures["python_iter_records_us"] / figures["iter_records_us"],  # type: ignore[operator]
        1,
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
