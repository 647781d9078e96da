"""The broker's traffic counters: totals, per-second rates, day roll-over."""

from __future__ import annotations

from datetime import date

from broker_core.broker.stats import WINDOW_S, BrokerStats, RateCounter


def test_rate_counts_whole_past_seconds_only() -> None:
    counter = RateCounter()
    counter.add(10, now_s=100)
    counter.add(30, now_s=101)
    assert counter.rate(10, now_s=101) == 1.0  # second 101 is still open
    assert counter.rate(2, now_s=102) == 20.0
    assert counter.rate(1, now_s=105) == 0.0
    assert counter.total == 40


def test_old_buckets_are_forgotten_after_the_window() -> None:
    counter = RateCounter()
    counter.add(600, now_s=5)
    assert counter.rate(600, now_s=6) == 1.0
    assert counter.rate(600, now_s=5 + WINDOW_S + 1) == 0.0
    counter.add(5, now_s=5 + 2 * WINDOW_S)
    assert counter.rate(1, now_s=6 + 2 * WINDOW_S) == 5.0


def test_puts_are_counted_per_topic_and_gets_per_group() -> None:
    clock = [1000.0]
    stats = BrokerStats(monotonic_s=lambda: clock[0])
    stats.on_arrival({("T", 0): 3, ("U", 1): 2})
    stats.on_arrival({("T", 1): 0})  # nothing new there
    stats.record_get("g", "T", 4)
    stats.record_get("h", "T", 1)
    clock[0] += 1
    assert stats.puts.total == 5 and stats.topic_puts["T"].total == 3
    assert stats.put_tps("U", seconds=1) == 2.0
    assert stats.get_tps("g", seconds=1) == 4.0 and stats.get_tps(seconds=1) == 5.0
    assert stats.get_tps("g", "other", seconds=1) == 0.0
    stats.forget_topic("T")
    assert "T" not in stats.topic_puts


def test_the_day_rolls_over_when_asked_on_a_new_day() -> None:
    day = [date(2026, 1, 1)]
    stats = BrokerStats(monotonic_s=lambda: 0.0, today=lambda: day[0])
    stats.on_arrival({("T", 0): 7})
    stats.roll_day()
    assert stats.put_total_today_morning == 0  # the same day: nothing moves
    day[0] = date(2026, 1, 2)
    stats.roll_day()
    stats.on_arrival({("T", 0): 2})
    assert stats.put_total_today_morning == 7 and stats.puts.total == 9
    day[0] = date(2026, 1, 3)
    stats.roll_day()
    assert stats.put_total_yesterday_morning == 7 and stats.put_total_today_morning == 9


def test_each_counter_keeps_what_it_had_counted_when_the_day_began() -> None:
    day = [date(2026, 1, 1)]
    stats = BrokerStats(monotonic_s=lambda: 0.0, today=lambda: day[0])
    stats.on_arrival({("Old", 0): 7})
    stats.record_get("g", "Old", 3)
    totals = stats.totals()
    assert totals.puts == {"Old": 7} and totals.puts_morning == {} and totals.gets_morning == {}
    day[0] = date(2026, 1, 2)
    stats.on_arrival({("Old", 0): 2, ("New", 1): 5})
    stats.record_get("g", "Old", 1)
    totals = stats.totals()  # reading rolls the day first: what came before counts as morning
    assert totals.puts == {"Old": 9, "New": 5}
    # The roll happened at the read, after the new day's traffic: the morning is the total
    # then.  The broker's housekeeping timer rolls within a minute of midnight, before most.
    assert totals.puts_morning == {"Old": 9, "New": 5} and totals.gets_morning == {("g", "Old"): 4}
    stats.forget_topic("Old")
    assert "Old" not in stats.totals().puts_morning
