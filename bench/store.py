"""Storage-engine benchmark: the store measured side by side with the raw ceiling, in one run.

    python bench/store.py [--quick] [--dir DIR]

Figures (1 KiB bodies, a UNIQ_KEY and a tag on every message, as the official client sends):

* raw ceiling: a bare Python loop writing the same records (header pack + body CRC, with
  the same CRC function the store uses + copy) into a warm mmap'd file, one record per write;
* append, one message at a time and in batches of 32 (ASYNC_FLUSH), with consume queues
  and the index built as the store builds them in service: msgs/s until the last append
  returns, and until everything is dispatched.  A batch is what a producer sends: one
  request body with the 32 messages encoded back to back (RocketMQ's batch format);
* SYNC_FLUSH with 1 and with 32 concurrent writers, asyncio tasks awaiting their acks as
  the broker's connections do (group commit), served as shipped (the compiled msync
  worker where it is built) and, side by side, by the flush thread alone (its
  pure-Python twin); runs alternate and the median is kept;
* sequential read through the consume queues (pull-sized reads of 32);
* key lookup latency (index query + record read + key check) with 1 M messages indexed.

Messages (and batch bodies) are built before the clock starts, as the broker has them
from the request frame, and one batch per queue warms the store up first; everything the
store does with them (CRC, encoding, offsets, the write, the result, dispatch) is timed.
The last line of output is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import mmap
import os
import random
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from servers import describe_probe, machine_probe  # noqa: E402  (bench/servers.py)

from broker_core.config import StoreConfig  # noqa: E402
from broker_core.model.hashcode import HAVE_SPEEDUPS  # noqa: E402
from broker_core.model.message import (  # noqa: E402
    MessageBatchInner,
    MessageInner,
    crc32,
    encode_batch,
    encode_properties,
)
from broker_core.store import flush  # noqa: E402
from broker_core.store.store import MessageStore  # noqa: E402

BODY = b"q" * 1024
TOPIC = "BenchTopic"
QUEUES = 8
SEGMENT = 1024 * 1024 * 1024


def make_messages(n: int, start: int = 0, keys: bool = False) -> list[MessageInner]:
    """Messages as the broker builds them from SEND_MESSAGE frames (properties kept raw)."""
    out = []
    for i in range(start, start + n):
        props = {"TAGS": "TagA", "UNIQ_KEY": f"0100007F00005BCD{i:016X}", "WAIT": "true"}
        if keys:
            props["KEYS"] = f"order-{i}"
        out.append(
            MessageInner(
                TOPIC,
                i % QUEUES,
                BODY,
                props,
                born_host="127.0.0.1:50000",
                born_timestamp=1,
                properties_raw=encode_properties(props),
            )
        )
    return out


def make_batches(n: int, size: int) -> list[MessageBatchInner]:
    """Batches as producers send them: one request body of ``size`` encoded messages."""
    batches = []
    for first in range(0, n, size):
        items = []
        for i in range(first, min(n, first + size)):
            props = {"TAGS": "TagA", "UNIQ_KEY": f"0100007F00005BCD{i:016X}", "WAIT": "true"}
            items.append((BODY, props, 0))
        queue_id = (first // size) % QUEUES
        batches.append(
            MessageBatchInner(
                TOPIC,
                queue_id,
                encode_batch(items),
                born_host="127.0.0.1:50000",
                born_timestamp=1,
                properties={"WAIT": "true"},
            )
        )
    return batches


def raw_ceiling(directory: Path, n: int) -> float:
    """msgs/s of a bare Python loop writing the same records into a warm mmap."""
    size = 256 * 1024 * 1024
    path = directory / "raw"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, size)
    mm = mmap.mmap(fd, size)
    mm[:] = bytes(size)  # warm: the store warms its segments ahead too
    header = struct.Struct(">iIiiiqqiq8sq8siqi")
    host = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])
    props = encode_properties({"TAGS": "TagA", "UNIQ_KEY": "0" * 32, "WAIT": "true"})
    tail = bytes([len(TOPIC)]) + TOPIC.encode() + struct.pack(">h", len(props)) + props
    total = header.size + len(BODY) + len(tail)
    gc.collect()
    pos = 0
    started = time.perf_counter()
    for i in range(n):
        if pos + total > size:
            pos = 0
        header.pack_into(
            mm,
            pos,
            total,
            0xDAA320A7,
            crc32(BODY) & 0x7FFFFFFF,
            i % QUEUES,
            0,
            i,
            pos,
            0,
            1,
            host,
            2,
            host,
            0,
            0,
            len(BODY),
        )
        mm[pos + header.size : pos + header.size + len(BODY)] = BODY
        mm[pos + header.size + len(BODY) : pos + total] = tail
        pos += total
    elapsed = time.perf_counter() - started
    mm.close()
    os.close(fd)
    path.unlink()
    return n / elapsed


def settle_gc() -> None:
    """Collect, then exempt the pre-built messages from GC scans.

    A broker holds a few in-flight messages, not the hundreds of thousands this benchmark
    builds up front; without this, each full collection during the timed loop would walk
    all of them and the figure would measure the benchmark's own garbage collection.
    """
    gc.collect()
    gc.freeze()


def open_store(directory: Path, **overrides: object) -> MessageStore:
    if directory.exists():
        shutil.rmtree(directory)
    config = StoreConfig(str(directory), mapped_file_size_commit_log=SEGMENT, **overrides)  # type: ignore[arg-type]
    store = MessageStore(config).open()
    # Let the first segment be preallocated and warmed, as on a broker that has run a while.
    store.commit_log.queue.wait_prepared(timeout=30)
    return store


def warm_up(store: MessageStore) -> None:
    """One batch per queue before the clock starts, as on a broker that has run a while.

    The first messages create the index file (populating its 20 MB slot table) and every
    queue's first consume-queue file: one-time costs that are a large share of a
    half-second run and none of a broker's steady state.
    """
    for batch in make_batches(QUEUES * 32, 32):
        store.put_messages(batch)
    store.wait_dispatched(timeout=60)


def bench_append(directory: Path, n: int, batch: int) -> dict[str, float]:
    store = open_store(directory)
    try:
        warm_up(store)
        if batch == 1:
            msgs = make_messages(n)
            settle_gc()
            started = time.perf_counter()
            put = store.put_message
            for msg in msgs:
                put(msg)
        else:
            batches = make_batches(n, batch)
            settle_gc()
            started = time.perf_counter()
            put_many = store.put_messages
            for encoded in batches:
                put_many(encoded)
        appended = time.perf_counter() - started
        store.wait_dispatched(timeout=120)
        dispatched = time.perf_counter() - started
    finally:
        store.close()
    return {"append_per_s": n / appended, "dispatched_per_s": n / dispatched}


def bench_sync(directory: Path, total: int, writers: int, *, worker: bool = True) -> float:
    """SYNC_FLUSH msgs/s with ``writers`` concurrent producers, each waiting for its ack.

    The writers are asyncio tasks on one uvloop event loop, as the broker serves
    concurrent producer connections; each awaits its message's fsync before sending the
    next.  ``worker=False`` leaves them to the flush thread (the compiled worker's twin).
    """
    shipped = flush.Syncer
    if not worker:
        flush.Syncer = None
    try:
        store = open_store(directory, flush_disk_type="SYNC_FLUSH")
    finally:
        flush.Syncer = shipped
    try:
        per_writer = total // writers
        batches = [make_messages(per_writer, start=w * per_writer) for w in range(writers)]
        failures: list[str] = []

        async def writer(msgs: list[MessageInner]) -> None:
            for msg in msgs:
                result = await store.put_message_async(msg)
                if result.status.value != "PUT_OK":
                    failures.append(result.status.value)

        async def run_all() -> float:
            started = time.perf_counter()
            await asyncio.gather(*(writer(b) for b in batches))
            return time.perf_counter() - started

        settle_gc()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            elapsed = runner.run(run_all())
        if failures:
            raise SystemExit(f"SYNC_FLUSH puts failed: {failures[:5]}")
        return per_writer * writers / elapsed
    finally:
        store.close()


def bench_read_and_lookup(directory: Path, n: int, lookups: int) -> dict[str, float]:
    store = open_store(directory)
    try:
        for i in range(0, n, 50_000):
            msgs = make_messages(min(50_000, n - i), start=i, keys=True)
            for j in range(0, len(msgs), 32):
                store.put_messages(msgs[j : j + 32])
        store.wait_dispatched(timeout=300)
        gc.collect()
        started = time.perf_counter()
        read = 0
        for queue_id in range(QUEUES):
            offset = 0
            while True:
                result = store.get_message(TOPIC, queue_id, offset, 32)
                if not result.messages:
                    break
                read += len(result.messages)
                offset = result.next_begin_offset
        read_elapsed = time.perf_counter() - started
        if read != n:
            raise SystemExit(f"sequential read saw {read} messages, expected {n}")
        rng = random.Random(7)
        latencies = []
        for _ in range(lookups):
            i = rng.randrange(n)
            t0 = time.perf_counter()
            found = store.query_message(TOPIC, f"order-{i}", 1)
            latencies.append(time.perf_counter() - t0)
            if not found or found[0].keys != f"order-{i}":
                raise SystemExit(f"key order-{i} not found")
        latencies.sort()
        return {
            "read_per_s": read / read_elapsed,
            "lookup_p50_ms": latencies[len(latencies) // 2] * 1000,
            "lookup_p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
            "lookup_max_ms": latencies[-1] * 1000,
        }
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test, not figures)")
    parser.add_argument("--dir", default=None, help="where to put the stores (default: a temp dir)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per append figure; the median is kept")
    args = parser.parse_args()
    n = 50_000 if args.quick else 300_000
    indexed = 50_000 if args.quick else 1_000_000
    root = Path(args.dir or tempfile.mkdtemp(prefix="quiver-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    repeat = 1 if args.quick else args.repeat
    probe = machine_probe()
    print(f"quiver store benchmark: {n} x 1 KiB messages, C speedups {'on' if HAVE_SPEEDUPS else 'off'}")
    print(describe_probe(probe))
    try:
        ceiling = statistics.median(raw_ceiling(root, n) for _ in range(repeat))
        print(f"raw ceiling (pack + CRC + copy into a warm mmap): {ceiling:12,.0f} msgs/s")
        single = [bench_append(root / "single", n, 1) for _ in range(repeat)]
        single_append = statistics.median(r["append_per_s"] for r in single)
        single_dispatched = statistics.median(r["dispatched_per_s"] for r in single)
        print(
            f"append one at a time (ASYNC_FLUSH):              {single_append:12,.0f} msgs/s "
            f"({single_append / ceiling:.0%} of ceiling); incl. dispatch {single_dispatched:,.0f}/s"
        )
        batched = [bench_append(root / "batch", n, 32) for _ in range(repeat)]
        batch_append = statistics.median(r["append_per_s"] for r in batched)
        batch_dispatched = statistics.median(r["dispatched_per_s"] for r in batched)
        print(
            f"append in batches of 32 (ASYNC_FLUSH):           {batch_append:12,.0f} msgs/s "
            f"({batch_append / ceiling:.0%} of ceiling); incl. dispatch {batch_dispatched:,.0f}/s"
        )
        sync_total = 4_000 if args.quick else 20_000
        worker = flush.Syncer is not None
        runs: dict[str, list[float]] = {"1": [], "32": [], "1 thread": [], "32 thread": []}
        for _ in range(repeat):
            runs["1"].append(bench_sync(root / "sync1", sync_total // 4, 1))
            runs["32"].append(bench_sync(root / "sync32", sync_total, 32))
            if worker:
                runs["1 thread"].append(bench_sync(root / "sync1", sync_total // 4, 1, worker=False))
                runs["32 thread"].append(bench_sync(root / "sync32", sync_total, 32, worker=False))
        sync_1, sync_32 = statistics.median(runs["1"]), statistics.median(runs["32"])
        print(f"SYNC_FLUSH, 1 writer:                            {sync_1:12,.0f} msgs/s")
        print(
            f"SYNC_FLUSH, 32 writers (group commit):           {sync_32:12,.0f} msgs/s "
            f"({sync_32 / sync_1:.1f}x)"
        )
        thread_1 = statistics.median(runs["1 thread"]) if worker else sync_1
        thread_32 = statistics.median(runs["32 thread"]) if worker else sync_32
        if worker:
            print(f"  (served by the msync worker; by the flush thread alone: 1 writer {thread_1:,.0f},")
            print(
                f"  32 writers {thread_32:,.0f} msgs/s, so the worker is {sync_32 / thread_32:.2f}x with 32)"
            )
        else:
            print("  (served by the flush thread: the compiled msync worker is not built or switched off)")
        reads = bench_read_and_lookup(root / "read", indexed, 2_000 if args.quick else 10_000)
        print(f"sequential read through consume queues:          {reads['read_per_s']:12,.0f} msgs/s")
        print(
            f"key lookup, {indexed:,} messages indexed:          p50 {reads['lookup_p50_ms']:.3f} ms, "
            f"p99 {reads['lookup_p99_ms']:.3f} ms, max {reads['lookup_max_ms']:.3f} ms"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {
        "bench": "store",
        "messages": n,
        "body_bytes": len(BODY),
        "c_speedups": HAVE_SPEEDUPS,
        **probe,
        "raw_ceiling_msgs_s": round(ceiling),
        "append_single_msgs_s": round(single_append),
        "append_single_ratio": round(single_append / ceiling, 3),
        "append_single_dispatched_msgs_s": round(single_dispatched),
        "append_batch32_msgs_s": round(batch_append),
        "append_batch32_ratio": round(batch_append / ceiling, 3),
        "append_batch32_dispatched_msgs_s": round(batch_dispatched),
        "sync_flush_1_writer_msgs_s": round(sync_1),
        "sync_flush_32_writers_msgs_s": round(sync_32),
        "sync_flush_group_commit_speedup": round(sync_32 / sync_1, 1),
        "sync_flush_worker": worker,
        "sync_flush_thread_1_writer_msgs_s": round(thread_1),
        "sync_flush_thread_32_writers_msgs_s": round(thread_32),
        "sync_flush_worker_vs_thread_32": round(sync_32 / thread_32, 2),
        "read_msgs_s": round(reads["read_per_s"]),
        "indexed_messages": indexed,
        "lookup_p50_ms": round(reads["lookup_p50_ms"], 4),
        "lookup_p99_ms": round(reads["lookup_p99_ms"], 4),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
