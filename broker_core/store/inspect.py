"""A read-only look at a store's files: what ``store check`` prints, changing nothing.

``inspect_store`` opens every file read-only, takes the geometry from the store
(``broker_core.store.geometry``), and walks the commit log record by record as recovery
would: valid records, damaged ranges (recorded ones and ones found now), a torn tail, and
each record against the consume-queue entry written for it (size and tag hash, which is
how damaged properties show, as the body CRC does not cover them).  Consume queues are
checked for entries past the log's end and spot-checked for pointing at their own
records.  Repairs are ``MessageStore.open``'s job (``store check --repair``).
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from broker_core.config import StoreConfig
from broker_core.model.message import BLANK, check_record
from broker_core.store.consumequeue import BLANK_ENTRY_SIZE, CQ_STORE_UNIT_SIZE
from broker_core.store.damage import DAMAGE_FILE, DamagedRange, DamageLog, find_next_record
from broker_core.store.dispatcher import queue_tags_code
from broker_core.store.geometry import GEOMETRY_FILE, StoreGeometry, resolve_geometry

_ENTRY = struct.Struct(">qiq")


@dataclass
class StoreReport:
    """What ``inspect_store`` found; ``problems`` is empty for a healthy store."""

    root: Path
    geometry: StoreGeometry | None = None
    geometry_source: str = ""
    unclean_stop: bool = False
    segments: int = 0
    min_offset: int = 0
    end_offset: int = 0
    records: int = 0
    scanned_from: int = 0
    recorded_damage: list[DamagedRange] = field(default_factory=list)
    new_damage: list[DamagedRange] = field(default_factory=list)
    torn_tail_at: int | None = None
    queues: int = 0
    topics: int = 0
    entries: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@contextmanager
def _read_only_map(path: Path) -> Iterator[mmap.mmap | bytes]:
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            yield b""
            return
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        try:
            yield mm
        finally:
            mm.close()
    finally:
        os.close(fd)


class _QueueEntries:
    """Consume-queue entries read on demand, for comparing records with their entries."""

    def __init__(self, root: Path, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self._files: dict[tuple[str, int, int], bytes] = {}

    def get(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None:
        pos = offset * CQ_STORE_UNIT_SIZE
        start = pos - pos % self.file_size
        key = (topic, queue_id, start)
        raw = self._files.get(key)
        if raw is None:
            path = self.root / topic / str(queue_id) / f"{start:020d}"
            try:
                raw = path.read_bytes()
            except OSError:
                raw = b""
            self._files[key] = raw
        rel = pos - start
        if rel + CQ_STORE_UNIT_SIZE > len(raw):
            return None
        entry = _ENTRY.unpack_from(raw, rel)
        return None if entry[1] in (0, BLANK_ENTRY_SIZE) else entry


def inspect_store(root: Path, *, tail_segments: int | None = None) -> StoreReport:
    """Examine the store at ``root`` without writing to it.

    ``tail_segments`` limits the commit-log walk to the last N segments (the region a
    restart recovers); None walks all of them.
    """
    report = StoreReport(root)
    if not (root / "commitlog").is_dir():
        report.notes.append("no store here yet: the broker creates it at its first start")
        return report
    config, geometry = resolve_geometry(StoreConfig(str(root)), adopt=True)
    report.geometry = geometry
    report.geometry_source = "recorded" if (root / GEOMETRY_FILE).exists() else "inferred from the files"
    report.unclean_stop = (root / "abort").exists()
    damage = DamageLog(root)
    report.problems += damage.load()
    report.recorded_damage = list(damage.ranges)
    _walk_commit_log(report, config, damage, tail_segments)
    _check_queues(report, config)
    return report


def _walk_commit_log(
    report: StoreReport, config: StoreConfig, damage: DamageLog, tail_segments: int | None
) -> None:
    size = config.mapped_file_size_commit_log
    directory = config.root / "commitlog"
    names = sorted(
        p.name for p in directory.iterdir() if p.is_file() and len(p.name) == 20 and p.name.isdigit()
    )
    report.segments = len(names)
    if not names:
        return
    report.min_offset = int(names[0])
    for name in names:
        actual = (directory / name).stat().st_size
        if actual > size:
            report.problems.append(f"commitlog/{name} is {actual} bytes, more than the segment size {size}")
    walk = names if tail_segments is None else names[-tail_segments:]
    report.scanned_from = int(walk[0])
    entries = _QueueEntries(config.root / "consumequeue", config.mapped_file_size_consume_queue)
    delays = config.delay_levels_ms
    end = int(walk[0])
    pending: tuple[int, str] | None = None  # a bad record awaiting the next valid one
    for name in walk:
        base = int(name)
        with _read_only_map(directory / name) as buf:
            limit = min(size, len(buf))
            pos = 0
            if pending is not None:
                found = find_next_record(buf, base, 0, limit)
                if found < 0:
                    continue
                _note_damage(report, damage, pending[0], base + found, pending[1])
                pending, pos = None, found
            while pos < limit:
                length, req = check_record(buf, pos, limit)
                if length > 0 and req is not None and req.commit_log_offset == base + pos:
                    entry = entries.get(req.topic, req.queue_id, req.queue_offset)
                    if (
                        entry is not None
                        and entry[0] == req.commit_log_offset
                        and (entry[1] != req.msg_size or entry[2] != queue_tags_code(req, delays))
                    ):
                        why = "record: differs from its consume-queue entry (size or tag hash)"
                        _note_damage(report, damage, base + pos, base + pos + length, why)
                    else:
                        report.records += 1
                    pos += length
                    end = base + pos
                    continue
                if length == BLANK:
                    end = base + size
                    break
                found = find_next_record(buf, base, pos + 1, limit)
                if found < 0:
                    if any(buf[pos : min(pos + 64, limit)]):
                        pending = (base + pos, "no valid record here")
                    else:
                        pending = (base + pos, "")
                    break
                _note_damage(report, damage, base + pos, base + found, "no valid record here")
                pos = found
                end = base + pos
    if pending is not None and pending[1]:
        report.torn_tail_at = pending[0]
        report.notes.append(
            f"torn tail after offset {pending[0]}: bytes that are not a complete record; "
            "the broker cuts them at its next start (or store check --repair)"
        )
    report.end_offset = end


def _note_damage(report: StoreReport, damage: DamageLog, start: int, end: int, why: str) -> None:
    if damage.contains(start):
        return
    damaged = DamagedRange(start, end, why or "no valid record here", 0)
    report.new_damage.append(damaged)
    report.problems.append(
        f"damaged range {damaged.describe()} is not on record: store check --repair records it "
        "(a broker start does too when it lies in the newest segments, which recovery walks)"
    )


def _check_queues(report: StoreReport, config: StoreConfig) -> None:
    root = config.root / "consumequeue"
    if not root.is_dir():
        return
    topics = set()
    for queue_dir in sorted(p for p in root.glob("*/*") if p.is_dir()):
        topics.add(queue_dir.parent.name)
        report.queues += 1
        name = f"consume queue {queue_dir.parent.name}-{queue_dir.name}"
        for path in sorted(queue_dir.iterdir()):
            raw = path.read_bytes()
            if len(raw) != config.mapped_file_size_consume_queue:
                report.problems.append(
                    f"{name}: {path.name} is {len(raw)} bytes, not {config.mapped_file_size_consume_queue}"
                )
            past_end = 0
            for phys, size, _tag in _ENTRY.iter_unpack(raw[: len(raw) - len(raw) % CQ_STORE_UNIT_SIZE]):
                if size in (0, BLANK_ENTRY_SIZE):
                    continue
                report.entries += 1
                if phys + size > report.end_offset and report.scanned_from <= phys:
                    past_end += 1
            if past_end:
                report.notes.append(
                    f"{name}: {past_end} entr(ies) in {path.name} point past the commit log's end; "
                    "the broker trims them at its next start"
                )
    report.topics = len(topics)


def describe(report: StoreReport) -> list[str]:
    """The report as the lines ``store check`` prints."""
    lines = [f"store: {report.root}"]
    geometry = report.geometry
    if geometry is not None:
        lines.append(
            f"  geometry ({report.geometry_source}): commit-log segments of "
            f"{geometry.mapped_file_size_commit_log} bytes, consume-queue files of "
            f"{geometry.mapped_file_size_consume_queue} bytes, index of {geometry.max_hash_slot_num} "
            f"slots x {geometry.max_index_num} entries"
        )
    stop = "unclean (the broker recovers it at its next start)" if report.unclean_stop else "clean"
    lines.append(f"  last stop: {stop}")
    walked = "" if report.scanned_from == report.min_offset else f", walked from {report.scanned_from}"
    lines.append(
        f"  commit log: {report.segments} segment(s), offsets [{report.min_offset}, {report.end_offset}), "
        f"{report.records} valid record(s){walked}"
    )
    lines.append(
        f"  consume queues: {report.topics} topic(s), {report.queues} queue(s), {report.entries} entries"
    )
    lines.append(f"  damaged ranges on record ({DAMAGE_FILE}): {len(report.recorded_damage)}")
    for damaged in report.recorded_damage:
        lines.append(f"    {damaged.describe()}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    for problem in report.problems:
        lines.append(f"  PROBLEM: {problem}")
    if report.problems:
        lines.append(f"  check: {len(report.problems)} problem(s)")
    elif report.recorded_damage:
        lost = sum(r.size for r in report.recorded_damage)
        lines.append(f"  check: ok, but {lost} bytes of damaged records are on record as lost (above)")
    else:
        lines.append("  check: ok")
    return lines
