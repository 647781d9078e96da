"""The admin client's results: typed values built from the brokers' admin bodies.

Each class reads one RocketMQ body shape (``from_body``; fastjson's ``MessageQueue`` map
keys already turned into ``MessageQueue`` by ``broker_core.remoting.fastjson.loads``) and
writes a stable JSON form (``to_json``, RocketMQ's camelCase names) for the CLI's
``--json`` and the console's API.  Pure values: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from broker_core.messagequeue import MessageQueue


def as_message_queue(key: Any) -> MessageQueue:
    """A ``MessageQueue`` from a map key: already one, or its JSON text (quoted-key dialect).

    Raises ValueError when the key is neither.
    """
    if isinstance(key, MessageQueue):
        return key
    if isinstance(key, str):
        try:
            return MessageQueue.from_json(orjson.loads(key))
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not a MessageQueue key: {key!r}") from exc
    raise ValueError(f"not a MessageQueue key: {key!r}")


def _mq_json(mq: MessageQueue) -> dict[str, Any]:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


# -- topics --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueStat:
    """One queue's offsets: ``max_offset - min_offset`` messages are still stored."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, Any]:
        return {
            **_mq_json(self.queue),
            "minOffset": self.min_offset,
            "maxOffset": self.max_offset,
            "lastUpdateTimestamp": self.last_update_timestamp,
        }


@dataclass(frozen=True, slots=True)
class TopicStats:
    """Every queue of a topic on every broker asked, ordered by broker then queue id."""

    topic: str
    queues: tuple[QueueStat, ...]

    @property
    def total_messages(self) -> int:
        return sum(q.max_offset - q.min_offset for q in self.queues)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "totalMessages": self.total_messages,
            "queues": [q.to_json() for q in self.queues],
        }

    @staticmethod
    def queues_from_body(body: Mapping[str, Any]) -> list[QueueStat]:
        """The queues of one broker's GET_TOPIC_STATS_INFO body."""
        return [
            QueueStat(
                as_message_queue(key),
                int(value.get("minOffset") or 0),
                int(value.get("maxOffset") or 0),
                int(value.get("lastUpdateTimestamp") or 0),
            )
            for key, value in (body.get("offsetTable") or {}).items()
        ]


