"""Damaged ranges of the commit log: where records failed their checks, kept on record.

Recovery does not treat a bad record as the end of the log: it finds the next valid record
(``find_next_record``) and goes on from there, so one flipped byte costs the records it
touches, not everything written after them.  Each range it skips is logged at ERROR and
recorded in ``<root>/damaged.json``, which ``store check``, the broker's runtime info and
the console show; consume-queue entries and index hits inside a range are never served.

Resynchronising relies on two facts of the record format (``broker_core.model.message``):
MAGICCODE sits at byte 4 of every record, and PHYSICALOFFSET (byte 28) holds the record's
own commit-log offset.  A candidate whose magic is right, whose PHYSICALOFFSET names its own
position and which passes every check of ``check_record`` (sizes, layout, body CRC) is a
record; stray bytes that look like one by chance are vanishingly unlikely.
"""

from __future__ import annotations

import bisect
import json
import logging
import mmap
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from broker_core.model.message import MESSAGE_MAGIC_CODE, check_record

log = logging.getLogger(__name__)

DAMAGE_FILE = "damaged.json"
_MAGIC = MESSAGE_MAGIC_CODE.to_bytes(4, "big")
_PHYS_POS = 28  # PHYSICALOFFSET's byte offset in a record


@dataclass(frozen=True)
class DamagedRange:
    """Bytes ``[start, end)`` of the commit log that held no valid record."""

    start: int
    end: int
    reason: str
    found_ms: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        return f"[{self.start}, {self.end}) ({self.size} bytes): {self.reason}"


def find_next_record(
    buf: bytes | bytearray | mmap.mmap,
    base: int,
    start: int,
    limit: int,
    search_end: int | None = None,
) -> int:
    """File-relative position of the first valid record starting in ``[start, search_end)``;
    -1 if none.

    ``buf`` is one segment's bytes (an mmap works), ``base`` its first byte's commit-log
    offset and ``limit`` where its bytes end (``search_end`` defaults to it).
    """
    find = buf.find
    end = limit if search_end is None else min(search_end, limit)
    at = start + 4
    while True:
        hit = find(_MAGIC, at, end + 4)
        if hit < 0:
            return -1
        candidate = hit - 4
        at = hit + 1
        if candidate < start or candidate + _PHYS_POS + 8 > limit:
            continue
        phys = int.from_bytes(buf[candidate + _PHYS_POS : candidate + _PHYS_POS + 8], "big")
        if phys != base + candidate:
            continue
        size, _request = check_record(buf, candidate, limit)
        if size > 0:
            return candidate


class DamageLog:
    """The recorded damaged ranges of one store, sorted by start; persisted on change."""

    def __init__(self, root: Path) -> None:
        self.path = root / DAMAGE_FILE
        self._lock = threading.Lock()
        self.ranges: list[DamagedRange] = []
        self._starts: list[int] = []

    def load(self) -> list[str]:
        """Read the recorded ranges; problems with the file are returned, not raised."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            items = json.loads(raw)["ranges"]
            ranges = [
                DamagedRange(int(i["start"]), int(i["end"]), str(i["reason"]), int(i["found_ms"]))
                for i in items
            ]
        except (ValueError, KeyError, TypeError) as exc:
            return [f"{self.path}: unreadable ({exc}); damaged ranges recorded earlier are not known"]
        self._set(ranges)
        return []

    def _set(self, ranges: Iterable[DamagedRange]) -> None:
        self.ranges = sorted(ranges, key=lambda r: r.start)
        self._starts = [r.start for r in self.ranges]

    def add(self, found: Iterable[DamagedRange]) -> list[DamagedRange]:
        """Record ``found`` (ranges already on record are kept as they were); return the new ones."""
        with self._lock:
            known = {r.start for r in self.ranges}
            new = [r for r in found if r.start not in known]
            if new:
                self._set([*self.ranges, *new])
                self._save()
            return new

    def forget_below(self, offset: int) -> None:
        """Drop ranges wholly below ``offset`` (their segments were deleted by expiry)."""
        with self._lock:
            kept = [r for r in self.ranges if r.end > offset]
            if len(kept) != len(self.ranges):
                self._set(kept)
                self._save()

    def contains(self, offset: int) -> bool:
        """True when commit-log ``offset`` lies inside a recorded range."""
        starts = self._starts
        if not starts:
            return False
        index = bisect.bisect_right(starts, offset) - 1
        return index >= 0 and offset < self.ranges[index].end

    def _save(self) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = {"ranges": [asdict(r) for r in self.ranges]}
        try:
            with open(tmp, "wb") as f:
                f.write(json.dumps(data, indent=2).encode() + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as exc:  # the ranges stay known in memory and are logged
            log.error("cannot record damaged ranges in %s: %s", self.path, exc)
