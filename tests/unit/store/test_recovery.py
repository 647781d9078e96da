"""Recovery (``MessageStore.open`` after a crash or damage): nothing acknowledged is lost,
nothing damaged is served, and the store keeps working.

Crashes are real: a writer runs in a subprocess and is killed with SIGKILL.  Its store
config travels as JSON on the command line; it prints one line per acknowledged message.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from broker_core.config import StoreConfig
from broker_core.model.message import MESSAGE_MAGIC_CODE, MessageExt
from broker_core.store.results import GetMessageStatus
from broker_core.store.store import MessageStore

from .conftest import (
    AUDIT,
    ORDERS,
    T0,
    Clock,
    config_json,
    digest,
    message,
    read_queue,
    reopen,
    run_python,
    spawn_python,
    tiny_config,
)

QUEUES = 3

# The writer: message i of a run is a pure function of (seed, i), so the test can rebuild it.
WRITER = """
import hashlib, json, random, sys
from broker_core.config import StoreConfig
from broker_core.model.message import MessageInner
from broker_core.store.store import MessageStore

config = StoreConfig(**json.loads(sys.argv[1]))
seed = int(sys.argv[2])

def make(i):
    rng = random.Random(f"{seed}-{i}")
    body = rng.randbytes(rng.randrange(1, 3000))
    props = {"KEYS": f"w{i} seed{seed}", "UNIQ_KEY": f"{seed}-{i}", "note": "é" * rng.randrange(0, 20)}
    return MessageInner("orders", i % 3, body, props, born_host="10.1.2.3:50000")

store = MessageStore(config).open()
i = 0
while i < 5000:
    if i % 7 == 3:  # a batch of three to one queue
        msgs = [make(i), make(i + 1), make(i + 2)]
        for m in msgs:
            m.queue_id = i % 3
        result = store.put_messages(msgs)
        ids = result.msg_ids
    else:
        msgs = [make(i)]
        result = store.put_message(msgs[0])
        ids = [result.msg_id]
    if result.status.name != "PUT_OK":
        print("FAIL", result.status.name, result.remark, flush=True)
        sys.exit(1)
    for k, (m, msg_id) in enumerate(zip(msgs, ids)):
        digest = hashlib.sha256(m.body).hexdigest()[:16]
        print(msg_id, m.queue_id, result.queue_offset + k, digest, m.properties["UNIQ_KEY"], flush=True)
    i += len(msgs)
