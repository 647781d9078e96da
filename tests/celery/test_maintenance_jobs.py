"""The maintenance jobs driven by a real Celery worker and beat over a private Redis.

Each broker runs with its default ``standaloneMaintenance = auto``, as under ``manage.py
up``: its own timers stand by while the platform's passes keep coming, so once the platform
drives a broker, whatever the delay scan delivers is the work of the Celery jobs.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import orjson
import pytest

from broker_core.broker.maintenance import DELAY_SCAN, FILE_EXPIRY, OFFSET_PERSISTENCE
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from console.maintenance.jobs import JobSpec
from console.maintenance.runs import OK, SKIPPED, UNREACHABLE, job_statuses

from .conftest import Collector, Platform, _spawn, _stop, free_port, wait_for

pytestmark = pytest.mark.slow


def test_delayed_messages_reach_their_consumer_through_the_celery_scan_once_each(platform: Platform) -> None:
    # A second beat: every scheduled scan is sent twice, as when two beats run by mistake.
    second_beat = _spawn(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "console",
            "beat",
            "--schedule",
            str(platform.data_dir / "beat2"),
        ],
        platform.env,
        platform.data_dir / "beat2.log",
    )
    got = Collector()
    with platform.broker("broker-delay", autoCreateTopicEnable="true") as (_proc, addr):
        # The broker runs its own scan until the platform's first pass reaches it (auto).
        wait_for(lambda: platform.drives(addr), 60, "the platform driving the broker's delay scan")
        producer = Producer("delay-producer", platform.namesrv_addr).start()
        try:
            sent = []
            for i in range(20):
                result = producer.send(Message("DelayTopic", f"later-{i}".encode(), delay_level=1))
                sent.append(result)
            receiver = platform.consumer("delay-consumers", "DelayTopic", got)
            try:
                wait_for(lambda: len(got.bodies()) == 20, 60, "the delayed messages")
                # Let any duplicate that was coming arrive: two more scan periods of beat.
                first = wait_for(lambda: platform.last_run(DELAY_SCAN, addr), 10, "a delay-scan record")
                wait_for(
                    lambda: platform.last_run(DELAY_SCAN, addr).started_ms > first.started_ms + 2000,
                    30,
                    "later delay scans",
                )
            finally:
                receiver.shutdown()
        finally:
            producer.shutdown()
            _stop(second_beat)
    assert set(got.bodies()) == {f"later-{i}".encode() for i in range(20)}
    assert max(got.bodies().values()) == 1, "a delayed message was delivered twice"
    for msg in got.got:
        # Delivered by a scan, not at once: stored again when due, a delay level (1 s) later.
        assert msg.properties.get("REAL_TOPIC") == "DelayTopic"  # it went through the schedule topic
        assert msg.store_timestamp - msg.born_timestamp >= 1000
    delivered = sum(
        r.details.get("delivered", 0) for r in platform.runs_of(DELAY_SCAN, addr) if r.status == OK
    )
    assert delivered == 20, "the Celery-driven scans delivered them all"


def test_offset_persistence_writes_the_offsets_file_and_the_history(platform: Platform) -> None:
    got = Collector()
    with platform.broker("broker-offsets", autoCreateTopicEnable="true") as (_proc, addr):
        producer = Producer("offset-producer", platform.namesrv_addr).start()
        try:
            for i in range(12):
                producer.send(Message("OffsetTopic", f"m-{i}".encode(), tags="T"))
        finally:
            producer.shutdown()
        receiver = platform.consumer("offset-consumers", "OffsetTopic", got)
        wait_for(lambda: len(got.bodies()) == 12, 30, "the messages")
        receiver.shutdown()  # commits its offsets to the broker
        committed_at = platform.last_run(OFFSET_PERSISTENCE, addr)

        def persisted_after_commit() -> bool:
            run = platform.last_run(OFFSET_PERSISTENCE, addr)
            return (
                run is not None
                and run.status == OK
                and (committed_at is None or run.started_ms > committed_at.started_ms)
            )

        wait_for(persisted_after_commit, 30, "an offset-persistence run after the commit")
        offsets_file = platform.data_dir / "brokers" / "broker-offsets" / "config" / "consumerOffset.json"
        table = json.loads(offsets_file.read_text())["offsetTable"]
        assert sum(table["OffsetTopic@offset-consumers"].values()) == 12

        def history_rows(kind: str) -> list[dict]:
            rows = []
            for path in (platform.data_dir / "history" / kind).glob("date=*/*.jsonl"):
                rows += [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
            return rows

        def latest_group_rows() -> list[dict]:
            rows = [r for r in history_rows("offsets") if r["group"] == "offset-consumers"]
            if not rows:
                return []
            latest = max(r["ts"] for r in rows)
            mine = [r for r in rows if r["ts"] == latest]
            return mine if sum(r["consumer_offset"] for r in mine) == 12 else []

        rows = wait_for(latest_group_rows, 30, "history rows with the committed offsets")
    assert {r["topic"] for r in rows} == {"OffsetTopic"}
    assert {r["broker"] for r in rows} == {"broker-offsets"} and {r["broker_addr"] for r in rows} == {addr}
    assert sum(r["broker_offset"] for r in rows) == 12
    assert all(r["store_timestamp"] == 0 for r in rows), "caught up: no message waits at the offset"
    assert len({r["queue_id"] for r in rows}) == len(rows)
    counters = history_rows("counters")
    puts = [
        c for c in counters if c["kind"] == "put" and c["topic"] == "OffsetTopic" and c["broker_addr"] == addr
    ]
    gets = [c for c in counters if c["kind"] == "get" and c["group"] == "offset-consumers"]
    assert max(c["total"] for c in puts) == 12
    assert max(c["total"] for c in gets) == 12
    assert all(path.parent.name.startswith("date=") for path in (platform.data_dir / "history").glob("*/*/*"))


def test_file_expiry_deletes_segments_older_than_the_configured_age(platform: Platform) -> None:
    store = platform.data_dir / "brokers" / "broker-expiry"
    # Ages through configuration: fileReservedTime = 0 h makes every sealed segment old
    # enough, and every hour is a deleteWhen hour.
    settings = {
        "autoCreateTopicEnable": "true",
        "fileReservedTime": 0,
        "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
    }
    with platform.broker("broker-expiry", **settings) as (_proc, addr):
        producer = Producer("expiry-producer", platform.namesrv_addr, compress_over=1 << 30).start()
        try:
            for i in range(40):
                producer.send(Message("ExpiryTopic", os.urandom(16 * 1024), keys=f"k{i}"))
        finally:
            producer.shutdown()
        run = wait_for(
            lambda: next(
                (r for r in platform.runs_of(FILE_EXPIRY, addr) if r.details.get("commit_log_files_deleted")),
                None,
            ),
            30,
            "an expiry run that deleted files",
        )
        segments = sorted(p.name for p in (store / "commitlog").iterdir())
    assert run.status == OK and "deleteWhen hour" in run.result
    assert segments and int(segments[0]) > 0, "the oldest segments are gone"
    # The record says what went (issue 14): the segments by name and the messages per topic;
    # no group had consumed the topic, so no group lost unconsumed messages.
    gone = run.details["segments_deleted"]
    assert gone and all(len(name) == 20 and int(name) < int(segments[0]) for name in gone)
    assert 0 < run.details["messages_deleted"]["ExpiryTopic"] < 40 and run.details["unconsumed"] == []
    assert len(segments) >= 1  # the segment being written stays


def test_a_held_lock_makes_overlapping_runs_skip(platform: Platform) -> None:
    with platform.broker("broker-lock") as (_proc, addr):
        wait_for(
            lambda: (r := platform.last_run(OFFSET_PERSISTENCE, addr)) and r.status == OK, 30, "a first run"
        )
        lock = platform.redis.lock(f"quiver:lock:{OFFSET_PERSISTENCE}:{addr}", timeout=60)
        assert lock.acquire(blocking=False)
        held_since = platform.last_run(OFFSET_PERSISTENCE, addr)
        try:
            skipped = wait_for(
                lambda: next(
                    (
                        r
                        for r in platform.runs_of(OFFSET_PERSISTENCE, addr)
                        if r.status == SKIPPED and r.started_ms > held_since.started_ms
                    ),
                    None,
                ),
                30,
                "a run that found the lock taken",
            )
            # While the lock is held nothing runs there: the last real run stays the same.
            assert platform.last_run(OFFSET_PERSISTENCE, addr).started_ms <= skipped.started_ms
        finally:
            lock.release()
        wait_for(
            lambda: platform.last_run(OFFSET_PERSISTENCE, addr).started_ms > skipped.started_ms,
            30,
            "a run after release",
        )


def test_a_broker_that_is_down_is_reported_and_retried(platform: Platform) -> None:
    port = free_port()
    with platform.broker("broker-down", port) as (proc, addr):
        wait_for(
            lambda: (r := platform.last_run(OFFSET_PERSISTENCE, addr)) and r.status == OK, 30, "a first run"
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    # The nameserver lists it for a while yet: each period tries it and reports it.
    down = wait_for(
        lambda: (r := platform.last_run(OFFSET_PERSISTENCE, addr)) and r.status == UNREACHABLE and r,
        30,
        "a report",
    )
    assert addr in down.result and "did not answer" in down.result
    spec = JobSpec(OFFSET_PERSISTENCE, "offsets", 1.0, 60)
    (status,) = job_statuses(platform.redis, {OFFSET_PERSISTENCE: spec})
    assert addr in status.failing
    # Other brokers' jobs went on meanwhile; once it is back, the next period succeeds.
    with platform.broker("broker-down", port) as (_proc, again):
        assert again == addr
        back = wait_for(
            lambda: (
                (r := platform.last_run(OFFSET_PERSISTENCE, addr))
                and r.status == OK
                and r.started_ms > down.started_ms
                and r
            ),
            30,
            "a successful retry",
        )
    assert back.details["offsetRows"] >= 0
