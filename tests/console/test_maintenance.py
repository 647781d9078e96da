"""The maintenance jobs' records, history files and console views, against a real Redis.

The Celery tests (tests/celery) run the jobs for real; these check what is built on their
records: overdue and failing flags, the history layout and retention, the chain's timing
rule, and the page and API with their permissions and errors.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from django.contrib.auth import get_user_model
from django.test import Client

from broker_core.client.adminmodels import OffsetSnapshot
from console.maintenance import history
from console.maintenance.jobs import JobSpec
from console.maintenance.runs import (
    FAILED,
    OK,
    SKIPPED,
    UNREACHABLE,
    RunRecord,
    job_statuses,
    last_runs,
    note_fanout,
    now_ms,
    recent_runs,
    record,
)
from console.maintenance.services import next_pass_in_ms

SPEC = JobSpec("offset_persistence", "Offsets", 5.0, 60)
SPECS = {SPEC.name: SPEC}


@pytest.fixture
def client_redis(console_redis: redis.Redis) -> redis.Redis:
    console_redis.flushdb()
    return console_redis


def run(addr: str, started: int, status: str = OK, job: str = SPEC.name, **details: Any) -> RunRecord:
    return RunRecord(job, addr, started, 3.0, status, status, "broker-a", "default", details)


def test_a_job_never_scheduled_or_no_longer_scheduled_is_overdue(client_redis: redis.Redis) -> None:
    (status,) = job_statuses(client_redis, SPECS)
    assert status.overdue and "never scheduled" in status.overdue_reason
    at = now_ms()
    note_fanout(client_redis, SPEC.name, [])
    (status,) = job_statuses(client_redis, SPECS, at_ms=at + 1000)
    assert not status.overdue
    late = at + int(SPEC.overdue_after_seconds * 1000) + 1000
    (status,) = job_statuses(client_redis, SPECS, at_ms=late)
    assert status.overdue and "beat" in status.overdue_reason


def test_a_broker_without_a_recent_run_makes_the_job_overdue_and_a_failed_one_failing(
    client_redis: redis.Redis,
) -> None:
    at = now_ms()
    note_fanout(client_redis, SPEC.name, ["10.0.0.1:10911", "10.0.0.2:10911"])
    record(client_redis, run("10.0.0.1:10911", at))
    (status,) = job_statuses(client_redis, SPECS, at_ms=at + 100)
    assert status.overdue and status.overdue_reason == "no run yet on 10.0.0.2:10911"
    record(client_redis, run("10.0.0.2:10911", at, UNREACHABLE))
    (status,) = job_statuses(client_redis, SPECS, at_ms=at + 100)
    assert not status.overdue and status.failing == ["10.0.0.2:10911"]
    later = at + int(SPEC.overdue_after_seconds * 1000) + 500
    note_fanout(client_redis, SPEC.name, ["10.0.0.1:10911", "10.0.0.2:10911"], at_ms=later - 1000)
    (status,) = job_statuses(client_redis, SPECS, at_ms=later)
    assert status.overdue and status.overdue_reason.startswith("no run on 10.0.0.1:10911")


def test_skipped_runs_are_listed_but_do_not_replace_the_last_run(client_redis: redis.Redis) -> None:
    at = now_ms()
    record(client_redis, run("10.0.0.1:10911", at))
    record(client_redis, run("10.0.0.1:10911", at + 50, SKIPPED))
    (last,) = last_runs(client_redis)
    assert last.started_ms == at and last.status == OK
    assert [r.status for r in recent_runs(client_redis)] == [SKIPPED, OK]
    record(client_redis, run("10.0.0.1:10911", at + 60, FAILED), keep=False)
    assert [r.status for r in recent_runs(client_redis)] == [SKIPPED, OK]
    assert last_runs(client_redis)[0].status == FAILED


def test_the_delay_chain_sleeps_until_the_next_due_message_in_the_brokers_clock() -> None:
    busy = run("b", 0, job="delay_scan", nextDueMs=10_040, brokerStartedMs=10_000, brokerDurationMs=5.0)
    assert next_pass_in_ms(busy, 100) == pytest.approx(35.0)
    assert next_pass_in_ms(run("b", 0, job="delay_scan", nextDueMs=99_999, brokerStartedMs=0), 100) == 100
    assert next_pass_in_ms(run("b", 0, job="delay_scan", nextDueMs=5, brokerStartedMs=10), 100) == 0
    assert next_pass_in_ms(run("b", 0, job="delay_scan"), 100) == 100  # nothing pending
    assert next_pass_in_ms(run("b", 0, FAILED, job="delay_scan", nextDueMs=1), 100) == 100


def snapshot(ts: int) -> OffsetSnapshot:
    return OffsetSnapshot.from_json(
        {
            "brokerName": "broker-a",
            "timestampMs": ts,
            "bootTimestamp": 1,
            "queues": [
                {
                    "group": "g",
                    "topic": "t",
                    "queueId": 0,
                    "consumerOffset": 3,
                    "brokerOffset": 10,
                    "minOffset": 0,
                    "storeTimestamp": ts - 2000,
                },
            ],
            "topicPuts": {"t": 10},
            "groupGets": [{"group": "g", "topic": "t", "total": 3}],
        }
    )


def test_history_is_appended_per_day_and_broker_and_pruned_by_age(tmp_path: Path) -> None:
    day1 = int(dt.datetime(2026, 11, 20, 23, 59, tzinfo=dt.UTC).timestamp() * 1000)
    day2 = day1 + 120_000
    assert history.append_snapshot(tmp_path, snapshot(day1), "main", "10.0.0.1:10911") == (1, 2)
    history.append_snapshot(tmp_path, snapshot(day2), "main", "10.0.0.1:10911")
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.jsonl"))
    assert files == [
        "counters/date=2026-11-20/broker-a_10.0.0.1_10911.jsonl",
        "counters/date=2026-11-21/broker-a_10.0.0.1_10911.jsonl",
        "offsets/date=2026-11-20/broker-a_10.0.0.1_10911.jsonl",
        "offsets/date=2026-11-21/broker-a_10.0.0.1_10911.jsonl",
    ]
    (row,) = [orjson.loads(x) for x in (tmp_path / files[2]).read_bytes().splitlines()]
    assert row == {
        "ts": day1,
        "cluster": "main",
        "broker": "broker-a",
        "broker_addr": "10.0.0.1:10911",
        "group": "g",
        "topic": "t",
        "queue_id": 0,
        "consumer_offset": 3,
        "broker_offset": 10,
        "min_offset": 0,
        "store_timestamp": day1 - 2000,
    }
    kinds = sorted(orjson.loads(x)["kind"] for x in (tmp_path / files[0]).read_bytes().splitlines())
    assert kinds == ["get", "put"]
    (tmp_path / "offsets" / "date=not-a-date").mkdir()
    removed = history.prune(tmp_path, keep_days=2, today=dt.date(2026, 11, 22))
    assert removed == ["offsets/date=2026-11-20", "counters/date=2026-11-20"]
    assert (tmp_path / "offsets" / "date=2026-11-21").is_dir() and (
        tmp_path / "offsets" / "date=not-a-date"
    ).is_dir()


@pytest.fixture
def users(db: None) -> dict[str, Client]:
    make = get_user_model().objects.create_user
    clients = {"anonymous": Client()}
    for name, staff in (("admin", True), ("viewer", False)):
        clients[name] = Client()
        clients[name].force_login(make(name, password=f"pw-{name}-123", is_staff=staff))
    return clients


def test_the_api_and_page_show_jobs_and_runs_to_signed_in_users(
    client_redis: redis.Redis, users: dict[str, Client]
) -> None:
    at = now_ms()
    note_fanout(client_redis, "offset_persistence", ["10.0.0.1:10911"])
    record(
        client_redis,
        RunRecord(
            "offset_persistence",
            "10.0.0.1:10911",
            at,
            4.5,
            UNREACHABLE,
            "broker did not answer: refused",
            "broker-a",
            "default",
        ),
    )
    assert users["anonymous"].get("/api/maintenance/jobs/").status_code == 403
    assert users["anonymous"].get("/maintenance/").status_code == 302
    body = users["viewer"].get("/api/maintenance/jobs/").json()
    jobs = {job["job"]: job for job in body["jobs"]}
    assert set(jobs) == {"delay_scan", "offset_persistence", "file_expiry", "history_retention"}
    offsets = jobs["offset_persistence"]
    assert offsets["failing"] == ["10.0.0.1:10911"] and not offsets["overdue"]
    assert offsets["brokers"][0]["result"] == "broker did not answer: refused"
    assert jobs["delay_scan"]["overdue"] and "never scheduled" in jobs["delay_scan"]["overdueReason"]
    assert body["recent"][0]["status"] == UNREACHABLE
    page = users["viewer"].get("/maintenance/")
    assert page.status_code == 200
    assert b"broker did not answer: refused" in page.content and b"overdue" in page.content
    assert users["viewer"].get("/api/maintenance/jobs/?recent=x").status_code == 400


def test_running_a_job_now_is_for_admins_and_queues_it(
    client_redis: redis.Redis, users: dict[str, Client]
) -> None:
    assert users["viewer"].post("/api/maintenance/jobs/file_expiry/run/").status_code == 403
    response = users["admin"].post("/api/maintenance/jobs/file_expiry/run/")
    assert response.status_code == 202 and response.json()["job"] == "file_expiry"
    # The task is on the maintenance queue in Redis, for a worker to take.
    assert client_redis.llen("maintenance") == 1
    missing = users["admin"].post("/api/maintenance/jobs/nope/run/")
    assert missing.status_code == 404 and "file_expiry" in missing.json()["detail"]


def test_a_redis_that_does_not_answer_is_a_503_not_an_empty_list(
    users: dict[str, Client], settings: Any
) -> None:
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = users["viewer"].get("/api/maintenance/jobs/")
    assert response.status_code == 503 and response.json()["error"] == "redis_unavailable"
    page = users["viewer"].get("/maintenance/")
    assert page.status_code == 503 and b"did not answer" in page.content
