"""Queue locks for orderly consumers (``broker_core.broker.locks``)."""

from __future__ import annotations

from broker_core.broker.locks import RebalanceLockManager

Q0, Q1 = ("T", "broker-a", 0), ("T", "broker-a", 1)


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def __call__(self) -> int:
        return self.ms


def test_it_gives_a_queue_to_one_client_of_a_group_at_a_time() -> None:
    locks = RebalanceLockManager(Clock())
    assert locks.try_lock("g", [Q0, Q1], "alice") == [Q0, Q1]
    assert locks.try_lock("g", [Q0, Q1], "bob") == []
    assert locks.try_lock("other-group", [Q0], "bob") == [Q0]  # groups are independent
    locks.unlock("g", [Q1], "bob")  # not bob's: nothing happens
    assert locks.holder("g", Q1) == "alice"
    locks.unlock("g", [Q1], "alice")
    assert locks.try_lock("g", [Q0, Q1], "bob") == [Q1]


def test_it_lets_a_lock_that_was_not_renewed_expire() -> None:
    clock = Clock()
    locks = RebalanceLockManager(clock, max_live_ms=60_000)
    locks.try_lock("g", [Q0], "alice")
    clock.ms = 50_000
    assert locks.try_lock("g", [Q0], "alice") == [Q0]  # renewed
    clock.ms = 100_000
    assert locks.try_lock("g", [Q0], "bob") == []
    clock.ms = 111_000
    assert locks.holder("g", Q0) is None
    assert locks.try_lock("g", [Q0], "bob") == [Q0]
