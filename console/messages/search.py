"""Find a message from whatever a person has of it, typed into one box.

What people hold is one of three things, and the box does not ask which:

* the broker's **offset message id** (32 hex characters; 56 with an IPv6 broker): the
  store host and commit-log offset, read directly (VIEW_MESSAGE_BY_ID);
* the client's **message id**, RocketMQ's ``UNIQ_KEY`` (what producers log; also 32 hex
  characters), found through the brokers' index;
* a **key** of the message (its ``KEYS``), found through the same index.

Both ids look alike, so a hex id is tried both ways, and also as a key.  The index is
kept per broker under ``topic#key``: no broker answers "which topic holds this key", so a
search without a topic asks the index of every topic the nameservers route, application
topics first, then dead-letter and retry topics (system topics, trace records included,
are left out), at most MAX_TOPICS of them, and says how many it searched.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any

from broker_core.client.admin import DEFAULT_QUERY_MAX_NUM, AdminClient
from broker_core.errors import AdminError, AdminUnreachableError, MessageIllegalError
from broker_core.model.message import MessageExt, decode_message_id
from broker_core.remoting.codes import ResponseCode
from broker_core.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_system_topic,
    topic_problem,
)
from console.messages.services import summary

# The most topics one search without a topic asks (application topics come first).
MAX_TOPICS = 1_000
# How many topics are asked at once.
CONCURRENCY = 16
# The longest text searched for: RocketMQ keys are short words.
MAX_QUERY_LENGTH = 255
HEX_ID = re.compile(r"(?:[0-9A-Fa-f]{32}|[0-9A-Fa-f]{56})")

OFFSET_ID, CLIENT_ID, KEY = "offset id", "client id", "key"


def query_problem(text: str) -> str | None:
    """Why ``text`` cannot be searched for, as a sentence with what to do; None when it can."""
    if not text:
        return (
            "Type a message id, a client message id (UNIQ_KEY, as producers log it) "
            "or a message key to search for."
        )
    if len(text) > MAX_QUERY_LENGTH:
        return (
            f"That is {len(text):,} characters long; message ids are 32 hex characters and keys are "
            f"short words (at most {MAX_QUERY_LENGTH}). Paste one id or one key."
        )
    if any(c.isspace() for c in text):
        return (
            "Search for one id or one key at a time: a message's keys are separated by spaces, "
            "so no key holds one."
        )
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        return "That text has control characters; paste the id or key as the producer logged it."
    return None


def topic_text_problem(topic: str) -> str | None:
    """Why ``topic`` is not a topic name (a sentence), or None."""
    problem = topic_problem(topic)
    return f"{problem[0].upper()}{problem[1:]}." if problem else None


@dataclass
class Search:
    """What one search asked and found."""

    text: str
    topic: str | None
    kinds: list[str] = field(default_factory=list)
    topics_searched: int = 0
    topics_total: int = 0
    found: dict[str, tuple[MessageExt, set[str]]] = field(default_factory=dict)
    truncated: bool = False
    unanswered: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, msg: MessageExt, how: str) -> None:
        self.found.setdefault(msg.msg_id, (msg, set()))[1].add(how)


def _matches(msg: MessageExt, text: str) -> set[str]:
    """How ``msg`` matches ``text``: by its client id, by one of its keys (the index is a
    hash, so what it returns is checked)."""
    how = set()
    uniq = msg.uniq_key or ""
    if uniq and uniq.upper() == text.upper() and HEX_ID.fullmatch(text):
        how.add(CLIENT_ID)
    if text in (msg.keys or "").split(" "):
        how.add(KEY)
    return how


async def _by_offset_id(admin: AdminClient, search: Search) -> None:
    """Read the message the text names as an offset id, when it names a known broker."""
    try:
        addr, _offset = decode_message_id(search.text)
    except MessageIllegalError:
        return
    info = await admin.cluster_info()
    if info.broker_by_addr(addr) is None:
        return  # not a broker's address: not an offset id (a client id, most likely)
    try:
        msg = await admin.view_message(search.text)
    except AdminUnreachableError as exc:
        search.unanswered.append(str(exc))
        return
    except AdminError:
        return  # that broker has no message there
    if search.topic and msg.topic != search.topic:
        search.notes.append(
            f"The offset id {search.text} is a message of topic {msg.topic}, not {search.topic}."
        )
        return
    search.add(msg, OFFSET_ID)


async def _topics_to_search(admin: AdminClient) -> list[str]:
    """Every topic whose index may hold the message: application topics, then dead-letter
    and retry topics (system topics and the cluster's and brokers' own names left out)."""
    info, names = await asyncio.gather(admin.cluster_info(), admin.topic_list())
    own_names = set(info.clusters) | set(info.brokers)
    eligible = [n for n in names if n not in own_names and not is_system_topic(n)]

    def rank(name: str) -> tuple[int, str]:
        if name.startswith(DLQ_GROUP_TOPIC_PREFIX):
            return 1, name
        if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return 2, name
        return 0, name

    return sorted(eligible, key=rank)


async def _in_index(admin: AdminClient, search: Search, topic: str, keys: list[str]) -> None:
    """Ask ``topic``'s index for each of ``keys``; keep what truly matches."""
    for key in keys:
        try:
            messages = await admin.query_by_key(topic, key)
        except AdminUnreachableError as exc:
            search.unanswered.append(str(exc))
            return
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST and not search.topic:
                return  # deleted since the list was read
            raise
        if len(messages) >= DEFAULT_QUERY_MAX_NUM:
            search.truncated = True
        for msg in messages:
            for how in _matches(msg, search.text):
                search.add(msg, how)


