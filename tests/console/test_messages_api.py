"""Messages over REST against a real broker: browse by time with a cursor (progress and an
explicit truncated marker), by key, by id; body views; consumption by group."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.test import Client

from tests.servers import wait_for

from .conftest import Servers, run_servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """This module's broker also keeps RocketMQ's trace topic (traceTopicEnable)."""
    with run_servers(tmp_path_factory.mktemp("message-servers"), traceTopicEnable="true") as found:
        yield found


pytestmark = pytest.mark.django_db

TOPIC = "MsgTopic"
API = "/api/clusters/default/"


@pytest.fixture
def stored(on_servers: Servers, personas: dict[str, Client]) -> dict[str, object]:
    """25 messages in MsgTopic (4 queues): 23 text, one JSON, one binary-looking."""
    op = personas["operator"]
    if op.get(API + f"topics/{TOPIC}/").status_code == 404:
        body = {"name": TOPIC, "readQueueNums": 4, "writeQueueNums": 4}
        op.post(API + "topics/", body, content_type="application/json")

    def stored_count() -> int:
        return personas["viewer"].get(API + f"topics/{TOPIC}/").json()["totalMessages"]

    already = stored_count()
    begin = int(time.time() * 1000) - 1
    sent = []
    for i in range(23):
        body = {"body": f"text {i}", "keys": f"order-{i % 5}", "tags": "T"}
        sent.append(op.post(API + f"topics/{TOPIC}/messages/", body, content_type="application/json").json())
    sent.append(
        op.post(
            API + f"topics/{TOPIC}/messages/", {"body": '{"a": 1, "b": [2]}'}, content_type="application/json"
        ).json()
    )
    sent.append(
        op.post(
            API + f"topics/{TOPIC}/messages/",
            {"body": "AAFiaW4=", "bodyEncoding": "base64"},
            content_type="application/json",
        ).json()
    )
    # The consume queues are written just after each send is acknowledged: wait for all 25.
    wait_for(lambda: stored_count() >= already + 25, 10, "the messages in their queues")
    return {"begin": begin, "end": int(time.time() * 1000) + 1, "sent": sent}


def test_browsing_by_time_pages_with_a_cursor_and_never_stops_silently(
    stored: dict[str, object], personas: dict[str, Client]
) -> None:
    url = API + f"topics/{TOPIC}/browse/?begin={stored['begin']}&end={stored['end']}&limit=10"
    seen, pages, page = [], 0, personas["viewer"].get(url).json()
    while True:
        pages += 1
        seen += [m["msgId"] for m in page["messages"]]
        assert page["total"] >= 25 and 0 <= page["progress"] <= 1
        if not page["truncated"]:
            assert page["cursor"] is None and page["progress"] == 1.0
            break
        assert page["cursor"] and len(page["messages"]) == 10
        page = personas["viewer"].get(API + f"topics/{TOPIC}/browse/?cursor={page['cursor']}&limit=10").json()
    offset_ids = {s["offsetMsgId"] for s in stored["sent"]}  # type: ignore[union-attr]
    assert offset_ids <= set(seen) and len(seen) == len(set(seen)) and pages >= 3
    bad = personas["viewer"].get(API + f"topics/{TOPIC}/browse/?cursor=garbage")
    assert bad.status_code == 400 and "cursor" in bad.json()["detail"]
    assert personas["viewer"].get(API + f"topics/{TOPIC}/browse/?begin=10&end=5").status_code == 400
    assert personas["outsider"].get(url).status_code == 403


def test_lookup_by_key_and_by_either_id(stored: dict[str, object], personas: dict[str, Client]) -> None:
    found = personas["viewer"].get(API + f"messages/by-key/?topic={TOPIC}&key=order-3").json()
    assert len(found["messages"]) >= 4 and all("order-3" in m["keys"] for m in found["messages"])
    assert found["truncated"] is False
    first = stored["sent"][0]  # type: ignore[index]
    by_offset_id = personas["viewer"].get(API + f"messages/{first['offsetMsgId']}/").json()
    by_client_id = personas["viewer"].get(API + f"messages/{first['msgId']}/?topic={TOPIC}").json()
    assert by_offset_id["msgId"] == by_client_id["msgId"] == first["offsetMsgId"]
    assert by_offset_id["properties"]["UNIQ_KEY"] == first["msgId"]
    assert by_offset_id["body"]["text"] == "text 0" and not by_offset_id["body"]["binary"]
    assert by_offset_id["body"]["charset"] == "utf-8" and by_offset_id["body"]["hex"] == b"text 0".hex()
    assert personas["viewer"].get(API + "messages/by-key/?topic=x").status_code == 400
    assert personas["viewer"].get(API + "messages/00000000000000000000000000000000/").status_code == 404
    assert personas["viewer"].get(API + "messages/not-an-id/").status_code == 400


def test_bodies_show_as_json_or_marked_binary(stored: dict[str, object], personas: dict[str, Client]) -> None:
    json_msg, bin_msg = stored["sent"][-2], stored["sent"][-1]  # type: ignore[index]
    as_json = personas["viewer"].get(API + f"messages/{json_msg['offsetMsgId']}/").json()["body"]
    assert as_json["json"] == '{\n  "a": 1,\n  "b": [\n    2\n  ]\n}'
    as_bin = personas["viewer"].get(API + f"messages/{bin_msg['offsetMsgId']}/").json()["body"]
    assert as_bin["binary"] is True and as_bin["text"] is None and as_bin["hex"].startswith("0001")
    latin = (
        personas["viewer"].get(API + f"messages/{json_msg['offsetMsgId']}/?charset=latin-1").json()["body"]
    )
    assert latin["charset"] == "latin-1"


def test_a_message_says_which_groups_consumed_it(
    stored: dict[str, object], personas: dict[str, Client]
) -> None:
    first = stored["sent"][0]  # type: ignore[index]
    detail = personas["viewer"].get(API + f"messages/{first['offsetMsgId']}/").json()
    assert isinstance(detail["consumedBy"], list)
    assert (
        personas["viewer"]
        .post(
            API + f"messages/{first['offsetMsgId']}/resend/",
            {"group": "g", "clientId": "c"},
            content_type="application/json",
        )
        .status_code
        == 403
    )
    missing = personas["operator"].post(
        API + f"messages/{first['offsetMsgId']}/resend/", {}, content_type="application/json"
    )
    assert missing.status_code == 400


def test_a_messages_trace_is_read_from_the_trace_topic(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    op = personas["operator"]
    op.post(
        API + "topics/", {"name": "TracedTopic"}, content_type="application/json"
    )  # the broker made the trace topic
    sent = op.post(
        API + "topics/TracedTopic/messages/",
        {"body": "traced", "keys": "k1"},
        content_type="application/json",
    ).json()
    uniq, offset_id = sent["msgId"], sent["offsetMsgId"]
    t0 = int(time.time() * 1000)
    records = [
        [
            "Pub",
            t0,
            "DefaultRegion",
            "pg",
            "TracedTopic",
            uniq,
            "TagA",
            "k1",
            on_servers.broker_addr,
            6,
            3,
            0,
            offset_id,
            "true",
        ],
        ["SubBefore", t0 + 10, "DefaultRegion", "cg", "req-1", uniq, 0, "k1"],
        ["SubAfter", "req-1", uniq, 5, "true", "k1", 0, t0 + 15, "cg"],
        ["SubBefore", t0 + 20, "DefaultRegion", "other", "req-2", uniq, 0, "k1"],
        ["Pub", t0, "DefaultRegion", "pg", "TracedTopic", "SOMEONE-ELSE", "", "", "", 1, 1, 0],
    ]
    body = "".join("\x01".join(map(str, r)) + "\x02" for r in records)
    op.post(
        API + "topics/RMQ_SYS_TRACE_TOPIC/messages/",
        {"body": body, "keys": f"{uniq} k1"},
        content_type="application/json",
    )
    trace = wait_for(
        lambda: (t := personas["viewer"].get(API + f"messages/{uniq}/trace/").json()).get("publish") and t,
        10,
        "the trace",
    )
    (pub,) = trace["publish"]
    assert pub["costMs"] == 3 and pub["offsetMsgId"] == offset_id and pub["success"] is True
    assert trace["consumers"]["cg"] == [
        {"startedAt": t0 + 10, "retryTimes": 0, "costMs": 5, "success": True, "finished": True}
    ]
    assert trace["consumers"]["other"][0]["finished"] is False  # started, no outcome recorded
    assert trace["records"] == 4  # the other message's record is not this one's


def test_the_message_page_shows_its_trace(on_servers: Servers, personas: dict[str, Client]) -> None:
    op = personas["operator"]
    op.post(API + "topics/", {"name": "PageTraced"}, content_type="application/json")
    sent = op.post(API + "topics/PageTraced/messages/", {"body": "x"}, content_type="application/json").json()
    t0 = int(time.time() * 1000)
    body = "\x01".join(
        map(
            str, ["Pub", t0, "R", "page-producers", "PageTraced", sent["msgId"], "", "", "h", 1, 4, 0, "true"]
        )
    )
    op.post(
        API + "topics/RMQ_SYS_TRACE_TOPIC/messages/",
        {"body": body + "\x02", "keys": sent["msgId"]},
        content_type="application/json",
    )
    page = wait_for(
        lambda: (
            b'id="trace"'
            in (r := personas["viewer"].get(f"/clusters/default/messages/{sent['offsetMsgId']}/")).content
            and r
        ),
        10,
        "the trace on the page",
    )
    assert b"page-producers" in page.content and b"4 ms" in page.content