"""


def expected_message(seed: int, i: int) -> tuple[bytes, dict[str, str]]:
    rng = random.Random(f"{seed}-{i}")
    body = rng.randbytes(rng.randrange(1, 3000))
    props = {"KEYS": f"w{i} seed{seed}", "UNIQ_KEY": f"{seed}-{i}", "note": "é" * rng.randrange(0, 20)}
    return body, props


def assert_only_valid_records(store: MessageStore) -> int:
    """Read every queue end to end: every record served decodes, has a good CRC and sits where
    its consume-queue entry says.  Returns how many records were read."""
    count = 0
    for topic in store.topics():
        for queue_id in sorted(store.consume_queues.queues[topic]):
            for offset, msg in enumerate(read_queue(store, topic, queue_id, 0)):
                assert msg.body_crc_ok, f"{topic}-{queue_id}@{offset}: body CRC mismatch"
                assert (msg.topic, msg.queue_id, msg.queue_offset) == (topic, queue_id, offset)
                count += 1
    return count


# -- (a) SIGKILL under SYNC_FLUSH ------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_it_keeps_every_message_acknowledged_under_sync_flush_across_sigkill(
    tmp_path: Path, seed: int
) -> None:
    config = tiny_config(tmp_path / "store", flush_disk_type="SYNC_FLUSH", flush_interval_consume_queue=50)
    rng = random.Random(seed)
    writer = spawn_python(WRITER, config_json(config), str(seed))
    acked: list[list[str]] = []
    target = rng.randrange(20, 400)
    assert writer.stdout is not None
    try:
        while len(acked) < target:
            line = writer.stdout.readline()
            assert line, f"the writer stopped early: {writer.stderr.read() if writer.stderr else ''}"
            assert not line.startswith("FAIL"), line
            acked.append(line.split())
        time.sleep(rng.random() * 0.03)
    finally:
        writer.send_signal(signal.SIGKILL)
        # Read through the same text wrapper: communicate() would skip what it has buffered.
        rest = writer.stdout.read()
        writer.wait(timeout=10)
        if writer.stderr is not None:
            writer.stderr.close()
        writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL
    # Lines the writer printed before dying were acknowledged too (a torn last line was not).
    acked.extend(line.split() for line in rest.splitlines(keepends=True) if line.endswith("\n"))
    assert (config.root / "abort").exists(), "the crash must leave the abort file behind"

    store = reopen(config)
    try:
        assert store.recovered_abnormally
        for msg_id, queue_id, queue_offset, body_digest, uniq in acked:
            found = store.view_message_by_id(msg_id)
            assert found is not None, f"acknowledged message {uniq} ({msg_id}) is missing"
            index = int(uniq.split("-")[1])
            body, props = expected_message(seed, index)
            assert digest(found.body) == body_digest
            assert (found.body, found.properties) == (body, props)
            assert (found.queue_id, found.queue_offset) == (int(queue_id), int(queue_offset))
            pulled = store.get_message(ORDERS, int(queue_id), int(queue_offset), 1)
            assert pulled.status is GetMessageStatus.FOUND, f"{uniq} is not in its consume queue"
            assert pulled.messages[0] == store.commit_log.read_record(found.commit_log_offset)
        last_index = max(int(fields[4].split("-")[1]) for fields in acked)
        key_hits = store.query_message(ORDERS, f"w{last_index}", 4, 0, 2**62)
        assert [m.uniq_key for m in key_hits] == [f"{seed}-{last_index}"]
        assert store.check() == []
        assert_only_valid_records(store)
        maxima = [store.get_max_offset_in_queue(ORDERS, q) for q in range(QUEUES)]
        new = [store.put_message(message(ORDERS, q, b"after the crash %d" % q)) for q in range(QUEUES)]
        assert [r.queue_offset for r in new] == maxima
        assert store.check() == []
    finally:
        store.close()
    again = reopen(config)
    try:
        assert [m.body for m in read_queue(again, ORDERS, 1)][-1] == b"after the crash 1"
        assert [p for p in again.check() if "past the file size" not in p] == []
    finally:
        again.close()


# -- (b) a torn or dirty tail after a clean stop ----------------------------------------------------


def fill_and_close(config: StoreConfig, count: int, seed: int = 0) -> list[tuple[int, int, int, bytes, str]]:
    """Append ``count`` messages, close cleanly; return (phys, size, queue id, body, msg id) of each."""
    rng = random.Random(seed)
    written = []
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(count):
            body = rng.randbytes(rng.randrange(100, 2000))
            result = store.put_message(message(ORDERS, i % QUEUES, body, KEYS=f"k{i}"))
            written.append((result.wrote_offset, result.wrote_bytes, i % QUEUES, body, result.msg_id))
        assert store.check() == []
    return written


def segment_of(config: StoreConfig, phys: int) -> tuple[Path, int]:
    size = config.mapped_file_size_commit_log
    start = phys - phys % size
    return config.root / "commitlog" / f"{start:020d}", phys - start


def assert_recovered_prefix(
    config: StoreConfig, written: list[tuple[int, int, int, bytes, str]], kept: int
) -> None:
    """After reopening: the first ``kept`` messages are served intact, none of the others,
    and new appends take the freed slots and survive another reopen."""
    store = reopen(config)
    try:
        assert store.commit_log.max_offset == written[kept - 1][0] + written[kept - 1][1]
        for queue_id in range(QUEUES):
            expected = [w[3] for w in written[:kept] if w[2] == queue_id]
            assert [m.body for m in read_queue(store, ORDERS, queue_id)] == expected
            assert store.get_max_offset_in_queue(ORDERS, queue_id) == len(expected)
        for _phys, _size, _q, body, msg_id in written[kept:]:
            found = store.view_message_by_id(msg_id)
            assert found is None or found.body != body
        assert assert_only_valid_records(store) == kept
        # Bytes past a segment's size are reported, never cut (they are not the store's).
        assert [p for p in store.check() if "past the file size" not in p] == []
        fresh = [store.put_message(message(ORDERS, q, b"fresh %d" % q)) for q in range(QUEUES)]
        assert all(r.ok for r in fresh)
        assert fresh[0].wrote_offset == written[kept - 1][0] + written[kept - 1][1]
        assert [p for p in store.check() if "past the file size" not in p] == []
    finally:
        store.close()
    again = reopen(config)
    try:
        for queue_id in range(QUEUES):
            bodies = [m.body for m in read_queue(again, ORDERS, queue_id)]
            assert bodies[-1] == b"fresh %d" % queue_id
            assert bodies[:-1] == [w[3] for w in written[:kept] if w[2] == queue_id]
        assert [p for p in again.check() if "past the file size" not in p] == []
    finally:
        again.close()


def test_it_drops_a_record_torn_by_truncating_the_last_segment(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    written = fill_and_close(config, 120)
    last_phys, last_size = written[-1][0], written[-1][1]
    path, rel = segment_of(config, last_phys)
    assert rel > 0, "the last record must not start its segment"
    os.truncate(path, rel + last_size // 2)
    assert_recovered_prefix(config, written, len(written) - 1)


def test_it_drops_every_record_after_a_tear_in_the_middle_of_the_last_segment(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    written = fill_and_close(config, 120, seed=5)
    last_segment = segment_of(config, written[-1][0])[0]
    in_last = [i for i, w in enumerate(written) if segment_of(config, w[0])[0] == last_segment]
    assert len(in_last) >= 5
    torn = in_last[len(in_last) // 2]
    _path, rel = segment_of(config, written[torn][0])
    os.truncate(last_segment, rel + 40)
    assert_recovered_prefix(config, written, torn)


def test_it_ignores_random_bytes_after_the_last_record_and_past_the_file_end(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    written = fill_and_close(config, 120, seed=9)
    end = written[-1][0] + written[-1][1]
    path, rel = segment_of(config, end)
    rng = random.Random(99)
    with open(path, "r+b") as f:
        f.seek(rel)
        garbage = bytearray(rng.randbytes(config.mapped_file_size_commit_log - rel))
        # Make the garbage look like a record header, so only the CRC and sizes can tell.
        struct.pack_into(">iI", garbage, 0, 500, MESSAGE_MAGIC_CODE)
        f.write(garbage)
        f.write(rng.randbytes(10_000))  # past the segment's size
    assert path.stat().st_size == config.mapped_file_size_commit_log + 10_000
    assert_recovered_prefix(config, written, len(written))
    assert path.stat().st_size == config.mapped_file_size_commit_log + 10_000, "nothing is cut"


# -- (c) a crash with the checkpoint behind -----------------------------------------------------------

CRASHER = """
import json, os, signal, sys
from broker_core.config import StoreConfig
from broker_core.model.message import MessageInner
from broker_core.store.store import MessageStore