async def run(admin: AdminClient, text: str, topic: str | None = None) -> Search:
    """Search for ``text`` as every kind of id it may be and as a key, in ``topic`` or in
    every topic (bounded, see the module docstring)."""
    text, topic = text.strip(), (topic or "").strip() or None
    problem = query_problem(text)
    if problem is None and topic:
        problem = topic_text_problem(topic)
    if problem:
        raise AdminError(problem)
    search = Search(text, topic)
    is_hex = bool(HEX_ID.fullmatch(text))
    search.kinds = [OFFSET_ID, CLIENT_ID, KEY] if is_hex else [KEY]
    # A client id is indexed as the producer wrote it (upper case); a key exactly as given.
    keys = list(dict.fromkeys([text, text.upper()] if is_hex else [text]))
    if topic:
        try:
            await admin.topic_route(topic)
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise AdminError(
                    f"There is no topic {topic} in this cluster; "
                    "leave the topic empty to search every topic.",
                    code=ResponseCode.TOPIC_NOT_EXIST,
                ) from None
            raise
        topics = [topic]
        search.topics_total = 1
    else:
        everything = await _topics_to_search(admin)
        search.topics_total = len(everything)
        topics = everything[:MAX_TOPICS]
    search.topics_searched = len(topics)
    if is_hex:
        await _by_offset_id(admin, search)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(name: str) -> None:
        async with gate:
            await _in_index(admin, search, name, keys)

    await asyncio.gather(*(one(name) for name in topics))
    return search


def _kinds_text(kinds: list[str]) -> str:
    words = {OFFSET_ID: "an offset message id", CLIENT_ID: "a client message id (UNIQ_KEY)", KEY: "a key"}
    said = [words[k] for k in kinds]
    return said[0] if len(said) == 1 else ", ".join(said[:-1]) + " and " + said[-1]


def searched_text(search: Search) -> str:
    """What was searched, in one sentence."""
    if search.topic:
        where = f"topic {search.topic}"
    elif search.topics_searched < search.topics_total:
        where = (
            f"the first {search.topics_searched:,} of {search.topics_total:,} topics "
            "(applications' topics first, then dead-letter and retry topics)"
        )
    else:
        plural = "s" if search.topics_searched != 1 else ""
        where = f"all {search.topics_searched:,} topic{plural} of the cluster"
        where += " (application, dead-letter and retry topics; system topics left out)"
    return f"Searched for {search.text} as {_kinds_text(search.kinds)} in {where}."


def next_step_text(search: Search) -> str:
    """What to try when nothing was found."""
    steps = []
    if HEX_ID.fullmatch(search.text):
        steps.append("check the id was copied whole")
    else:
        steps.append(
            "a message id is 32 hexadecimal characters; a key must be one of the keys the producer "
            "set, exactly (keys are case-sensitive)"
        )
    if search.topic:
        steps.append("leave the topic empty to search every topic")
    elif search.topics_searched < search.topics_total:
        steps.append("give the topic to search one the bound left out")
    steps.append(
        "messages older than the brokers keep them (fileReservedTime) are deleted; "
        "browse the topic by time and tag to look around"
    )
    return "Try this: " + "; ".join(steps) + "."


def as_json(search: Search) -> dict[str, Any]:
    """The search's answer: the messages found (newest first) with how each matched, and
    sentences saying what was searched and, when nothing was found, what to try."""
    rows = []
    for msg, how in sorted(search.found.values(), key=lambda f: f[0].store_timestamp, reverse=True):
        rows.append({**summary(msg), "matchedAs": sorted(how)})
    return {
        "query": search.text,
        "topic": search.topic,
        "searchedAs": search.kinds,
        "topicsSearched": search.topics_searched,
        "topicsTotal": search.topics_total,
        "bounded": search.topics_searched < search.topics_total,
        "messages": rows,
        "truncated": search.truncated,
        "unanswered": search.unanswered,
        "searched": searched_text(search),
        "notes": search.notes,
        "nextStep": None if rows else next_step_text(search),
    }


async def find(admin: AdminClient, msg_id: str, topic: str | None = None) -> MessageExt:
    """One message by its offset id, or by its client id (UNIQ_KEY) in ``topic`` or, without
    one, in every topic (the oldest stored copy when a retried send stored it twice)."""
    msg_id = msg_id.strip()
    if not HEX_ID.fullmatch(msg_id):
        raise AdminError(
            f"{msg_id!r} is not a message id: ids are 32 hexadecimal characters (56 for an IPv6 host). "
            "To find a message by key, use the message search."
        )
    try:
        return await admin.view_message(msg_id)
    except AdminUnreachableError:
        raise
    except AdminError:
        pass
    search = await run(admin, msg_id, topic)
    copies = [m for m, how in search.found.values() if how & {CLIENT_ID, OFFSET_ID}]
    if not copies:
        where = f"topic {topic}" if topic else f"the {search.topics_searched:,} topics searched"
        raise AdminError(
            f"No message has the id {msg_id} (as an offset id or a client id) in {where}.",
            code=ResponseCode.QUERY_NOT_FOUND,
        )
    return min(copies, key=lambda m: m.store_timestamp)
