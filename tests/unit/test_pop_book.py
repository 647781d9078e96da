"""The pop books (what a group has in flight per queue) and their journal on disk."""

from __future__ import annotations

from pathlib import Path

from broker_core.broker.pop.book import AckOutcome, InFlight, QueueBook
from broker_core.broker.pop.journal import PopJournal
from broker_core.model.receipt import ReceiptHandle, ReceiptHandleError


def test_acks_in_any_order_move_the_base_over_finished_offsets_only() -> None:
    book = QueueBook(base=10)
    for offset in (10, 11, 12):
        book.hand_out(offset, pop_time=1_000, invisible_ms=500, attempt=1)
    assert book.ack(11, 1_000) == AckOutcome.OK
    assert book.base == 10
    assert book.ack(10, 1_000) == AckOutcome.OK
    assert book.base == 12 and book.cursor == 13
    assert book.ack(10, 1_000) == AckOutcome.NOT_IN_FLIGHT


def test_a_message_comes_due_after_its_invisible_time_and_an_old_handle_is_stale() -> None:
    book = QueueBook(base=0)
    book.hand_out(0, pop_time=1_000, invisible_ms=500, attempt=1)
    assert book.due(1_499) == []
    assert book.due(1_500) == [0]
    book.hand_out(0, pop_time=1_600, invisible_ms=500, attempt=2)
    assert book.ack(0, 1_000) == AckOutcome.STALE
    assert book.redelivered == 1 and book.attempts() == {2: 1}


def test_changing_the_invisible_time_gives_a_new_version_and_a_new_due_time() -> None:
    book = QueueBook(base=0)
    book.hand_out(0, pop_time=1_000, invisible_ms=500, attempt=1)
    changed = book.change(0, 1_000, now_ms=1_000, invisible_ms=5_000)
    assert isinstance(changed, InFlight) and changed.pop_time == 1_001
    assert book.due(2_000) == []
    assert book.next_visible_at() == 6_001
    assert book.ack(0, 1_000) == AckOutcome.STALE
    assert book.ack(0, 1_001) == AckOutcome.OK


def test_fifo_holds_a_message_group_behind_its_message_in_flight() -> None:
    book = QueueBook(base=0)
    book.hand_out(0, 1_000, 500, 1, message_group="A")
    assert book.blocked("A") and not book.blocked("B")
    book.hold(1, "A")
    assert book.ready_held() == []
    book.ack(0, 1_000)
    assert book.ready_held() == [(1, "A")]
    book.hand_out(1, 1_100, 500, 1, message_group="A")
    assert book.held == {} and book.blocked("A")


def test_skipping_after_a_reload_keeps_what_is_in_flight() -> None:
    book = QueueBook(base=5)
    book.in_flight[5] = InFlight(visible_at=9_000, attempt=1, pop_time=1_000)
    book.rescan()
    assert not book.idle
    book.skip_to(8)  # 6 and 7 were filtered out; 5 is still in flight
    assert book.base == 5 and 5 in book.in_flight and book.finished == {6, 7}
    book.ack(5, 1_000)
    assert book.base == 8


def test_the_journal_restores_books_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    journal = PopJournal(tmp_path)
    assert journal.load() == {}
    journal.write(
        [
            {"k": "base", "g": "g", "t": "T", "q": 0, "o": 3},
            {"k": "out", "g": "g", "t": "T", "q": 0, "o": 3, "v": 9, "a": 1, "p": 4, "m": ""},
            {"k": "out", "g": "g", "t": "T", "q": 0, "o": 4, "v": 9, "a": 1, "p": 4, "m": "A"},
            {"k": "chg", "g": "g", "t": "T", "q": 0, "o": 4, "v": 99, "p": 5},
            {"k": "fin", "g": "g", "t": "T", "q": 0, "o": 3},
        ]
    )
    with open(tmp_path / "journal", "ab") as torn:
        torn.write(b'{"k": "fin", "g": "g", "t"')
    books = PopJournal(tmp_path).load()
    book = books[("g", "T", 0)]
    assert book.base == 4 and list(book.in_flight) == [4]
    assert book.in_flight[4].visible_at == 99 and book.in_flight[4].pop_time == 5
    assert book.blocked("A")
    # Compaction folds it into the snapshot and the journal starts afresh.
    again = PopJournal(tmp_path)
    again.compact(books)
    assert (tmp_path / "journal").read_bytes() == b""
    assert PopJournal(tmp_path).load()[("g", "T", 0)].in_flight[4].pop_time == 5


def test_a_receipt_handle_round_trips_and_garbage_is_refused() -> None:
    handle = ReceiptHandle("broker-a", 3, 42, 1_700_000_000_000, 30_000)
    assert ReceiptHandle.decode(handle.encode()) == handle
    for bad in ("", "1 2 3", "a b c d e broker 1 2", "1 2 3 0 0  1 2"):
        try:
            ReceiptHandle.decode(bad)
        except ReceiptHandleError:
            continue
        raise AssertionError(f"{bad!r} was accepted")
