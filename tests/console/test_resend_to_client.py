"""The console's "resend to client" with our own push consumer on the other end.

The console asks the broker to have one online consumer consume a message now
(CONSUME_MESSAGE_DIRECTLY); our consumer runs its listener on it and answers RocketMQ's
ConsumeMessageDirectlyResult, which the console shows, over REST and on the message page.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from django.test import Client

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.model.message import MessageExt
from console.audit.models import AuditEntry
from tests.servers import wait_for

from .conftest import Servers

pytestmark = pytest.mark.django_db

TOPIC = "ResendTopic"
GROUP = "resend-group"
API = "/api/clusters/default/"


class Listener:
    """Takes every message but ``later``; records the bodies it was given."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.bodies.extend(m.body for m in msgs)
        return ConsumeStatus.RECONSUME_LATER if msgs[0].body == b"later" else ConsumeStatus.CONSUME_SUCCESS

    def count(self, body: bytes) -> int:
        with self.lock:
            return self.bodies.count(body)


@pytest.fixture
def consumer(on_servers: Servers, personas: dict[str, Client]) -> Iterator[tuple[PushConsumer, Listener]]:
    """Our push consumer of TOPIC, online in GROUP."""
    personas["operator"].post(
        API + "topics/",
        {"name": TOPIC, "readQueueNums": 1, "writeQueueNums": 1},
        content_type="application/json",
    )
    listener = Listener()
    config = ClientConfig(namesrv_addr=on_servers.namesrv_addr, instance_name="resend")
    push = PushConsumer(GROUP, config=config, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    push.subscribe(TOPIC).register_listener(listener).start()
    try:
        yield push, listener
    finally:
        push.shutdown()


def send(personas: dict[str, Client], body: str) -> str:
    """Send ``body`` to TOPIC through the console; its offset msgId."""
    sent = personas["operator"].post(
        API + f"topics/{TOPIC}/messages/", {"body": body}, content_type="application/json"
    )
    return str(sent.json()["offsetMsgId"])


def test_an_operator_has_our_consumer_consume_a_message_again(
    consumer: tuple[PushConsumer, Listener], personas: dict[str, Client]
) -> None:
    push, listener = consumer
    client_id = push.config.client_id
    ok, later = send(personas, "ok"), send(personas, "later")
    wait_for(lambda: listener.count(b"ok") and listener.count(b"later"), 20, "the messages consumed")

    answer = personas["operator"].post(
        API + f"messages/{ok}/resend/",
        {"group": GROUP, "clientId": client_id},
        content_type="application/json",
    )
    assert answer.status_code == 200, answer.content
    result = answer.json()["result"]
    assert (
        result["consumeResult"] == "CR_SUCCESS" and result["order"] is False and result["autoCommit"] is True
    )
    assert listener.count(b"ok") == 2
    refused = personas["operator"].post(
        API + f"messages/{later}/resend/",
        {"group": GROUP, "clientId": client_id},
        content_type="application/json",
    )
    assert refused.json()["result"]["consumeResult"] == "CR_LATER"

    page = personas["operator"].post(
        f"/clusters/default/messages/{ok}/resend/", {"group": GROUP, "clientId": client_id}, follow=True
    )
    assert f"{client_id} consumed it".encode() in page.content and b"CR_SUCCESS" in page.content
    assert listener.count(b"ok") == 3
    assert AuditEntry.objects.filter(action="message.resend", result="ok").count() == 3