config = StoreConfig(**json.loads(sys.argv[1]))
store = MessageStore(config).open()
for i in range(int(sys.argv[2])):
    msg = MessageInner("orders", i % 3, b"late-%d" % i, {"KEYS": f"late-{i}", "UNIQ_KEY": f"L{i}"})
    result = store.put_message(msg)
    assert result.status.name == "PUT_OK", result
    print(result.msg_id, flush=True)
assert store.wait_dispatched()
os.kill(os.getpid(), signal.SIGKILL)
"""


def crash_after_appending(config: StoreConfig, count: int) -> list[str]:
    """Append ``count`` messages in a subprocess that then dies by SIGKILL; return their msgIds."""
    writer = spawn_python(CRASHER, config_json(config), str(count))
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL, err
    return out.split()


def early_store(tmp_path: Path, count: int) -> StoreConfig:
    """A store with ``count`` messages, closed cleanly, whose derived files are copied aside."""
    # Long logics interval: the crashed process never moves the checkpoint forward.
    config = tiny_config(tmp_path / "store", flush_interval_consume_queue=600_000)
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(count):
            store.put_message(message(ORDERS, i % 3, b"early-%d" % i, KEYS=f"early-{i}", UNIQ_KEY=f"E{i}"))
    for sub in ("consumequeue", "index"):
        shutil.copytree(config.root / sub, tmp_path / f"stale-{sub}")
    return config


def put_back_stale_derived_files(config: StoreConfig, tmp_path: Path) -> None:
    """As if the page cache of the consume queues and index was lost (they are never fsynced
    on the write path): the files are as they were at the last checkpoint."""
    for sub in ("consumequeue", "index"):
        shutil.rmtree(config.root / sub)
        shutil.copytree(tmp_path / f"stale-{sub}", config.root / sub)


def assert_early_and_late_present(store: MessageStore, early: int, late: int) -> None:
    for queue_id in range(3):
        bodies = [m.body for m in read_queue(store, ORDERS, queue_id)]
        expected = [b"early-%d" % i for i in range(early) if i % 3 == queue_id]
        expected += [b"late-%d" % i for i in range(late) if i % 3 == queue_id]
        assert bodies == expected
    for i in range(late):
        by_key = store.query_message(ORDERS, f"late-{i}", 8, 0, 2**62)
        assert [m.body for m in by_key] == [b"late-%d" % i], f"key late-{i}"
        assert [m.body for m in store.query_message(ORDERS, f"L{i}", 8, 0, 2**62)] == [b"late-%d" % i]
    assert [m.body for m in store.query_message(ORDERS, "early-4", 8, 0, 2**62)] == [b"early-4"]
    assert store.check() == []


def test_it_redispatches_queues_and_index_after_a_crash_with_the_checkpoint_behind(tmp_path: Path) -> None:
    config = early_store(tmp_path, 150)
    late_ids = crash_after_appending(config, 200)
    assert len(late_ids) == 200
    assert (config.root / "abort").exists()
    put_back_stale_derived_files(config, tmp_path)
    store = reopen(config)
    try:
        assert store.recovered_abnormally
        assert_early_and_late_present(store, 150, 200)
        assert store.put_message(message(ORDERS, 0, b"next")).queue_offset == 50 + 67
    finally:
        store.close()


def test_it_does_not_duplicate_entries_when_redispatching_over_complete_files(tmp_path: Path) -> None:
    config = early_store(tmp_path, 150)
    crash_after_appending(config, 200)
    store = reopen(config)  # the derived files already hold the late entries
    try:
        assert_early_and_late_present(store, 150, 200)
        assert [store.get_max_offset_in_queue(ORDERS, q) for q in range(3)] == [50 + 67, 50 + 67, 50 + 66]
    finally:
        store.close()


# -- (d) a corrupt checkpoint -------------------------------------------------------------------------


def test_it_rebuilds_everything_when_the_checkpoint_is_garbage(tmp_path: Path) -> None:
    config = early_store(tmp_path, 150)
    crash_after_appending(config, 200)
    put_back_stale_derived_files(config, tmp_path)
    (config.root / "checkpoint").write_bytes(random.Random(4).randbytes(4096))
    store = reopen(config)
    try:
        assert_early_and_late_present(store, 150, 200)
    finally:
        store.close()


def test_it_rebuilds_everything_when_the_checkpoint_is_garbage_after_a_clean_stop(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    written = fill_and_close(config, 300, seed=2)
    shutil.rmtree(config.root / "index")
    for queue_dir in (config.root / "consumequeue" / ORDERS).iterdir():
        files = sorted(queue_dir.iterdir())
        files[-1].write_bytes(bytes(files[-1].stat().st_size))  # the newest entries lost
    (config.root / "checkpoint").write_bytes(random.Random(5).randbytes(4096))
    store = reopen(config)
    try:
        for queue_id in range(QUEUES):
            assert [m.body for m in read_queue(store, ORDERS, queue_id)] == [
                w[3] for w in written if w[2] == queue_id
            ]
        assert [m.body for m in store.query_message(ORDERS, "k299", 4, 0, 2**62)] == [written[299][3]]
        assert store.check() == []
    finally:
        store.close()


# -- (e) delayed messages exactly once across a crash ------------------------------------------------

DELIVERER = """
import json, os, signal, sys, time
from broker_core.config import StoreConfig
from broker_core.store.store import MessageStore

