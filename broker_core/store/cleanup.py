"""File expiry: when to delete old commit-log segments, and the disk-space guard.

RocketMQ's rules (``CleanCommitLogService``): segments older than ``fileReservedTime``
hours are deleted at the ``deleteWhen`` hour, or at any time once disk use passes
``diskMaxUsedSpaceRatio``; past ``diskSpaceCleanForciblyRatio`` the oldest segments go even
before they expire; past ``diskSpaceWarningLevelRatio`` the store refuses writes until
space returns.  Consume-queue and index files wholly below the commit log's new minimum
offset follow the segments they describe.

This module decides; ``MessageStore.delete_expired_files`` carries it out.  Expiry is
RocketMQ's design, but it deletes messages whether or not they were consumed, so a run
never deletes quietly: its ``ExpiryReport`` says what went (segments, commit-log offsets,
messages per topic) and which groups had not consumed them yet, and the store logs that
line at WARNING for every run that deleted anything.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.config import StoreConfig


def disk_used_ratio(path: Path) -> float:
    """Fraction of the space usable on ``path``'s file system that is in use (0.0 - 1.0).

    Computed as ``df`` does, used / (used + available): blocks reserved for root count as
    neither, since the store cannot use them.
    """
    usage = shutil.disk_usage(path)
    usable = usage.used + usage.free
    if usable <= 0:
        return 0.0
    return usage.used / usable


def is_delete_hour(config: StoreConfig, now_ms: int) -> bool:
    """True when the local hour of ``now_ms`` is one of ``deleteWhen``'s hours."""
    hour = dt.datetime.fromtimestamp(now_ms / 1000).hour
    return any(int(h) == hour for h in config.delete_when.split(";") if h.strip())


@dataclass(frozen=True)
class ExpiryDecision:
    """Whether to delete, and how hard."""

    run: bool
    force: bool
    reason: str


def decide_expiry(config: StoreConfig, now_ms: int, used_ratio: float, *, manual: bool) -> ExpiryDecision:
    """Apply RocketMQ's expiry triggers to the clock and the disk-use ratio.

    The reason names every trigger that holds (a run in the deleteWhen hour on a full disk
    says both), so an operator reading it learns why files went, not just the first rule.
    """
    reasons = []
    force = used_ratio > config.disk_space_clean_forcibly_ratio
    if force:
        reasons.append(f"disk {used_ratio:.0%} used, above the forced-clean ratio")
    elif used_ratio * 100 > config.disk_max_used_space_ratio:
        reasons.append(f"disk {used_ratio:.0%} used, above diskMaxUsedSpaceRatio")
    if manual:
        reasons.append("requested")
    if is_delete_hour(config, now_ms):
        reasons.append(f"deleteWhen hour ({config.delete_when})")
    if not reasons:
        return ExpiryDecision(False, False, "not the deleteWhen hour and the disk has room")
    return ExpiryDecision(True, force, "; ".join(reasons))


@dataclass
class UnconsumedDeletion:
    """Messages of one topic that one consumer group had not consumed when expiry deleted them."""

    group: str
    topic: str
    messages: int
    queues: int  # how many of the topic's queues lost some


@dataclass
class ExpiryReport:
    """What one expiry run did (returned to callers; the Celery job records it).

    Beyond the file counts it says what went: the commit-log segments by name, the
    commit-log offsets ``[deleted_from_offset, deleted_to_offset)`` they held, the messages
    deleted per topic (each consume queue's minimum offset, before and after) and, per
    group and topic, the messages a group had not consumed yet (its committed offset was
    below the queue's new minimum).
    """

    ran: bool
    reason: str
    disk_used_ratio: float
    commit_log_files_deleted: int = 0
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    commit_log_min_offset: int = 0
    errors: list[str] = field(default_factory=list)
    segments_deleted: list[str] = field(default_factory=list)
    deleted_from_offset: int = 0
    deleted_to_offset: int = 0
    messages_deleted: dict[str, int] = field(default_factory=dict)  # topic -> messages
    unconsumed: list[UnconsumedDeletion] = field(default_factory=list)

    @property
    def deleted_anything(self) -> bool:
        return bool(
            self.commit_log_files_deleted
            or self.consume_queue_files_deleted
            or self.index_files_deleted
            or self.messages_deleted
        )

    @property
    def messages_deleted_total(self) -> int:
        return sum(self.messages_deleted.values())

    @property
    def unconsumed_total(self) -> int:
        return sum(u.messages for u in self.unconsumed)

    def describe(self) -> str:
        """One line saying what went and whose unconsumed messages went with it."""
        parts = [f"expiry ({self.reason}) deleted {self.commit_log_files_deleted} commit-log segment(s)"]
        if self.segments_deleted:
            parts[0] += f" [{', '.join(self.segments_deleted)}]"
        if self.deleted_to_offset > self.deleted_from_offset:
            parts.append(f"commit-log offsets {self.deleted_from_offset}..{self.deleted_to_offset}")
        topics = ", ".join(f"{topic} {n}" for topic, n in sorted(self.messages_deleted.items()))
        parts.append(f"{self.messages_deleted_total} message(s)" + (f" ({topics})" if topics else ""))
        parts.append(
            f"{self.consume_queue_files_deleted} consume-queue and {self.index_files_deleted} index file(s)"
        )
        if self.unconsumed:
            lost = ", ".join(
                f"{u.group} {u.messages} of {u.topic}"
                for u in sorted(self.unconsumed, key=lambda u: (u.group, u.topic))
            )
            parts.append(f"NOT YET CONSUMED by: {lost}")
        else:
            parts.append("every group with offsets had consumed them")
        return "; ".join(parts)


def tally_deletions(
    moved: Mapping[tuple[str, int], tuple[int, int]],
    offset_table: Mapping[str, Mapping[int, int]],
) -> tuple[dict[str, int], list[UnconsumedDeletion]]:
    """Messages deleted per topic, and per (group, topic) those the group had not consumed.

    ``moved`` maps (topic, queue id) to the queue's minimum offset before and after the
    run; ``offset_table`` is the consumer offsets (``topic@group`` -> queue id -> next
    offset to consume).  A group counts for a topic when it has committed an offset in it:
    on a queue where its offset is below the new minimum it lost the messages from
    ``max(offset, old minimum)`` up to the new minimum; a queue of the topic where it
    never committed lost every message deleted there (it had consumed none of them).
    """
    by_topic: dict[str, int] = {}
    ranges: dict[str, list[tuple[int, int, int]]] = {}  # topic -> (queue id, old, new)
    for (topic, qid), (old, new) in moved.items():
        if new > old:
            by_topic[topic] = by_topic.get(topic, 0) + new - old
            ranges.setdefault(topic, []).append((qid, old, new))
    lost: dict[tuple[str, str], list[int]] = {}
    for key, queues in offset_table.items():
        topic, sep, group = key.partition("@")
        if not sep or "@" in group or topic not in ranges:
            continue
        for qid, old, new in ranges[topic]:
            committed = queues.get(qid, old)
            gone = new - max(committed, old)
            if gone > 0:
                tally = lost.setdefault((group, topic), [0, 0])
                tally[0] += gone
                tally[1] += 1
    unconsumed = [
        UnconsumedDeletion(group, topic, messages, queue_count)
        for (group, topic), (messages, queue_count) in sorted(lost.items())
    ]
    return by_topic, unconsumed