# -- consumer groups -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """How far a group has consumed one queue.

    ``lag`` (mqadmin's "Diff") is how many stored messages the group has not committed yet;
    a queue the group never committed (offset below 0) counts from 0.
    """

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    last_timestamp: int = 0

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - max(self.consumer_offset, 0))

    def to_json(self) -> dict[str, Any]:
        return {
            **_mq_json(self.queue),
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lag": self.lag,
            "lastTimestamp": self.last_timestamp,
        }


@dataclass(frozen=True, slots=True)
class ConsumeStats:
    """A group's progress on every queue it consumes (one topic or all), from every broker."""

    group: str
    queues: tuple[QueueProgress, ...]
    consume_tps: float = 0.0

    @property
    def total_lag(self) -> int:
        return sum(q.lag for q in self.queues)

    @property
    def topics(self) -> list[str]:
        return sorted({q.queue.topic for q in self.queues})

    def lag_by_topic(self) -> dict[str, int]:
        lags: dict[str, int] = {}
        for q in self.queues:
            lags[q.queue.topic] = lags.get(q.queue.topic, 0) + q.lag
        return dict(sorted(lags.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "consumeTps": self.consume_tps,
            "totalLag": self.total_lag,
            "queues": [q.to_json() for q in self.queues],
        }

    @staticmethod
    def queues_from_body(body: Mapping[str, Any]) -> list[QueueProgress]:
        """The queues of one broker's GET_CONSUME_STATS body."""
        return [
            QueueProgress(
                as_message_queue(key),
                int(value.get("brokerOffset") or 0),
                int(value.get("consumerOffset") if value.get("consumerOffset") is not None else -1),
                int(value.get("lastTimestamp") or 0),
            )
            for key, value in (body.get("offsetTable") or {}).items()
        ]


# The protocol of a client the broker does not say otherwise of: RocketMQ's remoting.
PROTOCOL_REMOTING = "remoting"


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """One connected producer or consumer client, as a broker sees it.

    ``version`` is RocketMQ's version code (an ``MQVersion`` ordinal) from the client's
    frames.  A RocketMQ 5 client that the gRPC proxy registered also has its ``protocol``
    (the proxy's word for it, e.g. ``gRPC v2``) and its SDK's version string
    (``version_desc``); every other client is ``remoting`` with no version string.
    """

    client_id: str
    client_addr: str
    language: str
    version: int
    protocol: str = PROTOCOL_REMOTING
    version_desc: str = ""

    @property
    def grpc(self) -> bool:
        """Whether the client talks gRPC (RocketMQ 5's protocol) through a proxy."""
        return self.protocol.lower().startswith("grpc")

    def to_json(self) -> dict[str, Any]:
        return {
            "clientId": self.client_id,
            "clientAddr": self.client_addr,
            "language": self.language,
            "version": self.version,
            "protocol": self.protocol,
            "versionDesc": self.version_desc,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ClientConnection:
        version = obj.get("version")
        return cls(
            str(obj.get("clientId") or ""),
            str(obj.get("clientAddr") or ""),
            str(obj.get("language") or ""),
            int(version) if isinstance(version, int | str) and str(version).lstrip("-").isdigit() else 0,
            str(obj.get("protocol") or PROTOCOL_REMOTING),
            str(obj.get("versionDesc") or obj.get("clientVersion") or ""),
        )


def merge_connections(*groups: Iterable[ClientConnection]) -> tuple[ClientConnection, ...]:
    """The connections of several brokers, one per client id, ordered by client id."""
    by_id: dict[str, ClientConnection] = {}
    for connections in groups:
        for conn in connections:
            by_id.setdefault(conn.client_id, conn)
    return tuple(by_id[cid] for cid in sorted(by_id))


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer group's subscription to one topic: its tag expression."""

    topic: str
    expression: str
    tags: tuple[str, ...] = ()
    sub_version: int = 0
    expression_type: str = "TAG"

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "subString": self.expression,
            "tagsSet": list(self.tags),
            "subVersion": self.sub_version,
            "expressionType": self.expression_type,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Subscription:
        return cls(
            str(obj.get("topic") or ""),
            str(obj.get("subString") or "*"),
            tuple(sorted(str(t) for t in obj.get("tagsSet") or [])),
            int(obj.get("subVersion") or 0),
            str(obj.get("expressionType") or "TAG"),
        )


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """Who consumes for a group right now, what they subscribe to and how they consume."""

    group: str
    connections: tuple[ClientConnection, ...]
    subscriptions: Mapping[str, Subscription] = field(default_factory=dict)
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "connectionSet": [c.to_json() for c in self.connections],
            "subscriptionTable": {t: s.to_json() for t, s in sorted(self.subscriptions.items())},
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
        }

    @classmethod
    def from_body(cls, group: str, body: Mapping[str, Any]) -> ConsumerConnection:
        subscriptions = {
            str(topic): Subscription.from_json(sub)
            for topic, sub in (body.get("subscriptionTable") or {}).items()
        }
        return cls(
            group,
            merge_connections(ClientConnection.from_json(c) for c in body.get("connectionSet") or []),
            subscriptions,
            str(body.get("consumeType") or ""),
            str(body.get("messageModel") or ""),
            str(body.get("consumeFromWhere") or ""),
        )


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One consumer group at a glance: who is online, how it consumes, its TPS and lag."""

    group: str
    clients: int
    consume_type: str
    message_model: str
    consume_tps: float
    total_lag: int

    @property
    def online(self) -> bool:
        return self.clients > 0

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "clients": self.clients,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeTps": self.consume_tps,
            "totalLag": self.total_lag,
        }


# -- pop consumption (RocketMQ 5) ----------------------------------------------------------


def _attempt_counts(obj: Any) -> dict[int, int]:
    """``{"1": n, "2": m}`` (a pop book's in-flight messages per delivery attempt) by attempt."""
    if not isinstance(obj, Mapping):
        return {}
    return {int(a): int(n) for a, n in obj.items() if str(a).isdigit() and int(n or 0) > 0}


@dataclass(frozen=True, slots=True)
class PopQueueBook:
    """A group's pop consumption of one queue on one broker (a QUIVER_GET_POP_STATUS book).

    Offsets below ``base_offset`` are finished (acked or dead-lettered; the group's committed
    offset follows it); ``cursor_offset`` is the next offset not yet handed out.
    ``in_flight`` messages are handed out and invisible until acked or their invisible time
    ends; ``held`` ones wait, in a FIFO group, for their message group's message in flight.
    ``attempts`` counts the in-flight messages by delivery attempt (1 the first delivery).
    ``acked``, ``redelivered`` and ``dead_lettered`` count since the broker started.
    """

    broker_name: str
    group: str
    topic: str
    queue_id: int
    base_offset: int
    cursor_offset: int
    in_flight: int
    held: int
    acked: int
    redelivered: int
    dead_lettered: int
    attempts: Mapping[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "group": self.group,
            "topic": self.topic,
            "queueId": self.queue_id,
            "baseOffset": self.base_offset,
            "cursorOffset": self.cursor_offset,
            "inFlight": self.in_flight,
            "held": self.held,
            "acked": self.acked,
            "redelivered": self.redelivered,
            "deadLettered": self.dead_lettered,
            "attempts": attempts_json(self.attempts),
        }

    @classmethod
    def from_json(cls, broker_name: str, obj: Mapping[str, Any]) -> PopQueueBook:
        return cls(
            broker_name,
            str(obj.get("group") or ""),
            str(obj.get("topic") or ""),
            int(obj.get("queueId") or 0),
            int(obj.get("baseOffset") or 0),
            int(obj.get("cursorOffset") or 0),
            int(obj.get("inFlight") or 0),
            int(obj.get("held") or 0),
            int(obj.get("acked") or 0),
            int(obj.get("redelivered") or 0),
            int(obj.get("deadLettered") or 0),
            _attempt_counts(obj.get("attempts")),
        )


def attempts_json(attempts: Mapping[int, int]) -> list[dict[str, int]]:
    """Messages per delivery attempt as ``[{"attempt": 1, "messages": n}, ...]``, by attempt."""
    return [{"attempt": a, "messages": n} for a, n in sorted(attempts.items())]


@dataclass(frozen=True, slots=True)
class BrokerPopStatus:
    """One broker's pop books (of one group or all) and, per group with books, its acks per
    second over the last minute and whether it is a FIFO group (``consumeMessageOrderly``)."""

    broker_name: str
    broker_addr: str
    books: tuple[PopQueueBook, ...] = ()
    acked_tps: Mapping[str, float] = field(default_factory=dict)
    fifo: frozenset[str] = frozenset()

    @classmethod
    def from_body(cls, broker_name: str, broker_addr: str, body: Mapping[str, Any]) -> BrokerPopStatus:
        groups = body.get("groups") or {}
        return cls(
            broker_name,
            broker_addr,
            tuple(PopQueueBook.from_json(broker_name, b) for b in body.get("books") or []),
            {str(g): float((v or {}).get("ackedTps") or 0.0) for g, v in groups.items()},
            frozenset(str(g) for g, v in groups.items() if (v or {}).get("fifo")),
        )


@dataclass(frozen=True, slots=True)
class PopGroupTotals:
    """One group's pop consumption summed over its queues on every broker asked."""

    group: str
    fifo: bool = False
    in_flight: int = 0
    held: int = 0
    acked: int = 0
    redelivered: int = 0
    dead_lettered: int = 0
    acked_tps: float = 0.0
    attempts: Mapping[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "fifo": self.fifo,
            "inFlight": self.in_flight,
            "held": self.held,
            "acked": self.acked,
            "redelivered": self.redelivered,
            "deadLettered": self.dead_lettered,
            "ackedTps": round(self.acked_tps, 3),
            "attempts": attempts_json(self.attempts),
        }

    @classmethod
    def of(
        cls, group: str, books: Iterable[PopQueueBook], *, acked_tps: float = 0.0, fifo: bool = False
    ) -> PopGroupTotals:
        """The sums of ``group``'s ``books``, with its acked rate and FIFO flag as the brokers said."""
        rows = list(books)
        attempts: dict[int, int] = {}
        for book in rows:
            for attempt, n in book.attempts.items():
                attempts[attempt] = attempts.get(attempt, 0) + n
        return cls(
            group,
            fifo,
            sum(b.in_flight for b in rows),
            sum(b.held for b in rows),
            sum(b.acked for b in rows),
            sum(b.redelivered for b in rows),
            sum(b.dead_lettered for b in rows),
            acked_tps,
            dict(sorted(attempts.items())),
        )


@dataclass(frozen=True, slots=True)
class PopStatus:
    """Pop consumption on every master asked (RocketMQ 5 clients consume by pop through the
    proxy): each broker's books, ordered by broker name."""

    brokers: tuple[BrokerPopStatus, ...] = ()

    @property
    def books(self) -> list[PopQueueBook]:
        """Every book, by group, topic, broker and queue."""
        return sorted(
            (b for broker in self.brokers for b in broker.books),
            key=lambda b: (b.group, b.topic, b.broker_name, b.queue_id),
        )

    def groups(self) -> dict[str, PopGroupTotals]:
        """Per group with a book anywhere, its figures summed over queues and brokers."""
        by_group: dict[str, list[PopQueueBook]] = {}
        for book in self.books:
            by_group.setdefault(book.group, []).append(book)
        return {
            group: PopGroupTotals.of(
                group,
                books,
                acked_tps=sum(b.acked_tps.get(group, 0.0) for b in self.brokers),
                fifo=any(group in b.fifo for b in self.brokers),
            )
            for group, books in sorted(by_group.items())
        }


# -- brokers -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MaintenanceRun:
    """One run of a broker maintenance job (delay scan, file expiry, offset persistence).

    ``result`` is the broker's one-line summary, ``details`` its figures.
    """

    job: str
    started_ms: int
    duration_ms: float
    ok: bool = True
    result: str = ""
    details: Mapping[str, Any] = field(default_factory=dict)
    # Who ran it: platform (its schedule), broker (its own timer) or manual (an operator).
    runner: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "startedMs": self.started_ms,
            "durationMs": self.duration_ms,
            "ok": self.ok,
            "result": self.result,
            "details": dict(self.details),
            "runner": self.runner,
        }

    @classmethod
    def from_json(cls, job: str, obj: Mapping[str, Any]) -> MaintenanceRun:
        return cls(
            str(obj.get("job") or job),
            int(obj.get("startedMs") or 0),
            float(obj.get("durationMs") or 0.0),
            bool(obj.get("ok", True)),
            str(obj.get("result") or ""),
            dict(obj.get("details") or {}),
            str(obj.get("runner") or ""),
        )


@dataclass(frozen=True, slots=True)
class MaintenanceJobState:
    """Who drives one maintenance job on a broker, and its last run there.

    ``driver`` is ``platform`` (its passes keep renewing the job's lease), ``broker`` (the
    broker's own timer runs it) or ``none`` (``standaloneMaintenance = false`` and no
    platform pass lately); ``fallback`` means the broker's timer runs it only because the
    platform's passes stopped coming (or never came).
    """

    job: str
    driver: str
    fallback: bool
    lease_ms: int
    lease_left_ms: int
    last_platform_ms: int | None
    last_run: MaintenanceRun | None
    # Delay scan: how often the broker delivered a message the platform left overdue.
    rescues: int = 0
    last_rescue_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "driver": self.driver,
            "fallback": self.fallback,
            "leaseMs": self.lease_ms,
            "leaseLeftMs": self.lease_left_ms,
            "lastPlatformMs": self.last_platform_ms,
            "lastRun": self.last_run.to_json() if self.last_run is not None else None,
            "rescues": self.rescues,
            "lastRescueMs": self.last_rescue_ms,
        }

    @classmethod
    def from_json(cls, job: str, obj: Mapping[str, Any]) -> MaintenanceJobState:
        last = obj.get("lastRun")
        platform_ms = obj.get("lastPlatformMs")
        rescue_ms = obj.get("lastRescueMs")
        return cls(
            job,
            str(obj.get("driver") or ""),
            bool(obj.get("fallback", False)),
            int(obj.get("leaseMs") or 0),
            int(obj.get("leaseLeftMs") or 0),
            int(platform_ms) if platform_ms is not None else None,
            MaintenanceRun.from_json(job, last) if last else None,
            int(obj.get("rescues") or 0),
            int(rescue_ms) if rescue_ms is not None else None,
        )


@dataclass(frozen=True, slots=True)
class MaintenanceStatus:
    """A broker's maintenance: its ``standaloneMaintenance`` mode, each job's state, and the
    latest file-expiry runs that deleted something (newest first, whoever ran them: their
    ``details`` name the segments, messages per topic and groups that had not consumed them)."""

    mode: str
    jobs: Mapping[str, MaintenanceJobState]
    deletions: tuple[MaintenanceRun, ...] = ()
    # The store's health: damaged commit-log ranges on record ({start, end, size, reason,
    # foundMs}) and why the store is read-only (None: it takes writes).
    damaged_ranges: tuple[Mapping[str, Any], ...] = ()
    disk_full: str | None = None

    @property
    def fallback_jobs(self) -> list[str]:
        """The jobs the broker runs itself because the platform is silent."""
        return [job for job, state in self.jobs.items() if state.fallback]

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "jobs": {job: state.to_json() for job, state in self.jobs.items()},
            "deletions": [run.to_json() for run in self.deletions],
            "store": {"damagedRanges": [dict(r) for r in self.damaged_ranges], "diskFull": self.disk_full},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> MaintenanceStatus:
        jobs = obj.get("jobs") or {}
        return cls(
            str(obj.get("mode") or ""),
            {str(job): MaintenanceJobState.from_json(str(job), state) for job, state in sorted(jobs.items())},
            tuple(MaintenanceRun.from_json("file_expiry", run) for run in obj.get("deletions") or []),
            tuple(dict(r) for r in (obj.get("store") or {}).get("damagedRanges") or []),
            (obj.get("store") or {}).get("diskFull") or None,
        )


@dataclass(frozen=True, slots=True)
class QueueOffsetRow:
    """One group's position on one queue at a snapshot: what the offset history records.

    ``store_timestamp`` is when the next message to consume (at ``consumer_offset``, or at
    ``min_offset`` when expiry removed the messages before it) was stored (epoch ms),
    0 when the group has consumed everything; lag in time is the snapshot time minus it.
    """

    group: str
    topic: str
    queue_id: int
    consumer_offset: int
    broker_offset: int
    min_offset: int
    store_timestamp: int

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - max(self.consumer_offset, self.min_offset))