config = StoreConfig(**json.loads(sys.argv[1]))
now = int(sys.argv[2])
kill_at = int(sys.argv[3])  # die once this many delivered messages are dispatched (0: never)
store = MessageStore(config, clock_ms=lambda: now).open()

def crash_midway(arrived):
    # The arrival listener runs on the dispatcher thread while deliver_due runs on this one.
    delivered = sum(store.get_max_offset_in_queue("orders", q) for q in (0, 1))
    if kill_at and delivered >= kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

store.add_arrival_listener(crash_midway)
print("ready", flush=True)
delivered, next_due = store.deliver_due(now)
print("done", delivered, flush=True)
time.sleep(60)
"""

DELAYED = 240  # 216 due at T0 + 10 s, 24 at level 4
NOT_DUE_LEVEL = 4  # 30 s: not due at T0 + 10 s


def store_delayed_messages(config: StoreConfig) -> None:
    clock = Clock(T0)
    with MessageStore(config, clock_ms=clock) as store:
        for i in range(DELAYED):
            level = NOT_DUE_LEVEL if i % 10 == 9 else 1 + i % 3  # 1 s, 5 s, 10 s
            result = store.put_message(
                message(ORDERS, i % 2, b"delayed-%d" % i, DELAY=str(level), UNIQ_KEY=f"D{i}", KEYS=f"d{i}")
            )
            assert result.ok
        assert store.get_max_offset_in_queue(ORDERS, 0) == 0, "delayed messages wait in the schedule topic"
        store.put_message(message(AUDIT, 0, b"plain"))


def uniq_counts(store: MessageStore) -> dict[str, int]:
    counts: dict[str, int] = {}
    for queue_id in (0, 1):
        for msg in read_queue(store, ORDERS, queue_id):
            assert msg.uniq_key is not None
            counts[msg.uniq_key] = counts.get(msg.uniq_key, 0) + 1
    return counts


def due_uniq_keys(now_offset_ms: int) -> set[str]:
    levels_ms = {1: 1000, 2: 5000, 3: 10_000, NOT_DUE_LEVEL: 30_000}
    keys = set()
    for i in range(DELAYED):
        level = NOT_DUE_LEVEL if i % 10 == 9 else 1 + i % 3
        if levels_ms[level] <= now_offset_ms:
            keys.add(f"D{i}")
    return keys


@pytest.mark.parametrize(
    "kill_at", [1, 37, 120, 200, 0], ids=lambda n: f"kill-after-{n}" if n else "kill-when-done"
)
def test_it_delivers_delayed_messages_exactly_once_across_a_crash(tmp_path: Path, kill_at: int) -> None:
    config = tiny_config(tmp_path / "store", flush_disk_type="SYNC_FLUSH", flush_interval_consume_queue=20)
    store_delayed_messages(config)
    now = T0 + 10_000
    due = len(due_uniq_keys(10_000))
    deliverer = spawn_python(DELIVERER, config_json(config), str(now), str(kill_at))
    assert deliverer.stdout is not None
    try:
        assert deliverer.stdout.readline().strip() == "ready"
        if not kill_at:
            assert deliverer.stdout.readline().startswith(f"done {due}")
        deliverer.wait(timeout=30 if kill_at else 0.01)
    except subprocess.TimeoutExpired:
        assert not kill_at, "the deliverer did not crash itself"
    finally:
        deliverer.send_signal(signal.SIGKILL)
        deliverer.communicate(timeout=10)
    assert deliverer.returncode == -signal.SIGKILL

    clock = Clock(now)
    store = reopen(config, clock)
    try:
        before = sum(uniq_counts(store).values())
        assert kill_at <= before <= due
        store.deliver_due(now)
        counts = uniq_counts(store)
        duplicates = {k: n for k, n in counts.items() if n > 1}
        assert duplicates == {}, f"delivered more than once: {sorted(duplicates)[:10]}"
        assert set(counts) == due_uniq_keys(10_000)
        assert store.check() == []
    finally:
        store.close()

    clock.ms = T0 + 30_000
    store = reopen(config, clock)
    try:
        delivered, next_due = store.deliver_due(T0 + 30_000)
        assert delivered == DELAYED // 10 and next_due is None
        counts = uniq_counts(store)
        assert set(counts) == {f"D{i}" for i in range(DELAYED)}
        assert set(counts.values()) == {1}
        sample: MessageExt = store.query_message(ORDERS, "d5", 4, 0, 2**62)[0]
        # Stored as RocketMQ stores a delivered message: its DELAY, REAL_TOPIC and REAL_QID
        # kept, nothing of Quiver's own (the recovery above placed it without a marker).
        assert sample.body == b"delayed-5" and sample.properties["DELAY"] == "3"
        assert sample.properties["REAL_TOPIC"] == ORDERS and sample.queue_id == 1
        assert set(sample.properties) == {"DELAY", "UNIQ_KEY", "KEYS", "REAL_TOPIC", "REAL_QID"}
        assert store.check() == []
    finally:
        store.close()


def test_it_does_not_deliver_again_after_a_clean_reopen(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    store_delayed_messages(config)
    clock = Clock(T0 + 10_000)
    with MessageStore(config, clock_ms=clock) as store:
        delivered, next_due = store.deliver_due()
        assert delivered == len(due_uniq_keys(10_000))
        assert next_due == T0 + 30_000
    with MessageStore(config, clock_ms=clock) as store:
        assert store.deliver_due() == (0, T0 + 30_000)
        assert set(uniq_counts(store).values()) == {1}
        assert store.check() == []


def test_the_writer_script_runs_to_completion_on_its_own(tmp_path: Path) -> None:
    # Guards the crash tests: the writer itself must work when nobody kills it.
    config = tiny_config(tmp_path / "store")
    source = WRITER.replace("while i < 5000", "while i < 30")
    done = run_python(source, config_json(config), "7")
    assert len(done.stdout.splitlines()) >= 30
