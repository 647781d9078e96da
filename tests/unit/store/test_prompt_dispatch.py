"""Prompt dispatch: an append to a queue someone waits on is dispatched by the appending
thread, so a held pull is woken at once instead of at the dispatcher thread's next poll."""

from __future__ import annotations

import threading
from collections.abc import Callable

from broker_core.store.store import MessageStore

from .conftest import AUDIT, ORDERS, message


def test_appends_to_a_waited_queue_are_dispatched_by_the_appending_thread(store: MessageStore) -> None:
    told: list[tuple[int, dict[tuple[str, int], int]]] = []
    store.add_arrival_listener(lambda arrived: told.append((threading.get_ident(), dict(arrived))))
    store.set_prompt_dispatch(lambda topic, queue_id: (topic, queue_id) == (ORDERS, 1))
    me = threading.get_ident()

    inline = 0
    for i in range(20):
        told.clear()
        result = store.append(message(ORDERS, 1, b"m%d" % i))
        assert result.ok
        # The dispatcher thread may, rarely, hold the drain at that instant and take it.
        if store.dispatcher.dispatched_offset >= result.wrote_offset + result.wrote_bytes:
            inline += 1
            assert (me, {(ORDERS, 1): 1}) in told
    assert inline >= 15

    # A queue nobody waits on is left to the dispatcher thread: never told on this thread.
    told.clear()
    assert store.append(message(AUDIT, 0, b"quiet")).ok
    assert store.wait_dispatched()
    assert all(ident != me for ident, arrived in told if (AUDIT, 0) in arrived)
    assert store.get_max_offset_in_queue(ORDERS, 1) == 20


def test_an_owner_loop_drains_the_tail_an_append_leaves(store: MessageStore) -> None:
    """With ``drain_soon`` set (the broker's loop), appends ask it once per drain, and the
    drain it runs dispatches them on the loop's thread, as long as no file has to be made."""
    asked: list[Callable[[], None]] = []
    store.set_drain_soon(asked.append)
    told: list[int] = []
    store.add_arrival_listener(lambda arrived: told.append(threading.get_ident()))
    me = threading.get_ident()

    # A queue's first entry needs its file made: that is left to the dispatcher thread.
    assert store.append(message(ORDERS, 0, b"first")).ok
    assert len(asked) == 1
    asked.pop()()
    assert store.wait_dispatched()
    assert told and me not in told, "a new consume-queue file was made on the loop's thread"

    on_loop = 0
    for round_ in range(10):
        told.clear()
        results = [store.append(message(ORDERS, 0, b"m%d-%d" % (round_, i))) for i in range(5)]
        assert all(r.ok for r in results)
        assert len(asked) == 1, "asked once until the asked drain runs, not once per append"
        asked.pop()()
        # (The safety-net thread may, rarely, have taken the drain in between.)
        on_loop += me in told
        assert store.wait_dispatched()
    assert on_loop >= 8
    assert store.get_max_offset_in_queue(ORDERS, 0) == 51


def test_a_loop_that_cannot_take_the_drain_leaves_it_to_the_dispatcher_thread(store: MessageStore) -> None:
    def closed_loop(drain: object) -> None:
        raise RuntimeError("Event loop is closed")

    store.set_drain_soon(closed_loop)
    for i in range(3):
        assert store.append(message(AUDIT, 1, b"q%d" % i)).ok
    # Nobody drains but the dispatcher thread's safety-net poll; the appends still land.
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue(AUDIT, 1) == 3
