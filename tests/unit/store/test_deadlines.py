"""``Deadlines``: one timer answering False for every waiter not answered within the
timeout (the store's syncFlushTimeout for asyncio writers), on a real event loop."""

from __future__ import annotations

import asyncio

from broker_core.store.deadlines import Deadlines


def test_unanswered_waiters_get_false_at_their_deadline_and_answered_ones_keep_theirs() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop, 0.05)
        answered = loop.create_future()
        late = loop.create_future()
        deadlines.add(answered)
        deadlines.add(late)
        answered.set_result(True)
        await asyncio.sleep(0.02)
        later = loop.create_future()
        deadlines.add(later)  # 20 ms after the others: its own deadline
        assert not late.done() and not later.done()
        assert await late is False
        assert not later.done(), "a waiter expired before its own deadline"
        assert await later is False
        assert answered.result() is True
        assert len(deadlines) == 0

    asyncio.run(main())


def test_answered_waiters_leave_as_new_ones_come_so_nothing_piles_up() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop, 60.0)
        for _ in range(10_000):
            future = loop.create_future()
            deadlines.add(future)
            future.set_result(True)
        assert len(deadlines) == 1  # only the last, answered since, is still held

    asyncio.run(main())


def test_a_waiter_answered_after_the_head_expired_is_untouched_and_the_timer_goes_on() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        deadlines = Deadlines(loop, 0.03)
        first = loop.create_future()
        deadlines.add(first)
        await asyncio.sleep(0.01)
        second = loop.create_future()
        deadlines.add(second)
        assert await first is False
        second.set_result(True)  # answered before its deadline
        third = loop.create_future()
        deadlines.add(third)  # added after the timer fired once: still expires
        assert await third is False
        assert second.result() is True

    asyncio.run(main())
