"""File expiry speaks (issue 14 item 4): a run that deletes messages is logged by the broker
at WARNING, listed on the maintenance page and API with what went, and raises an alert for
each group that had not consumed them, against a real nameserver and broker.

The broker runs with 64 KiB segments, ``fileReservedTime = 0`` and every hour a
``deleteWhen`` hour, so every sealed segment is expired; ``standaloneMaintenance = false``
keeps its own timer out of the way (the test runs the job as the platform does).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.broker.maintenance import FILE_EXPIRY
from broker_core.client.admin import AdminClient
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from console.alerts import services as alerts
from console.alerts.models import Alert
from console.core.brokers import admin_call
from console.maintenance import services as maintenance
from tests.servers import wait_for

from .conftest import run_servers

TOPIC = "ExpiringTopic"
BEHIND, CAUGHT_UP = "expiry-behind", "expiry-caught-up"
ALL_HOURS = ";".join(f"{h:02d}" for h in range(24))


def _queued(namesrv_addr: str) -> int:
    stats = admin_call(namesrv_addr, lambda admin: admin.topic_stats(TOPIC))
    return sum(q.max_offset for q in stats.queues)


async def _groups_at_start_and_end(admin: AdminClient) -> tuple[dict[Any, int], dict[Any, int]]:
    for group in (BEHIND, CAUGHT_UP):
        await admin.create_or_update_subscription_group(
            SubscriptionGroupConfig(group), cluster="ConsoleCluster"
        )
    start = await admin.reset_offset_by_time(BEHIND, TOPIC, 0)
    end = await admin.reset_offset_by_time(CAUGHT_UP, TOPIC, -1)
    return start, end


@pytest.mark.django_db
def test_expiry_that_deletes_unconsumed_messages_is_logged_listed_and_alerted(
    tmp_path: Path, console_redis: Any, settings: Any, personas: dict[str, Client]
) -> None:
    console_redis.flushdb()  # no other test's runs, brokers or checked expiry runs
    settings.QUIVER = {**settings.QUIVER, "ALERT_WEBHOOK_URL": ""}
    conf = {
        "mappedFileSizeCommitLog": 64 * 1024,
        "fileReservedTime": 0,
        "deleteWhen": ALL_HOURS,
        "standaloneMaintenance": "false",
    }
    with run_servers(tmp_path, **conf) as servers:
        settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": servers.namesrv_addr}
        producer = Producer("expiry-producer", servers.namesrv_addr, compress_over=1 << 30).start()
        try:
            for i in range(48):  # 4 KiB each: about 3 segments
                producer.send(Message(TOPIC, os.urandom(4096), keys=f"k{i}"))
        finally:
            producer.shutdown()
        wait_for(lambda: _queued(servers.namesrv_addr) == 48, 30, "the messages in their queues")
        start, end = admin_call(servers.namesrv_addr, _groups_at_start_and_end)
        assert set(start.values()) == {0} and sum(end.values()) == 48

        (target,) = maintenance.discover(FILE_EXPIRY, masters_only=False)
        run = maintenance.run_on_broker(FILE_EXPIRY, target)
        assert run.status == "ok" and run.details["commit_log_files_deleted"] >= 2, run
        deleted = run.details["messages_deleted"][TOPIC]
        assert 0 < deleted < 48
        # The report: segments, offsets, messages per topic, and who had not consumed them.
        assert run.details["segments_deleted"][0] == f"{0:020d}"
        assert run.details["deleted_to_offset"] == len(run.details["segments_deleted"]) * 64 * 1024
        assert run.details["unconsumed"] == [
            {"group": BEHIND, "topic": TOPIC, "messages": deleted, "queues": len(start)}
        ]
        assert f"{deleted} NOT YET CONSUMED by {BEHIND}" in run.result

        # The broker said it at WARNING (its log shows nothing below WARNING).
        log = (tmp_path / "broker.log").read_text()
        said = [line for line in log.splitlines() if "expiry (" in line]
        assert (
            len(said) == 1 and f"{TOPIC} {deleted}" in said[0] and f"{BEHIND} {deleted} of {TOPIC}" in said[0]
        )
        assert CAUGHT_UP not in said[0]

        # The console lists it, on the API and the page.
        body = personas["viewer"].get("/api/maintenance/jobs/").json()
        (row,) = body["deletions"]
        assert row["brokerAddr"] == servers.broker_addr and row["messagesByTopic"] == {TOPIC: deleted}
        assert row["unconsumed"] == [
            {"group": BEHIND, "topic": TOPIC, "messages": deleted, "queues": len(start)}
        ]
        assert row["segments"] == run.details["segments_deleted"] and "deleteWhen" in row["reason"]
        page = personas["viewer"].get("/maintenance/").content.decode()
        assert "Deleted by expiry" in page and f"{TOPIC}: {deleted}" in page
        assert f'<span class="badge bad">{BEHIND}</span> {deleted} of {TOPIC}' in page

        # One alert, for the group that had not consumed them; none for the one that had.
        announced: list[alerts.Event] = []
        summary = alerts.check_all(announced.append)
        assert summary.unknown == [] and summary.raised == 1
        ((kind, alert),) = [(e.kind, e.alert) for e in announced]
        assert kind == alerts.RAISED and alert.kind == Alert.EXPIRED and alert.group == BEHIND
        assert alert.value == deleted and f"{deleted} message(s) of {TOPIC}" in alert.message
        # Seen once: the next check raises nothing more, and the alert stays open while the
        # group's offsets point at deleted messages.
        assert alerts.check_all(announced.append).raised == 0 and len(announced) == 1
        assert Alert.objects.get(kind=Alert.EXPIRED).is_open
        listed = personas["viewer"].get("/api/clusters/default/alerts/?kind=expired").json()
        assert [a["group"] for a in listed["results"]] == [BEHIND]
        # Once the group is past the gap (its consumers moved on, here a reset), it resolves.
        admin_call(servers.namesrv_addr, lambda admin: admin.reset_offset_by_time(BEHIND, TOPIC, -1))
        again = alerts.check_all(announced.append)
        assert again.resolved == 1 and announced[-1].kind == alerts.RESOLVED
        assert not Alert.objects.get(kind=Alert.EXPIRED).is_open
