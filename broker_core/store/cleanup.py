"""File expiry: when to delete old commit-log segments, and the disk-space guard.

RocketMQ's rules (``CleanCommitLogService``): segments older than ``fileReservedTime``
hours are deleted at the ``deleteWhen`` hour, or at any time once disk use passes
``diskMaxUsedSpaceRatio``; past ``diskSpaceCleanForciblyRatio`` the oldest segments go even
before they expire; past ``diskSpaceWarningLevelRatio`` the store refuses writes until
space returns.  Consume-queue and index files wholly below the commit log's new minimum
offset follow the segments they describe.

This module decides; ``MessageStore.delete_expired_files`` carries it out.
"""

from __future__ import annotations

import datetime as dt
import shutil
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
class ExpiryReport:
    """What one expiry run did (returned to callers; the Celery job records it)."""

    ran: bool
    reason: str
    disk_used_ratio: float
    commit_log_files_deleted: int = 0
    consume_queue_files_deleted: int = 0
    index_files_deleted: int = 0
    commit_log_min_offset: int = 0
    errors: list[str] = field(default_factory=list)