@dataclass(frozen=True, slots=True)
class OffsetSnapshot:
    """One broker's offsets and traffic totals at one instant (QUIVER_GET_OFFSET_SNAPSHOT).

    ``topic_puts`` and ``group_gets`` count from ``boot_timestamp``: a later snapshot with
    another boot time started counting again.  ``topic_puts_morning`` and
    ``group_gets_morning`` are those totals when the day (UTC) began (a counter missing
    from them began today: 0), so the first snapshot a reader sees still dates what came
    before it; ``None`` when the broker does not report them.
    """

    broker_name: str
    timestamp_ms: int
    boot_timestamp: int
    queues: tuple[QueueOffsetRow, ...]
    topic_puts: Mapping[str, int]
    group_gets: Mapping[tuple[str, str], int]
    # Groups with clients connected to this broker: group -> {clients, messageModel, consumeType, consumeTps}.
    online_groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    topic_puts_morning: Mapping[str, int] | None = None
    group_gets_morning: Mapping[tuple[str, str], int] | None = None
    # (producer group, topic) -> messages that group had stored, and the same at the
    # day's start (``producerPuts``; empty from a broker that does not count them)
    producer_puts: Mapping[tuple[str, str], int] = field(default_factory=dict)
    producer_puts_morning: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> OffsetSnapshot:
        rows = tuple(
            QueueOffsetRow(
                str(q["group"]),
                str(q["topic"]),
                int(q["queueId"]),
                int(q["consumerOffset"]),
                int(q["brokerOffset"]),
                int(q.get("minOffset") or 0),
                int(q.get("storeTimestamp") or 0),
            )
            for q in obj.get("queues") or []
        )
        gets = {(str(g["group"]), str(g["topic"])): int(g["total"]) for g in obj.get("groupGets") or []}
        produced = obj.get("producerPuts") or []
        return cls(
            str(obj.get("brokerName") or ""),
            int(obj["timestampMs"]),
            int(obj.get("bootTimestamp") or 0),
            rows,
            {str(t): int(n) for t, n in (obj.get("topicPuts") or {}).items()},
            gets,
            {str(g["group"]): dict(g) for g in obj.get("onlineGroups") or []},
            None
            if obj.get("topicPutsMorning") is None
            else {str(t): int(n) for t, n in obj["topicPutsMorning"].items()},
            None
            if obj.get("topicPutsMorning") is None
            else {
                (str(g["group"]), str(g["topic"])): int(g.get("morning") or 0)
                for g in obj.get("groupGets") or []
            },
            {(str(p["group"]), str(p["topic"])): int(p["total"]) for p in produced},
            {(str(p["group"]), str(p["topic"])): int(p.get("morning") or 0) for p in produced},
        )


def parse_properties_text(text: str) -> dict[str, str]:
    """``key=value`` lines (GET_BROKER_CONFIG's body) -> dict; blanks and ``#`` comments skipped."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props
