"""Prompt dispatch: an append to a queue someone waits on is dispatched by the appending
thread, so a held pull is woken at once instead of at the dispatcher thread's next poll."""

from __future__ import annotations

import threading

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
