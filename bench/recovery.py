"""Recovery of a full 1 GiB commit-log segment, intact and with a corrupt record in the middle.

    python bench/recovery.py [--dir DIR] [--body BYTES]

One store, default geometry (1 GiB segments), filled to one segment (just short of the roll,
so a start walks all of it) with messages of
``--body`` bytes (a tag and a key each, as a producer sends them), closed cleanly.  Then,
side by side in one run:

* open after a clean stop (recovery walks the segment, as on every start);
* open after a crash (``abort`` left in place, checkpoint dropped: consume queues and index
  rebuilt from the whole segment);
* the same two with one byte flipped in the middle of the segment: recovery skips the
  damaged record, resynchronises on the next one and keeps everything after it (before
  issue 14 it truncated there and lost the second half);
* ``store check`` (read-only, the whole log).

Each case works on a copy of the filled store.  Messages kept are counted by pulling
every queue.  The last line is one JSON object of the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from broker_core.config import StoreConfig  # noqa: E402
from broker_core.model.message import MessageInner  # noqa: E402
from broker_core.store.store import MessageStore  # noqa: E402

TOPIC = "RecoveryBench"
QUEUES = 8
REPO = Path(__file__).resolve().parent.parent


def fill(root: Path, body_size: int) -> tuple[int, int]:
    """Fill one full segment; return (messages, offset of the middle record)."""
    config = StoreConfig(str(root), warm_mapped_file_enable=False)
    segment = config.mapped_file_size_commit_log
    store = MessageStore(config).open()
    count, middle = 0, -1
    body = b"r" * body_size
    try:
        while True:
            result = store.put_message(
                MessageInner(TOPIC, count % QUEUES, body, {"TAGS": "TagA", "KEYS": f"key-{count}"})
            )
            assert result.ok, result
            # Stop just short of the roll: the whole log is the one segment recovery walks.
            if result.wrote_offset + 2 * result.wrote_bytes >= segment:
                break
            if middle < 0 and result.wrote_offset >= segment // 2:
                middle = result.wrote_offset
            count += 1
    finally:
        store.close()
    return count + 1, middle


def count_messages(store: MessageStore) -> int:
    total = 0
    for queue_id in range(QUEUES):
        offset = store.get_min_offset_in_queue(TOPIC, queue_id)
        # As a consumer does: on past entries that hold nothing (a skipped record's blank).
        while offset < store.get_max_offset_in_queue(TOPIC, queue_id):
            got = store.get_message(TOPIC, queue_id, offset, 32)
            total += len(got.messages)
            offset = got.next_begin_offset
    return total


def timed_open(root: Path, *, crash: bool) -> tuple[float, int, int]:
    """(seconds to open, messages served, damaged ranges recorded)."""
    if crash:
        (root / "abort").write_bytes(b"")
        (root / "checkpoint").unlink(missing_ok=True)
    started = time.perf_counter()
    store = MessageStore(StoreConfig(str(root), warm_mapped_file_enable=False)).open()
    elapsed = time.perf_counter() - started
    try:
        assert store.wait_dispatched(60)
        return elapsed, count_messages(store), len(store.damage.ranges)
    finally:
        store.close()


def flip(root: Path, phys: int) -> None:
    path = root / "commitlog" / f"{0:020d}"
    with open(path, "r+b") as f:
        f.seek(phys + 100)
        byte = f.read(1)
        f.seek(phys + 100)
        f.write(bytes([byte[0] ^ 0xFF]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to build the stores (default: a temp dir)")
    parser.add_argument("--body", type=int, default=1024, help="message body size in bytes")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="quiver-recovery-", dir=args.dir))
    try:
        source = base / "filled"
        started = time.perf_counter()
        messages, middle = fill(source, args.body)
        print(f"filled one 1 GiB segment: {messages:,} messages in {time.perf_counter() - started:.1f} s")
        figures: dict[str, object] = {"bench": "recovery", "messages": messages, "body": args.body}
        rows = []
        for damaged in (False, True):
            for crash in (False, True):
                work = base / "work"
                shutil.rmtree(work, ignore_errors=True)
                shutil.copytree(source, work)
                if damaged:
                    flip(work, middle)
                seconds, served, ranges = timed_open(work, crash=crash)
                name = f"{'damaged' if damaged else 'intact'}_{'crash' if crash else 'clean'}"
                figures[f"{name}_open_s"] = round(seconds, 3)
                figures[f"{name}_served"] = served
                rows.append((name, seconds, served, ranges))
        work = base / "work"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work)
        flip(work, middle)
        started = time.perf_counter()
        check = subprocess.run(
            [sys.executable, "-m", "broker_core", "store", "check", "--store", str(work)],
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        check_s = time.perf_counter() - started
        figures["store_check_s"] = round(check_s, 3)
        figures["store_check_exit"] = check.returncode
        print(f"{'case':<16} {'open (s)':>9} {'served':>10} {'lost':>6} {'damaged ranges':>15}")
        for name, seconds, served, ranges in rows:
            print(f"{name:<16} {seconds:>9.2f} {served:>10,} {messages - served:>6} {ranges:>15}")
        intact = figures["intact_clean_open_s"]
        print(
            f"damaged/intact open time, clean stop: {figures['damaged_clean_open_s'] / intact:.2f}x; "  # type: ignore[operator]
            f"after a crash: {figures['damaged_crash_open_s'] / figures['intact_crash_open_s']:.2f}x"  # type: ignore[operator]
        )
        print(f"store check (read-only, whole log, damaged): {check_s:.2f} s, exit {check.returncode}")
        print(json.dumps(figures))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
