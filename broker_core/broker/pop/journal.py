"""Pop state on disk: a snapshot plus a journal of changes since it (``<store>/pop/``).

Every change to a ``QueueBook`` that a restart must keep is appended to ``journal`` as one
JSON line before the broker answers the request that made it:

- ``{"k": "out", "g", "t", "q", "o", "v", "a", "p", "m"}``: offset o handed out at pop
  time p, visible again at v, attempt a, FIFO message group m;
- ``{"k": "chg", "g", "t", "q", "o", "v", "p"}``: its invisible time changed (new v and p);
- ``{"k": "fin", "g", "t", "q", "o"}``: finished (acked or dead-lettered);
- ``{"k": "base", "g", "t", "q", "o"}``: the book starts over at o (a new book, a reset).

Lines are written with one ``os.write`` each batch, so a killed broker loses none the OS
accepted; a torn last line (power loss) is ignored at load.  When the journal grows past
``COMPACT_LINES`` it is folded into ``snapshot.json`` (written to a temporary file and
renamed, then the journal truncated), and again at a clean close.

What the files restore is the books' durable part: base, finished offsets above it and
the messages in flight.  The cursor and the FIFO held queues are derived again by
scanning from base (``QueueBook.rescan``), so nothing un-acked is lost and nothing acked
comes back.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from broker_core.broker.pop.book import InFlight, QueueBook

log = logging.getLogger(__name__)

BookKey = tuple[str, str, int]  # (group, topic, queue id)

COMPACT_LINES = 50_000


class PopJournal:
    """The snapshot and journal under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.snapshot_path = directory / "snapshot.json"
        self.journal_path = directory / "journal"
        self._fd: int | None = None
        self.lines = 0
        self._compact_at = COMPACT_LINES

    # -- loading ---------------------------------------------------------------------------

    def load(self) -> dict[BookKey, QueueBook]:
        """The books as the files left them (empty when there are none)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        books: dict[BookKey, QueueBook] = {}
        if self.snapshot_path.exists():
            try:
                snapshot = orjson.loads(self.snapshot_path.read_bytes())
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{self.snapshot_path} is not valid JSON: {exc}") from exc
            for row in snapshot.get("books", []):
                book = QueueBook(base=int(row["base"]))
                book.finished.update(int(o) for o in row.get("finished", []))
                for offset, visible_at, attempt, pop_time, group in row.get("inFlight", []):
                    book.in_flight[int(offset)] = InFlight(
                        int(visible_at), int(attempt), int(pop_time), str(group)
                    )
                books[(row["group"], row["topic"], int(row["queueId"]))] = book
        if self.journal_path.exists():
            data = self.journal_path.read_bytes()
            for number, line in enumerate(data.split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    self._replay(books, orjson.loads(line))
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    log.warning("pop journal line %d ignored (%s): %r", number, exc, line[:200])
                self.lines += 1
        for book in books.values():
            for offset in [o for o in book.finished if o < book.base]:
                book.finished.discard(offset)
            book.rescan()
        return books

    @staticmethod
    def _replay(books: dict[BookKey, QueueBook], rec: dict[str, Any]) -> None:
        key = (str(rec["g"]), str(rec["t"]), int(rec["q"]))
        kind = rec["k"]
        offset = int(rec["o"])
        if kind == "base":
            books[key] = QueueBook(base=offset)
            return
        book = books.get(key)
        if book is None:
            book = books[key] = QueueBook(base=0)
        if kind == "out":
            book.in_flight[offset] = InFlight(
                int(rec["v"]), int(rec["a"]), int(rec["p"]), str(rec.get("m", ""))
            )
        elif kind == "chg":
            entry = book.in_flight.get(offset)
            if entry is not None:
                entry.visible_at, entry.pop_time = int(rec["v"]), int(rec["p"])
        elif kind == "fin":
            book.in_flight.pop(offset, None)
            if offset >= book.base:
                book.finished.add(offset)
                while book.base in book.finished:
                    book.finished.discard(book.base)
                    book.base += 1

    # -- writing ---------------------------------------------------------------------------

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        """Append change records (one write for the batch)."""
        data = b"".join(orjson.dumps(rec) + b"\n" for rec in records)
        if not data:
            return
        if self._fd is None:
            self._fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, data)
        self.lines += data.count(b"\n")

    def due_for_compaction(self) -> bool:
        return self.lines >= self._compact_at

    def compact(self, books: dict[BookKey, QueueBook]) -> bool:
        """Fold the journal into a new snapshot of ``books`` and start the journal afresh.

        On a disk that refuses (full, read-only) the journal is kept as it is, still whole,
        and the next try waits for another ``COMPACT_LINES`` lines; False then.
        """
        try:
            self._compact(books)
        except OSError as exc:
            log.warning("pop state not compacted (the journal is kept): %s", exc)
            self._compact_at = self.lines + COMPACT_LINES
            return False
        self._compact_at = COMPACT_LINES
        return True

    def _compact(self, books: dict[BookKey, QueueBook]) -> None:
        rows = [
            {
                "group": group,
                "topic": topic,
                "queueId": queue_id,
                "base": book.base,
                "finished": sorted(book.finished),
                "inFlight": [
                    [offset, e.visible_at, e.attempt, e.pop_time, e.message_group]
                    for offset, e in sorted(book.in_flight.items())
                ],
            }
            for (group, topic, queue_id), book in books.items()
        ]
        tmp = self.snapshot_path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            out.write(orjson.dumps({"books": rows}))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.snapshot_path)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        with open(self.journal_path, "wb"):
            pass
        self.lines = 0

    def close(self, books: dict[BookKey, QueueBook]) -> None:
        self.compact(books)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
