"""A long operation started over REST runs on the Celery worker with progress to follow:
the bulk DLQ resend, from dead letters made by a real failing consumer to their redelivery.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.errors import AdminError
from broker_core.model.message import MessageExt
from broker_core.remoting.codes import ResponseCode
from console.core.brokers import admin_call
from console.core.models import ClusterAccess

from .conftest import Platform, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

GROUP = "dlq-group"
TOPIC = "DlqTopic"


@pytest.fixture
def console_on_platform(platform: Platform, console_redis: Any, settings: Any) -> None:
    """This process's console settings and Celery app on the test platform."""
    settings.QUIVER = {**settings.QUIVER, "NAMESRV_ADDR": platform.namesrv_addr}


class FailFirst:
    """Fails each message the first time it sees it (to the DLQ: no retries allowed), then takes it."""

    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            for msg in msgs:
                self.seen[msg.body] = self.seen.get(msg.body, 0) + 1
            first = any(self.seen[m.body] == 1 for m in msgs)
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS

    def times(self, body: bytes) -> int:
        with self.lock:
            return self.seen.get(body, 0)


def test_a_bulk_dlq_resend_runs_as_a_task_with_progress_and_outcomes(
    platform: Platform, console_on_platform: None
) -> None:
    bodies = [f"dead-{i}".encode() for i in range(6)]
    listener = FailFirst()
    staff = get_user_model().objects.create_user("ops", password="pw-ops-123", is_staff=True)
    ClusterAccess.objects.create(user=staff, cluster="*", role="operator", can_export=True)
    client = Client()
    client.force_login(staff)
    with platform.broker("broker-dlq", autoCreateTopicEnable="true") as (_proc, _addr):
        producer = Producer("dlq-producer", platform.namesrv_addr).start()
        begin = int(time.time() * 1000) - 1000
        for body in bodies:
            producer.send(Message(TOPIC, body))
        consumer = (
            PushConsumer(
                GROUP,
                platform.namesrv_addr,
                consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                max_reconsume_times=0,
            )
            .subscribe(TOPIC)
            .register_listener(listener)
            .start()
        )
        try:
            wait_for(lambda: all(listener.times(b) == 1 for b in bodies), 30, "the first (failed) deliveries")

            def dead_letters() -> list[MessageExt]:
                try:
                    found = admin_call(
                        platform.namesrv_addr,
                        lambda a: a.messages_by_time(f"%DLQ%{GROUP}", begin, int(time.time() * 1000) + 1000),
                    )
                except AdminError as exc:  # the DLQ's route is not on the nameserver yet
                    if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                        raise
                    return []
                return found if len(found) == len(bodies) else []

            dead = wait_for(dead_letters, 30, "the dead letters")
            assert all(listener.times(b) == 1 for b in bodies), "nothing comes back from the DLQ by itself"
            page = client.get(f"/api/clusters/default/groups/{GROUP}/dlq/?begin={begin}").json()
            assert sorted(m["msgId"] for m in page["messages"]) == sorted(m.msg_id for m in dead)
            assert page["truncated"] is False
            export = client.get(f"/api/clusters/default/groups/{GROUP}/dlq/export/?format=csv&begin={begin}")
            assert export.status_code == 200, export.content
            lines = export.content.decode().splitlines()
            assert export["X-Quiver-Truncated"] == "false" and len(lines) == 1 + len(bodies)
            assert lines[0].startswith("msgId,uniqKey,originalTopic") and all(
                f",{TOPIC}," in x for x in lines[1:]
            )
            unknown = "7F00000100002A9F00000000DEADBEEF"
            ids = [m.msg_id for m in dead] + [unknown]
            response = client.post(
                "/api/dlq/resend/", {"group": GROUP, "msgIds": ids}, content_type="application/json"
            )
            assert response.status_code == 202, response.content
            follow = response.json()["url"]

            def finished() -> dict:
                body = client.get(follow).json()
                return body if body["state"] in ("SUCCESS", "FAILURE") else {}

            seen_states = set()
            task = wait_for(
                lambda: (seen_states.add(client.get(follow).json()["state"]), finished())[1], 60, "the task"
            )
            wait_for(lambda: all(listener.times(b) == 2 for b in bodies), 30, "the redeliveries")
        finally:
            consumer.shutdown()
            producer.shutdown()
    assert task["state"] == "SUCCESS", task
    assert task["done"] == task["total"] == len(ids) and task["percent"] == 100.0
    assert task["requestedBy"] == "ops" and task["kind"] == "dlq_resend"
    outcomes = {o["msgId"]: o for o in task["result"]}
    assert [outcomes[m.msg_id]["ok"] for m in dead] == [True] * len(dead)
    assert outcomes[unknown]["ok"] is False and outcomes[unknown]["detail"]
    assert task["note"] == f"{len(dead)} resent, 1 failed"
    # Re-published to the original topic (not to the retry topic: no consumer needed online).
    assert all(outcomes[m.msg_id]["detail"].startswith(f"{TOPIC}@") for m in dead)
    # Listed, and readable again once finished (from the database copy).
    listed = client.get("/api/tasks/?kind=dlq_resend").json()["tasks"]
    assert [t["id"] for t in listed] == [task["id"]]
    assert seen_states <= {"PENDING", "STARTED", "PROGRESS", "SUCCESS"}


def test_the_resend_endpoint_refuses_bad_input_and_non_staff(console_on_platform: None) -> None:
    client = Client()
    viewer = get_user_model().objects.create_user("viewer", password="pw-viewer-123")
    client.force_login(viewer)
    ok_body = {"group": GROUP, "msgIds": ["7F00000100002A9F0000000000000000"]}
    assert client.post("/api/dlq/resend/", ok_body, content_type="application/json").status_code == 403
    staff = get_user_model().objects.create_user("ops2", password="pw-ops-123", is_staff=True)
    client.force_login(staff)
    for bad in (
        {"group": GROUP, "msgIds": []},
        {"group": GROUP, "msgIds": ["xyz"]},
        {"msgIds": ["0" * 32]},
        {"group": "bad group!", "msgIds": ["0" * 32]},
    ):
        response = client.post("/api/dlq/resend/", bad, content_type="application/json")
        assert response.status_code == 400, (bad, response.content)
    response = client.post(
        "/api/dlq/resend/", {**ok_body, "cluster": "nope"}, content_type="application/json"
    )
    assert response.status_code == 404 and "nope" in response.json()["detail"]
    assert Client().get("/api/tasks/").status_code == 403  # anonymous
    assert client.get("/api/tasks/00000000-0000-0000-0000-000000000000/").status_code == 404
