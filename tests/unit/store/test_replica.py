"""A slave's store takes its master's commit-log bytes in chunks of any size and ends up
byte-identical, with its own consume queues and index built from them; bytes that do not
continue its log are refused, and a slave refuses sends and delivers no delayed message."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker_core.model.message import TRANSACTION_PREPARED_TYPE
from broker_core.store import replica as replica_module
from broker_core.store.replica import ReplicaMismatch
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore
from broker_core.topics import SCHEDULE_TOPIC

from .conftest import AUDIT, ORDERS, Clock, message, read_queue, reopen, tiny_config


def fill(master: MessageStore, count: int, seed: int = 7) -> None:
    """Messages of varied sizes in two topics, batches among them, past several segments."""
    rng = random.Random(seed)
    for i in range(count):
        body = bytes([i % 251]) * rng.randint(1, 3000)
        if i % 10 == 0:
            batch = [message(AUDIT, 1, body, KEYS=f"k{i}-{j}") for j in range(3)]
            assert master.put_messages(batch).status is PutMessageStatus.PUT_OK
        else:
            msg = message(ORDERS, i % 3, body, KEYS=f"k{i}", TAGS="T")
            assert master.put_message(msg).status is PutMessageStatus.PUT_OK


def copy(master: MessageStore, replica: MessageStore, chunk: int) -> int:
    """Stream the master's log to the replica as replication does; return the bytes sent."""
    sent = 0
    offset = replica.commit_log.max_offset or master.commit_log.min_offset
    while True:
        data = master.replica_chunk(offset, chunk)
        assert data is not None
        if not data:
            return sent
        replica.append_replica(offset, data)
        offset += len(data)
        sent += len(data)


def segments(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "commitlog").iterdir())}


def trimmed(files: dict[str, bytes], end: int, size: int) -> dict[str, bytes]:
    """Each segment's bytes up to ``end`` (the replicated offset)."""
    return {name: data[: max(0, min(size, end - int(name)))] for name, data in files.items()}


@pytest.mark.parametrize("chunk", [1, 777, 32 * 1024, 1 << 20])
def test_chunks_of_any_size_make_a_byte_identical_log_with_its_own_queues(
    tmp_path: Path, clock: Clock, chunk: int
) -> None:
    master_config = tiny_config(tmp_path / "master")
    master = MessageStore(master_config, clock_ms=clock).open()
    replica = MessageStore(tiny_config(tmp_path / "slave"), clock_ms=clock, replica=True).open()
    try:
        fill(master, 120 if chunk == 1 else 300)
        copy(master, replica, chunk)
        end = master.commit_log.max_offset
        assert replica.commit_log.max_offset == end and end > 3 * master_config.mapped_file_size_commit_log
        size = master_config.mapped_file_size_commit_log
        assert trimmed(segments(tmp_path / "slave"), end, size) == trimmed(
            segments(tmp_path / "master"), end, size
        )
        for topic, queue in ((ORDERS, 0), (ORDERS, 1), (ORDERS, 2), (AUDIT, 1)):
            mine = [(m.msg_id, m.queue_offset, m.body) for m in read_queue(replica, topic, queue)]
            theirs = [(m.msg_id, m.queue_offset, m.body) for m in read_queue(master, topic, queue)]
            assert mine == theirs and mine
            assert replica.get_max_offset_in_queue(topic, queue) == master.get_max_offset_in_queue(
                topic, queue
            )
        found = replica.query_message(ORDERS, "k5", 10, 0, clock.ms + 1)  # the slave's own index
        assert len(found) == 1 and set(found[0].body) == {5}
    finally:
        master.close()
        replica.close()


