"""The ``quiver`` data source's options, parsed and checked before anything is read.

    spark.read.format("quiver")
        .option("namesrv", "127.0.0.1:9876")       required; "a:p;b:p" for several
        .option("topics", "Orders,Payments")       or .option("topicPattern", "Ord.*")
        .option("startTime", "2026-11-25T10:00Z")  epoch ms or ISO 8601 (UTC unless it says);
        .option("endTime", "2026-11-25T11:00Z")    start inclusive, end exclusive
        .option("startOffsets", "earliest")        earliest | latest | JSON, as Kafka's
        .option("endOffsets", "latest")            {"Orders": {"broker-a:0": 120}}
        .option("maxMessagesPerPartition", 100000) larger queue ranges are split
        .option("includeBody", "true")             adds the ``body`` column (off by default)
        .option("includeSystemTopics", "true")     lets topicPattern match system topics
        .option("accessKey", ...).option("secretKey", ...)   for a broker with aclEnable
        .load()

Every problem is a ``SourceOptionError`` whose message names the option and what it takes.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

EARLIEST = "earliest"
LATEST = "latest"
DEFAULT_MAX_PER_PARTITION = 100_000
# Offsets per queue: "broker:queueId" -> offset, per topic.
QueueOffsets = dict[str, dict[str, int]]


class SourceOptionError(ValueError):
    """A ``quiver`` option is missing or malformed."""


@dataclass(frozen=True)
class ScanOptions:
    """What to read: the parsed options (see the module docstring)."""

    namesrv: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    start_offsets: str | QueueOffsets = EARLIEST
    end_offsets: str | QueueOffsets = LATEST
    max_per_partition: int = DEFAULT_MAX_PER_PARTITION
    include_body: bool = False
    include_system_topics: bool = False
    access_key: str | None = None
    secret_key: str | None = None
    # TLS to the servers (options tlsEnable, tlsTrustCertPath, tlsCertPath, tlsKeyPath).
    tls_enable: bool = False
    tls_trust_cert_path: str = ""
    tls_cert_path: str = ""
    tls_key_path: str = ""
    timeout_s: float = 10.0
    pipeline_depth: int = 8

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ScanOptions:
        """Parse Spark's options (case-insensitive keys, string values)."""
        opts = {k.lower(): str(v) for k, v in options.items()}
        namesrv = opts.get("namesrv", "").strip()
        if not namesrv:
            raise SourceOptionError(
                "option 'namesrv' is required: the nameserver address, e.g. 127.0.0.1:9876"
            )
        topics = tuple(t.strip() for t in opts.get("topics", "").split(",") if t.strip())
        pattern = opts.get("topicpattern") or None
        if not topics and not pattern:
            raise SourceOptionError(
                "give option 'topics' (comma-separated names) or 'topicPattern' (a regex)"
            )
        if topics and pattern:
            raise SourceOptionError("give either 'topics' or 'topicPattern', not both")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise SourceOptionError(f"option 'topicPattern' is not a regular expression: {exc}") from None
        start_ms = parse_time("startTime", opts.get("starttime"))
        end_ms = parse_time("endTime", opts.get("endtime"))
        if start_ms is not None and end_ms is not None and end_ms < start_ms:
            raise SourceOptionError(f"endTime ({end_ms}) is before startTime ({start_ms})")
        access_key, secret_key = opts.get("accesskey") or None, opts.get("secretkey") or None
        if bool(access_key) != bool(secret_key):
            raise SourceOptionError("options 'accessKey' and 'secretKey' go together")
        return cls(
            namesrv=namesrv,
            topics=topics,
            topic_pattern=pattern,
            start_ms=start_ms,
            end_ms=end_ms,
            start_offsets=parse_offsets("startOffsets", opts.get("startoffsets", EARLIEST)),
            end_offsets=parse_offsets("endOffsets", opts.get("endoffsets", LATEST)),
            max_per_partition=parse_int("maxMessagesPerPartition", opts, DEFAULT_MAX_PER_PARTITION, 1),
            include_body=parse_bool("includeBody", opts.get("includebody")),
            include_system_topics=parse_bool("includeSystemTopics", opts.get("includesystemtopics")),
            access_key=access_key,
            secret_key=secret_key,
            tls_enable=parse_bool("tlsEnable", opts.get("tlsenable")),
            tls_trust_cert_path=opts.get("tlstrustcertpath", ""),
            tls_cert_path=opts.get("tlscertpath", ""),
            tls_key_path=opts.get("tlskeypath", ""),
            timeout_s=float(parse_int("timeoutSeconds", opts, 10, 1)),
            pipeline_depth=parse_int("pipelineDepth", opts, 8, 1),
        )


def parse_time(name: str, value: str | None) -> int | None:
    """Epoch milliseconds from ``value``: digits (ms) or ISO 8601 (naive means UTC)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SourceOptionError(
            f"option '{name}' = {value!r} is neither epoch milliseconds nor an ISO 8601 time"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def parse_offsets(name: str, value: str) -> str | QueueOffsets:
    """``earliest``, ``latest`` or ``{"topic": {"broker:queueId": offset}}``."""
    text = value.strip()
    if text.lower() in (EARLIEST, LATEST):
        return text.lower()
    try:
        parsed = json.loads(text)
    except ValueError:
        raise SourceOptionError(
            f"option '{name}' = {value!r}: use earliest, latest or JSON like "
            '{"Orders": {"broker-a:0": 120}}'
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise SourceOptionError(f"option '{name}': JSON must map topics to {{\"broker:queueId\": offset}}")
    out: QueueOffsets = {}
    for topic, queues in parsed.items():
        out[topic] = {}
        for key, offset in queues.items():
            broker, sep, queue_id = str(key).rpartition(":")
            if not sep or not broker or not queue_id.isdigit():
                raise SourceOptionError(f"option '{name}': queue key {key!r} is not 'broker:queueId'")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise SourceOptionError(
                    f"option '{name}': offset of {topic} {key} must be a whole number >= 0"
                )
            out[topic][key] = offset
    return out


def parse_bool(name: str, value: str | None) -> bool:
    if value is None:
        return False
    text = value.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    raise SourceOptionError(f"option '{name}' = {value!r} is not true or false")


def parse_int(name: str, opts: Mapping[str, str], default: int, minimum: int) -> int:
    value = opts.get(name.lower())
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise SourceOptionError(f"option '{name}' = {value!r} is not a whole number") from None
    if number < minimum:
        raise SourceOptionError(f"option '{name}' = {number} must be at least {minimum}")
    return number
