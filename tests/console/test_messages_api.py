"""Messages over REST against a real broker: browse by time with a cursor (progress and an
explicit truncated marker), by key, by id; body views; consumption by group."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

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


# -- finding a message from any id or key, from one box ------------------------------------


def _topic(op: Client, name: str, queues: int) -> None:
    if op.get(API + f"topics/{name}/").status_code == 404:
        body = {"name": name, "readQueueNums": queues, "writeQueueNums": queues}
        assert op.post(API + "topics/", body, content_type="application/json").status_code == 201


def _send(op: Client, topic: str, body: str, keys: str = "", tags: str = "") -> dict[str, Any]:
    sent = op.post(
        API + f"topics/{topic}/messages/",
        {"body": body, "keys": keys, "tags": tags},
        content_type="application/json",
    )
    assert sent.status_code in (200, 201), sent.content
    return sent.json()


@pytest.fixture
def findable(on_servers: Servers, personas: dict[str, Client]) -> dict[str, Any]:
    """Two topics, one shared key (``shared-<token>``) in both and one key only in the first."""
    op, token = personas["operator"], uuid.uuid4().hex[:8]
    _topic(op, "FindA", 4)
    _topic(op, "FindB", 2)
    one = _send(op, "FindA", f"find me {token}", keys=f"shared-{token} only-{token}", tags="Red")
    other = _send(op, "FindB", f"the other {token}", keys=f"shared-{token}", tags="Blue")
    search = API + f"messages/search/?q=only-{token}"
    wait_for(lambda: personas["viewer"].get(search).json()["messages"], 10, "the index to hold the keys")
    return {"token": token, "one": one, "other": other}


def _search(client: Client, q: str, topic: str = "") -> Any:
    return client.get(API + "messages/search/", {"q": q, **({"topic": topic} if topic else {})})


def test_one_box_finds_a_message_by_its_offset_id(
    findable: dict[str, Any], personas: dict[str, Client]
) -> None:
    one = findable["one"]
    found = _search(personas["viewer"], one["offsetMsgId"]).json()
    assert [m["msgId"] for m in found["messages"]] == [one["offsetMsgId"]]
    assert found["messages"][0]["matchedAs"] == ["offset id"]
    assert found["searchedAs"] == ["offset id", "client id", "key"] and found["nextStep"] is None
    # The page opens the message straight away.
    page = personas["viewer"].get("/clusters/default/messages/search/", {"q": one["offsetMsgId"]})
    assert page.status_code == 302 and page["Location"].endswith(f"/messages/{one['offsetMsgId']}/")


def test_one_box_finds_a_message_by_its_client_id_without_a_topic(
    findable: dict[str, Any], personas: dict[str, Client]
) -> None:
    """The id producers log (UNIQ_KEY) is found in every topic, upper or lower case."""
    one = findable["one"]
    for q in (one["msgId"], one["msgId"].lower()):
        found = _search(personas["viewer"], q).json()
        assert [(m["msgId"], m["topic"], m["matchedAs"]) for m in found["messages"]] == [
            (one["offsetMsgId"], "FindA", ["client id"])
        ]
        assert found["topic"] is None and found["topicsSearched"] == found["topicsTotal"] >= 2
        assert "all" in found["searched"] and "topics of the cluster" in found["searched"]
    # The message page and the REST detail take the client id without ?topic= too.
    detail = personas["viewer"].get(API + f"messages/{one['msgId']}/")
    assert detail.status_code == 200 and detail.json()["body"]["text"] == f"find me {findable['token']}"
    page = personas["viewer"].get(f"/clusters/default/messages/{one['msgId']}/", follow=True)
    assert page.status_code == 200 and f"find me {findable['token']}" in page.content.decode()


def test_one_box_finds_messages_by_key_in_every_topic_or_in_one(
    findable: dict[str, Any], personas: dict[str, Client]
) -> None:
    token = findable["token"]
    everywhere = _search(personas["viewer"], f"shared-{token}").json()
    assert sorted(m["topic"] for m in everywhere["messages"]) == ["FindA", "FindB"]
    assert all(m["matchedAs"] == ["key"] for m in everywhere["messages"])
    assert everywhere["searchedAs"] == ["key"] and everywhere["truncated"] is False
    narrowed = _search(personas["viewer"], f"shared-{token}", topic="FindB").json()
    assert [m["msgId"] for m in narrowed["messages"]] == [findable["other"]["offsetMsgId"]]
    assert narrowed["topicsSearched"] == 1 and "topic FindB" in narrowed["searched"]
    # Several found: the page lists them, each linking to its message, with topic and tags.
    page = personas["viewer"].get("/clusters/default/messages/search/", {"q": f"shared-{token}"})
    html = page.content.decode()
    assert page.status_code == 200 and html.count('class="msg-link"') == 2
    assert "2 messages found" in html and "Red" in html and "Blue" in html
    # An offset id narrowed to another topic is not shown, and the answer says where it is.
    elsewhere = _search(personas["viewer"], findable["one"]["offsetMsgId"], topic="FindB").json()
    assert elsewhere["messages"] == [] and "is a message of topic FindA" in elsewhere["notes"][0]


def test_nothing_found_says_what_was_searched_and_what_to_try(
    findable: dict[str, Any], personas: dict[str, Client]
) -> None:
    none = _search(personas["viewer"], "no-such-key-anywhere")
    body = none.json()
    assert none.status_code == 200 and body["messages"] == []
    assert body["searched"].startswith("Searched for no-such-key-anywhere as a key in all")
    assert body["nextStep"].startswith("Try this:") and "browse the topic by time" in body["nextStep"]
    an_id = _search(personas["viewer"], "0123456789ABCDEF0123456789ABCDEF", topic="FindA").json()
    assert (
        "as an offset message id, a client message id (UNIQ_KEY) and a key in topic FindA"
        in an_id["searched"]
    )
    assert "leave the topic empty" in an_id["nextStep"]
    page = personas["viewer"].get("/clusters/default/messages/search/", {"q": "no-such-key-anywhere"})
    assert page.status_code == 200 and 'id="search-none"' in page.content.decode()
    assert "No message matches no-such-key-anywhere" in page.content.decode()


def test_text_that_cannot_be_an_id_or_a_key_is_a_clear_400(
    on_servers: Servers, personas: dict[str, Client]
) -> None:
    cases = {
        "": "Type a message id",
        "two words": "one id or one key at a time",
        "x" * 300: "300 characters long",
        "bell\x07": "control characters",
    }
    for q, said in cases.items():
        answer = _search(personas["viewer"], q)
        assert answer.status_code == 400 and said in answer.json()["detail"], q
        assert answer.json()["error"] == "bad_request"
    bad_topic = _search(personas["viewer"], "k", topic="no spaces allowed")
    assert bad_topic.status_code == 400 and "may only contain" in bad_topic.json()["detail"]
    unknown = _search(personas["viewer"], "k", topic="NoSuchTopic")
    assert unknown.status_code == 404 and "There is no topic NoSuchTopic" in unknown.json()["detail"]
    page = personas["viewer"].get("/clusters/default/messages/search/", {"q": "two words"})
    assert page.status_code == 400 and "one id or one key at a time" in page.content.decode()
    assert personas["outsider"].get(API + "messages/search/?q=k").status_code == 403
    # The box is on every cluster page, and the search page explains itself when empty.
    assert 'id="msg-search"' in personas["viewer"].get("/clusters/default/topics/").content.decode()
    empty = personas["viewer"].get("/clusters/default/messages/search/").content.decode()
    assert "UNIQ_KEY" in empty and 'id="search-none"' not in empty


def test_search_is_in_the_api_schema(on_servers: Servers, personas: dict[str, Client]) -> None:
    schema = personas["viewer"].get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/clusters/{cluster}/messages/search/"]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"q", "topic"}
    browse = schema["paths"]["/api/clusters/{cluster}/topics/{topic}/browse/"]["get"]
    assert {p["name"] for p in browse["parameters"]} >= {"begin", "end", "tags", "cursor"}


# -- browsing by time range and tag, newest first across queues ------------------------------


@pytest.fixture
def spread(on_servers: Servers, personas: dict[str, Client]) -> dict[str, Any]:
    """24 messages in a fresh 4-queue topic, sent round the queues: 12 tagged Early before
    ``middle``, then 12 alternating Odd and Even after it."""
    op, topic = personas["operator"], f"Spread{uuid.uuid4().hex[:6]}"
    _topic(op, topic, 4)
    early = [_send(op, topic, f"early {i}", tags="Early") for i in range(12)]
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    late = [_send(op, topic, f"late {i}", tags="Odd" if i % 2 else "Even") for i in range(12)]

    def stored() -> int:
        return int(personas["viewer"].get(API + f"topics/{topic}/").json()["totalMessages"])

    wait_for(lambda: stored() >= 24, 10, "the 24 messages in their queues")
    return {"topic": topic, "middle": middle, "early": early, "late": late}


def _pages(client: Client, url: str) -> list[dict[str, Any]]:
    pages = [client.get(url).json()]
    while pages[-1]["cursor"]:
        pages.append(client.get(url.split("?")[0] + f"?cursor={pages[-1]['cursor']}&limit=5").json())
    return pages


def test_the_first_page_is_the_newest_across_all_queues(
    spread: dict[str, Any], personas: dict[str, Client]
) -> None:
    url = API + f"topics/{spread['topic']}/browse/?limit=5"
    pages = _pages(personas["viewer"], url)
    first = pages[0]
    assert len({m["queueId"] for m in first["messages"]}) == 4, "the first page is not one queue's"
    assert first["order"] == "newest first" and first["truncated"] is True
    shown = [m for page in pages for m in page["messages"]]
    times = [m["storeTimestamp"] for m in shown]
    assert times == sorted(times, reverse=True), "newest first, across pages too"
    assert len(shown) == 24 and len({m["msgId"] for m in shown}) == 24
    assert [m["msgId"] for m in first["messages"]] == [s["offsetMsgId"] for s in spread["late"][::-1][:5]]
    assert pages[-1]["progress"] == 1.0 and pages[-1]["cursor"] is None


def test_browse_by_time_range_and_tag(spread: dict[str, Any], personas: dict[str, Client]) -> None:
    viewer, topic, middle = personas["viewer"], spread["topic"], spread["middle"]
    late_ids = {s["offsetMsgId"] for s in spread["late"]}
    after = viewer.get(API + f"topics/{topic}/browse/?begin={middle}&limit=100").json()
    assert {m["msgId"] for m in after["messages"]} == late_ids
    iso = dt.datetime.fromtimestamp(middle / 1000, tz=dt.UTC).isoformat(timespec="milliseconds")
    before = viewer.get(API + f"topics/{topic}/browse/", {"end": iso, "begin": 0, "limit": 100}).json()
    assert {m["msgId"] for m in before["messages"]} == {s["offsetMsgId"] for s in spread["early"]}
    odd = viewer.get(API + f"topics/{topic}/browse/", {"tags": "Odd", "begin": 0, "limit": 3}).json()
    assert [m["tags"] for m in odd["messages"]] == ["Odd"] * 3 and odd["tags"] == "Odd"
    rest = viewer.get(API + f"topics/{topic}/browse/", {"cursor": odd["cursor"], "limit": 100}).json()
    assert [m["tags"] for m in rest["messages"]] == ["Odd"] * 3, "the cursor keeps the tag filter"
    both = viewer.get(API + f"topics/{topic}/browse/", {"tags": "Odd || Early", "begin": 0, "limit": 100})
    shown = both.json()["messages"]
    assert {m["tags"] for m in shown} == {"Odd", "Early"} and len(shown) == 18
    none = viewer.get(API + f"topics/{topic}/browse/", {"tags": "Nope", "begin": 0}).json()
    assert none["messages"] == [] and none["truncated"] is False
    bad = viewer.get(API + f"topics/{topic}/browse/", {"begin": "yesterday"})
    assert bad.status_code == 400 and "begin must be a date-time" in bad.json()["detail"]


def test_the_browse_page_has_utc_time_pickers_and_a_tag_filter(
    spread: dict[str, Any], personas: dict[str, Client]
) -> None:
    viewer, topic = personas["viewer"], spread["topic"]
    middle = dt.datetime.fromtimestamp(spread["middle"] / 1000, tz=dt.UTC)
    picked = middle.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    page = viewer.get(f"/clusters/default/topics/{topic}/messages/", {"from": picked, "tags": "Even"})
    html = page.content.decode()
    assert page.status_code == 200 and "From (UTC)" in html and 'type="datetime-local"' in html
    assert html.count('class="msg-link"') == 6 and html.count("<td>Even</td>") == 6
    assert "late 0" not in html and "tags Even" in html
    default = viewer.get(f"/clusters/default/topics/{topic}/messages/").content.decode()
    assert default.count('class="msg-link"') == 24 and "newest first across all queues" in default
    wrong = viewer.get(f"/clusters/default/topics/{topic}/messages/", {"from": "soon"})
    assert wrong.status_code == 400
    assert "the &#x27;from&#x27; time must be a date-time" in wrong.content.decode()