def test_a_slave_restarted_resumes_from_its_own_offset(tmp_path: Path, clock: Clock) -> None:
    master = MessageStore(tiny_config(tmp_path / "master"), clock_ms=clock).open()
    slave_config = tiny_config(tmp_path / "slave")
    replica = MessageStore(slave_config, clock_ms=clock, replica=True).open()
    try:
        fill(master, 100)
        offset = master.commit_log.min_offset
        # Half a chunk's worth, cut mid-record, then the slave stops.
        data = master.replica_chunk(offset, 5_000)
        assert data
        replica.append_replica(offset, data)
        replica.close()
        replica = reopen(slave_config, clock, replica=True)
        # Recovery cut the partial record: the slave asks from a record boundary.
        resumed = replica.commit_log.max_offset
        assert 0 < resumed <= 5_000
        copy(master, replica, 4096)
        assert [m.body for m in read_queue(replica, ORDERS, 1)] == [
            m.body for m in read_queue(master, ORDERS, 1)
        ]
    finally:
        master.close()
        replica.close()


def test_bytes_that_do_not_continue_the_log_are_refused(tmp_path: Path, clock: Clock) -> None:
    master = MessageStore(tiny_config(tmp_path / "master"), clock_ms=clock).open()
    replica = MessageStore(tiny_config(tmp_path / "slave"), clock_ms=clock, replica=True).open()
    try:
        fill(master, 20)
        data = master.replica_chunk(0, 10_000)
        assert data
        with pytest.raises(ReplicaMismatch, match="not a segment start"):
            replica.append_replica(100, data)
        replica.append_replica(0, data[:1000])
        with pytest.raises(ReplicaMismatch, match="this log ends at 1000"):
            replica.append_replica(2000, data[2000:3000])
        garbage = bytearray(data[1000:9000])
        second = int.from_bytes(data[:4], "big")  # where the second record starts
        garbage[second - 1000 : second - 1000 + 8] = b"\xff" * 8  # its size and magic lost
        with pytest.raises(ReplicaMismatch, match="not a valid record"):
            replica.append_replica(1000, garbage)
    finally:
        master.close()
        replica.close()


def test_a_slave_refuses_sends_and_delivers_no_delayed_message(tmp_path: Path, clock: Clock) -> None:
    replica = MessageStore(tiny_config(tmp_path / "slave"), clock_ms=clock, replica=True).open()
    try:
        result = replica.put_message(message(ORDERS, 0, b"x"))
        assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "slave" in result.remark
        assert replica.deliver_due(clock.ms + 10**9) == (0, None)
    finally:
        replica.close()


def test_the_c_and_python_paths_build_the_same_queues_and_index(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of one queue read in C, and records decoded one by one in Python, give the same
    consume-queue files (a delayed message's due time and a half message's missing slot
    included) and the same index answers."""
    master = MessageStore(tiny_config(tmp_path / "master"), clock_ms=clock).open()
    try:
        fill(master, 150)
        master.put_message(message(ORDERS, 1, b"later", DELAY="2", KEYS="delayed"))
        half = message(ORDERS, 2, b"half", KEYS="half-key")
        half.sys_flag |= TRANSACTION_PREPARED_TYPE
        master.put_message(half)
        fill(master, 30, seed=9)
        queues = {}
        for name, scan in (("c", replica_module._c_scan_records), ("py", None)):
            monkeypatch.setattr(replica_module, "_c_scan_records", scan)
            replica = MessageStore(tiny_config(tmp_path / name), clock_ms=clock, replica=True).open()
            try:
                copy(master, replica, 5000)
                assert replica.wait_dispatched()
                assert [m.body for m in replica.query_message(ORDERS, "half-key", 5, 0, clock.ms + 1)] == [
                    b"half"
                ]
                assert len(replica.query_message(SCHEDULE_TOPIC, "delayed", 5, 0, clock.ms + 1)) == 1
                replica.close()
                queues[name] = {
                    str(p.relative_to(tmp_path / name)): p.read_bytes()
                    for p in sorted((tmp_path / name / "consumequeue").rglob("*"))
                    if p.is_file()
                }
            finally:
                replica.close()
        assert queues["c"] == queues["py"] and len(queues["c"]) >= 5
    finally:
        master.close()
