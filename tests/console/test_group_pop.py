"""The console's views of RocketMQ 5 consumption against a real broker: a group consuming by
pop (POP_MESSAGE / ACK_MESSAGE sent as the gRPC proxy sends them) shows its messages in
flight, acks, redeliveries, dead letters and attempts in the API, the group list and the
group page; a FIFO group is set, kept and marked; a RocketMQ 5 client the proxy registered
shows its language, SDK version and protocol beside a remoting client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from django.test import Client

from broker_core.client.admin import AdminClient
from broker_core.model.message import iter_records
from broker_core.model.receipt import ReceiptHandle
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.popheaders import (
    AckMessageRequestHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from console.audit.models import AuditEntry
from console.core.brokers import admin_call
from tests.servers import wait_for

from .conftest import Servers

pytestmark = pytest.mark.django_db

API = "/api/clusters/default/"
PAGES = "/clusters/default/groups/"
BROKER = "broker-a"


@dataclass
class Popped:
    body: bytes
    attempt: int
    handle: ReceiptHandle


def make(operator: Client, topic: str, group: str, **config: Any) -> None:
    """A one-queue ``topic`` and a subscription ``group`` (``config`` in the API's names)."""
    body = {"name": topic, "readQueueNums": 1, "writeQueueNums": 1}
    assert operator.post(API + "topics/", body, content_type="application/json").status_code == 201
    created = operator.post(API + "groups/", {"name": group, **config}, content_type="application/json")
    assert created.status_code == 201, created.content


def send(servers: Servers, operator: Client, topic: str, count: int) -> None:
    """``count`` messages m-0, m-1... to ``topic``, once its consume queue holds them all
    (pops without long polling only see what is there)."""
    for i in range(count):
        url = API + f"topics/{topic}/messages/"
        assert operator.post(url, {"body": f"m-{i}"}, content_type="application/json").status_code == 201

    def stored() -> bool:
        stats = admin_call(servers.namesrv_addr, lambda admin: admin.topic_stats(topic))
        return stats.total_messages == count

    wait_for(stored, 10, f"{count} message(s) in {topic}'s consume queue")


def pop(
    servers: Servers, group: str, topic: str, max_nums: int = 1, invisible_ms: int = 60_000
) -> list[Popped]:
    """One POP_MESSAGE of ``group`` on ``topic`` (every queue, no long polling)."""
    header = PopMessageRequestHeader(group, topic, max_msg_nums=max_nums, invisible_time=invisible_ms)
    response = admin_call(
        servers.namesrv_addr, lambda admin: admin.requests.pop_message(servers.broker_addr, header)
    )
    if response.code == ResponseCode.PULL_NOT_FOUND:
        return []
    assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
    answer = PopMessageResponseHeader.from_fields(response.ext_fields)
    return [
        Popped(
            m.body,
            m.reconsume_times + 1,
            ReceiptHandle(BROKER, m.queue_id, m.queue_offset, answer.pop_time, answer.invisible_time),
        )
        for m in iter_records(response.body)
    ]


def ack(servers: Servers, group: str, topic: str, got: Popped) -> None:
    h = got.handle
    header = AckMessageRequestHeader(group, topic, h.queue_id, h.encode(), h.offset)
    response = admin_call(
        servers.namesrv_addr, lambda admin: admin.requests.ack_message(servers.broker_addr, header)
    )
    assert response.code == ResponseCode.SUCCESS, response.remark


def group_row(client: Client, group: str) -> dict[str, Any]:
    (row,) = [g for g in client.get(API + f"groups/?search={group}").json()["results"] if g["group"] == group]
    return row


def test_a_pop_groups_in_flight_acks_redeliveries_and_attempts_are_shown(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    operator, viewer = personas["operator"], personas["viewer"]
    topic, group = "PopShown", "pop-shown"
    make(operator, topic, group)
    send(on_servers, operator, topic, 3)
    [first] = pop(on_servers, group, topic, invisible_ms=1_500)
    rest = pop(on_servers, group, topic, max_nums=2)
    assert (first.body, first.attempt) == (b"m-0", 1)
    assert [(g.body, g.attempt) for g in rest] == [(b"m-1", 1), (b"m-2", 1)]
    # m-0 was not acked in time: it comes back on its second attempt.
    [again] = wait_for(lambda: pop(on_servers, group, topic), 20, "m-0 handed out again")
    assert (again.body, again.attempt) == (b"m-0", 2)
    ack(on_servers, group, topic, rest[0])

    shown = viewer.get(API + f"groups/{group}/pop/")
    assert shown.status_code == 200, shown.content
    figures = shown.json()
    assert figures["popping"] is True and figures["fifo"] is False
    assert (figures["inFlight"], figures["acked"], figures["redelivered"], figures["deadLettered"]) == (
        2,
        1,
        1,
        0,
    )
    assert figures["attempts"] == [{"attempt": 1, "messages": 1}, {"attempt": 2, "messages": 1}]
    assert figures["ackedTps"] > 0 and figures["brokers"] == [BROKER]
    (queue,) = figures["queues"]
    assert (queue["topic"], queue["brokerName"], queue["queueId"]) == (topic, BROKER, 0)
    assert (queue["baseOffset"], queue["cursorOffset"], queue["inFlight"]) == (0, 3, 2)

    row = group_row(viewer, group)
    assert row["pop"]["inFlight"] == 2 and row["pop"]["acked"] == 1 and row["fifo"] is False

    page = viewer.get(PAGES + f"{group}/").content.decode()
    assert "Pop consumption (RocketMQ 5)" in page
    assert '<dd id="pop-in-flight">2</dd>' in page and '<dd id="pop-redelivered">1</dd>' in page
    assert 'data-attempt="1"' in page and 'data-attempt="2"' in page and 'id="fifo-badge"' not in page
    assert f"{PAGES}{group}/pop/" in page  # the section refreshes itself from there
    section = viewer.get(PAGES + f"{group}/pop/")
    assert section.status_code == 200 and '<dd id="pop-acked">1</dd>' in section.content.decode()
    listed = viewer.get(PAGES + f"?search={group}").content.decode()
    assert 'class="badge pop"' in listed and '<td class="num" data-cell="inFlight">2</td>' in listed


def test_a_message_past_its_attempts_is_counted_as_dead_lettered(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    operator, viewer = personas["operator"], personas["viewer"]
    topic, group = "PopDoomed", "pop-doomed"
    make(operator, topic, group, retryMaxTimes=0)  # one delivery only
    send(on_servers, operator, topic, 1)
    assert [g.body for g in pop(on_servers, group, topic, invisible_ms=300)] == [b"m-0"]

    def doomed() -> bool:
        pop(on_servers, group, topic)  # a pop finds it back and sends it to the DLQ
        return viewer.get(API + f"groups/{group}/pop/").json()["deadLettered"] == 1

    wait_for(doomed, 20, "m-0 dead-lettered")
    figures = viewer.get(API + f"groups/{group}/pop/").json()
    assert (figures["inFlight"], figures["acked"], figures["attempts"]) == (0, 0, [])
    page = viewer.get(PAGES + f"{group}/").content.decode()
    assert '<dd id="pop-dead-lettered">1 · <a href="/clusters/default/groups/pop-doomed/dlq/">' in page
    assert "Nothing in flight" in page


def test_a_fifo_group_is_set_kept_and_marked(on_servers: Servers, personas: dict[str, Client]) -> None:
    operator, viewer = personas["operator"], personas["viewer"]
    group = "fifo-orders"
    created = operator.post(
        API + "groups/", {"name": group, "consumeMessageOrderly": True}, content_type="application/json"
    )
    assert created.status_code == 201 and created.json()["config"]["consumeMessageOrderly"] is True
    assert AuditEntry.objects.get(action="group.create", target=group).after["consumeMessageOrderly"] is True
    # An update that does not name it keeps it; one that does changes it.
    kept = operator.put(API + f"groups/{group}/", {"retryMaxTimes": 3}, content_type="application/json")
    assert kept.status_code == 200 and kept.json()["config"]["consumeMessageOrderly"] is True
    assert viewer.get(API + f"groups/{group}/").json()["configs"][BROKER]["consumeMessageOrderly"] is True
    assert group_row(viewer, group)["fifo"] is True and group_row(viewer, group)["pop"] is None
    # No pop yet: zeros, and FIFO from the stored config.
    idle = viewer.get(API + f"groups/{group}/pop/").json()
    assert (idle["popping"], idle["fifo"], idle["inFlight"], idle["queues"]) == (False, True, 0, [])

    page = viewer.get(PAGES + f"{group}/").content.decode()
    assert 'id="fifo-badge"' in page and "Pop consumption" not in page
    assert (
        '<input type="checkbox" name="consumeMessageOrderly" checked>'
        in operator.get(PAGES + f"{group}/").content.decode()
    )
    assert 'class="badge info"' in viewer.get(PAGES + f"?search={group}").content.decode()

    # The page's config form: unticked is no longer FIFO, ticked again is.
    form = {"consumeEnable": "on", "consumeBroadcastEnable": "on", "retryMaxTimes": "3"}
    assert operator.post(PAGES + f"{group}/config/", form).status_code == 302
    assert group_row(viewer, group)["fifo"] is False
    assert (
        operator.post(PAGES + f"{group}/config/", {**form, "consumeMessageOrderly": "on"}).status_code == 302
    )
    assert group_row(viewer, group)["fifo"] is True
    # The list page's create form.
    made = operator.post(
        "/clusters/default/groups-new/", {"name": "fifo-made", "consumeMessageOrderly": "on"}
    )
    assert made.status_code == 302 and group_row(viewer, "fifo-made")["fifo"] is True

    assert viewer.get(API + "groups/no-such-pop-group/pop/").status_code == 404


async def _heartbeats(broker_addr: str, group: str) -> RemotingClient:
    """Register a RocketMQ 5 client as the gRPC proxy does (its protocol, SDK version and
    address in the heartbeat's extra keys, its language in the frame) and a remoting client,
    on a connection that stays open until the returned client is closed."""
    client = RemotingClient()
    consumer = {
        "groupName": group,
        "consumeType": "CONSUME_POP",
        "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        "subscriptionDataSet": [{"topic": "PopClients", "subString": "*", "subVersion": 0}],
    }
    v5 = {
        "clientID": "v5-host@123@0@abc",
        "producerDataSet": [],
        "consumerDataSet": [consumer],
        "clientProtocol": "gRPC v2",
        "clientVersion": "5.1.2",
        "clientAddr": "10.1.2.3:50123",
    }
    remoting = {"clientID": "10.0.0.9@remoting", "producerDataSet": [], "consumerDataSet": [consumer]}
    for body, language in ((v5, "PYTHON"), (remoting, "JAVA")):
        request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))
        request.language = language
        response = await client.invoke(broker_addr, request, 5.0)
        assert response.code == ResponseCode.SUCCESS, response.remark
    return client


def test_a_v5_client_shows_its_language_sdk_version_and_protocol(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    viewer = personas["viewer"]
    group = "pop-clients"
    make(personas["operator"], "PopClients", group)

    async def register(admin: AdminClient) -> RemotingClient:
        return await _heartbeats(on_servers.broker_addr, group)

    beating = admin_call(on_servers.namesrv_addr, register)
    try:
        detail = viewer.get(API + f"groups/{group}/").json()
        by_id = {c["clientId"]: c for c in detail["connection"]["connectionSet"]}
        v5 = by_id["v5-host@123@0@abc"]
        assert (v5["language"], v5["protocol"], v5["versionDesc"], v5["clientAddr"]) == (
            "PYTHON",
            "gRPC v2",
            "5.1.2",
            "10.1.2.3:50123",
        )
        old = by_id["10.0.0.9@remoting"]
        assert (old["language"], old["protocol"], old["versionDesc"]) == ("JAVA", "remoting", "")
        page = viewer.get(PAGES + f"{group}/").content.decode()
        rows = page.split('<table class="grid" id="clients">', 1)[1].split("</table>", 1)[0]
        v5_row, old_row = (
            rows.split(cid, 1)[1].split("</tr>", 1)[0] for cid in (v5["clientId"], old["clientId"])
        )
        assert "PYTHON" in v5_row and "5.1.2" in v5_row and "gRPC (v5)" in v5_row
        assert "JAVA" in old_row and "remoting" in old_row and "gRPC" not in old_row
    finally:

        async def close(admin: AdminClient) -> None:
            await beating.close()

        admin_call(on_servers.namesrv_addr, close)
