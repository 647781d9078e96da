"""Who runs a broker's maintenance: the platform's passes hold a lease per job; when they
stop coming the broker runs the job on its own timer (fallback) until they come back.

Real brokers on loopback; the "platform" here is what Celery sends, QUIVER_RUN_MAINTENANCE_JOB
with driver=platform, sent through the admin client.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.admin import AdminClient
from broker_core.config import BrokerConfig
from broker_core.errors import AdminError, ConfigError
from broker_core.model.message import MessageInner, decode_record
from broker_core.testing import run_broker

TOPIC = "Later"
FAST_DELAYS = " ".join(["1s"] * 18)


async def wait_until(condition: Any, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def put_delayed(broker: BrokerController, body: bytes, level: int = 1) -> None:
    assert broker.store is not None
    assert broker.store.put_message(MessageInner(TOPIC, 0, body, {"DELAY": str(level)})).ok


def delivered(broker: BrokerController) -> int:
    assert broker.store is not None
    return broker.store.get_max_offset_in_queue(TOPIC, 0)


async def test_a_broker_alone_runs_every_job_itself_by_default(tmp_path: Path) -> None:
    async with (
        run_broker(tmp_path / "store", store={"message_delay_level": FAST_DELAYS}) as broker,
        AdminClient(None) as admin,
    ):
        assert broker.config.standalone_maintenance == "auto"
        put_delayed(broker, b"due in a second")
        await wait_until(lambda: delivered(broker) == 1, what="the broker's own delay scan")
        status = await admin.maintenance_status(broker.address)
        scan = status.jobs["delay_scan"]
        assert status.mode == "auto" and scan.driver == "broker" and scan.fallback
        assert scan.last_run is not None and scan.last_run.runner == "broker"
        assert scan.last_platform_ms is None and "delay_scan" in status.fallback_jobs


async def test_platform_passes_hold_the_lease_and_the_broker_takes_over_when_they_stop(
    tmp_path: Path,
) -> None:
    async with (
        run_broker(
            tmp_path / "store", store={"message_delay_level": FAST_DELAYS}, delay_scan_lease_millis=1500
        ) as broker,
        AdminClient(None) as admin,
    ):
        runners: list[str] = []
        original = broker.maintenance.run

        async def watched(name: str, **kwargs: Any) -> Any:
            run, outcome = await original(name, **kwargs)
            if name == "delay_scan":
                runners.append(run.runner)
            return run, outcome

        broker.maintenance.run = watched  # type: ignore[method-assign]
        await admin.run_maintenance(broker.address, "delay_scan", scheduled=True)
        runners.clear()
        put_delayed(broker, b"driven by the platform")
        # The platform's chain: a pass every 100 ms, as Celery's delay-scan chain does.
        while delivered(broker) == 0:
            await admin.run_maintenance(broker.address, "delay_scan", scheduled=True)
            await asyncio.sleep(0.1)
        assert set(runners) == {"platform"}, "the broker's timer ran while the platform drove"
        state = (await admin.maintenance_status(broker.address)).jobs["delay_scan"]
        assert (state.driver, state.fallback, state.lease_ms) == ("platform", False, 1500)

        # The platform falls silent: once its lease runs out the broker's timer takes the job over.
        await wait_until(
            lambda: broker.maintenance.lease_left("delay_scan") == 0, what="the lease to run out"
        )
        put_delayed(broker, b"delivered on fallback")
        await wait_until(lambda: delivered(broker) == 2, what="delivery on fallback")
        state = (await admin.maintenance_status(broker.address)).jobs["delay_scan"]
        assert state.driver == "broker" and state.fallback
        assert state.last_run is not None and state.last_run.runner == "broker"

        # The platform comes back: the broker stands by again.
        await admin.run_maintenance(broker.address, "delay_scan", scheduled=True)
        state = (await admin.maintenance_status(broker.address)).jobs["delay_scan"]
        assert (state.driver, state.fallback) == ("platform", False)


async def test_a_slow_platform_cannot_make_a_message_late_the_broker_rescues_it(tmp_path: Path) -> None:
    async with (
        run_broker(
            tmp_path / "store", store={"message_delay_level": FAST_DELAYS}, delay_scan_lease_millis=8000
        ) as broker,
        AdminClient(None) as admin,
    ):
        # One platform pass: its lease holds for 8 s, but no further pass comes (a starved worker).
        await admin.run_maintenance(broker.address, "delay_scan", scheduled=True)
        put_delayed(broker, b"the platform is too slow for this one")
        await wait_until(lambda: delivered(broker) == 1, what="the broker's rescue")
        state = (await admin.maintenance_status(broker.address)).jobs["delay_scan"]
        assert state.lease_left_ms > 0, "delivered only once the lease ran out"
        assert (state.driver, state.fallback) == ("platform", False)  # the lease still holds
        assert state.rescues >= 1 and state.last_run is not None and state.last_run.runner == "broker"
        assert broker.store is not None
        restored = broker.store.get_message(TOPIC, 0, 0, 1)
        late_ms = decode_record(restored.messages[0]).store_timestamp - (state.last_platform_ms or 0) - 1000
        assert late_ms < 1000  # the overdue threshold (200 ms) and a 100 ms look, not the 8 s lease


async def test_the_platform_may_ask_for_a_longer_lease_but_not_a_bad_one(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, AdminClient(None) as admin:
        await admin.run_maintenance(broker.address, "file_expiry", scheduled=True, lease_ms=900_000)
        state = (await admin.maintenance_status(broker.address)).jobs["file_expiry"]
        assert state.lease_ms == 900_000 and state.lease_left_ms > 800_000
        # Trusted for ten times the broker's own lease at most.
        await admin.run_maintenance(broker.address, "file_expiry", scheduled=True, lease_ms=3_600_000)
        state = (await admin.maintenance_status(broker.address)).jobs["file_expiry"]
        assert state.lease_ms == 10 * broker.config.file_expiry_lease_millis
        # A shorter one than broker.conf's never shortens it.
        await admin.run_maintenance(broker.address, "offset_persistence", scheduled=True, lease_ms=5)
        state = (await admin.maintenance_status(broker.address)).jobs["offset_persistence"]
        assert state.lease_ms == broker.config.offset_persistence_lease_millis
        for bad in (0, -1, 10 * 24 * 3_600_000):
            with pytest.raises(AdminError, match="leaseMillis must be"):
                await admin.run_maintenance(broker.address, "delay_scan", scheduled=True, lease_ms=bad)


async def test_false_leaves_the_jobs_to_the_platform_and_true_always_runs_them(tmp_path: Path) -> None:
    async with (
        run_broker(
            tmp_path / "off", store={"message_delay_level": FAST_DELAYS}, standalone_maintenance="false"
        ) as off,
        run_broker(
            tmp_path / "on", store={"message_delay_level": FAST_DELAYS}, standalone_maintenance=True
        ) as on,
        AdminClient(None) as admin,
    ):
        put_delayed(off, b"waits for the platform")
        put_delayed(on, b"the broker's own")
        await wait_until(lambda: delivered(on) == 1, what="the always-on timer")
        await asyncio.sleep(1.5)  # due by now: nothing but a request delivers it
        assert delivered(off) == 0
        assert (await admin.maintenance_status(off.address)).jobs["delay_scan"].driver == "none"
        await admin.run_maintenance(off.address, "delay_scan", scheduled=True)
        await wait_until(lambda: delivered(off) == 1, what="delivery by the platform's pass")

        await admin.run_maintenance(on.address, "delay_scan", scheduled=True)
        state = (await admin.maintenance_status(on.address)).jobs["delay_scan"]
        assert state.driver == "broker" and not state.fallback  # true: the broker's, whoever else asks


async def test_a_job_never_runs_twice_at_once_whoever_drives_it(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, AdminClient(None) as admin:
        assert broker.store is not None
        store = broker.store
        original = store.persist_offsets
        active, most = 0, 0
        guard = threading.Lock()

        def slow_persist() -> Any:
            nonlocal active, most
            with guard:
                active += 1
                most = max(most, active)
            time.sleep(0.05)
            try:
                return original()
            finally:
                with guard:
                    active -= 1

        store.persist_offsets = slow_persist  # type: ignore[method-assign]
        calls = [
            admin.run_maintenance(broker.address, "offset_persistence", scheduled=i % 2 == 0)
            for i in range(8)
        ]
        own = [broker.maintenance.run("offset_persistence", runner="broker") for _ in range(4)]
        await asyncio.gather(*calls, *own)
        assert most == 1


def test_the_mode_and_leases_are_checked_at_start() -> None:
    assert BrokerConfig(standalone_maintenance="TRUE").standalone_maintenance == "true"
    assert BrokerConfig(standalone_maintenance=False).standalone_maintenance == "false"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="standaloneMaintenance must be auto, true or false"):
        BrokerConfig(standalone_maintenance="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="delayScanLeaseMillis must be positive"):
        BrokerConfig(delay_scan_lease_millis=0)
