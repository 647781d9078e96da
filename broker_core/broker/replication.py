"""A broker's place in its broker set: a master's HA listener, or a slave's copy of its master.

A master (``brokerId = 0``) always listens on its HA port, whatever its role: a slave may
join at any time.  Under ``SYNC_MASTER`` its store makes every send wait for a slave
(``MessageStore.sync_replication``).

A slave (``brokerRole = SLAVE``) copies its master's commit log over the HA link
(``broker_core.ha.slave``) and, at start and every ``SLAVE_SYNC_SECONDS``, the master's
metadata as RocketMQ's slave synchronisation does: the topic table, the subscription
groups, the delay offsets and the consumer offsets (these merged: an offset a consumer
committed here while the master was away is kept until the master has its own).  It learns
where its master is from its registration (the nameserver answers with the master's
address and HA address) unless ``haMasterAddress`` names the HA address.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from broker_core.aio import stop_task
from broker_core.ha.master import HAMaster
from broker_core.ha.slave import HASlave
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.store.configfile import ConfigFile

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

SLAVE_SYNC_SECONDS = 10.0
SYNC_TIMEOUT_SECONDS = 5.0
# A slave whose link is down registers again this often (not only every 30 s) to learn
# where its master is now: a master started after it, or restarted on another address.
FIND_MASTER_SECONDS = 2.0


class BrokerReplication:
    """Starts and stops the broker's side of replication, and reports on it."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.config = broker.config
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        # What the nameserver said of this slave's master at the last registration.
        self.master_addr = ""
        self.master_ha_addr = ""
        self.last_sync_ms = 0
        self.sync_problem = ""
        self._sync_task: asyncio.Task[None] | None = None
        self._find_task: asyncio.Task[None] | None = None

    @property
    def is_slave(self) -> bool:
        return self.config.is_slave

    def start(self) -> None:
        store = self.broker.store
        assert store is not None
        config = self.config
        if config.is_slave:
            self.slave = HASlave(
                store,
                self._ha_master,
                heartbeat_interval_ms=config.ha_send_heartbeat_interval,
                housekeeping_interval_ms=config.ha_housekeeping_interval,
                clock_ms=self.broker.clock_ms,
            )
            self.slave.start()
            self._sync_task = asyncio.create_task(self._sync_loop(), name="slave-sync")
            self._find_task = asyncio.create_task(self._find_master_loop(), name="slave-find-master")
            return
        self.master = HAMaster(
            store,
            config.broker_ip1 or "127.0.0.1",
            config.ha_port,
            transfer_batch_size=config.ha_transfer_batch_size,
            heartbeat_interval_ms=config.ha_send_heartbeat_interval,
            housekeeping_interval_ms=config.ha_housekeeping_interval,
            max_gap_not_in_sync=config.ha_max_gap_not_in_sync,
            clock_ms=self.broker.clock_ms,
        )
        self.master.start()
        store.replication = self.master
        store.sync_replication = config.broker_role == "SYNC_MASTER"

    async def stop(self) -> None:
        await stop_task(self._sync_task)
        await stop_task(self._find_task)
        self._sync_task = self._find_task = None
        loop = asyncio.get_running_loop()
        if self.slave is not None:
            await loop.run_in_executor(None, self.slave.stop)
        if self.master is not None:
            store = self.broker.store
            if store is not None:
                store.replication = None
            await loop.run_in_executor(None, self.master.stop)

    @property
    def ha_addr(self) -> str:
        """The HA address this broker advertises (a slave's is where it would listen)."""
        if self.master is not None:
            return self.master.addr
        host = self.config.broker_ip1 or "127.0.0.1"
        return f"{host}:{self.config.ha_port}"

    def learned(self, master_addr: str, master_ha_addr: str) -> None:
        """The nameserver's answer to this slave's registration: where its master is."""
        if not self.is_slave or not master_addr:
            return
        if (master_addr, master_ha_addr) != (self.master_addr, self.master_ha_addr):
            log.info(
                "slave of %s: master at %s (HA %s)", self.config.broker_name, master_addr, master_ha_addr
            )
        self.master_addr, self.master_ha_addr = master_addr, master_ha_addr

    def _ha_master(self) -> str:
        """Where the slave's link dials (called from its thread before each connection)."""
        return self.config.ha_master_address or self.master_ha_addr

    async def _find_master_loop(self) -> None:
        while True:
            await asyncio.sleep(FIND_MASTER_SECONDS)
            registration = self.broker.registration
            if self.slave is not None and not self.slave.connected_to and registration is not None:
                await registration.register_all()

    # -- the slave's copy of its master's metadata ------------------------------------------

    async def _sync_loop(self) -> None:
        while True:
            if self.master_addr:
                try:
                    await self.sync_metadata()
                except Exception as exc:  # the master may be down: keep what we have, try again
                    if self.sync_problem != str(exc):
                        log.warning("slave sync from master %s failed: %s", self.master_addr, exc)
                    self.sync_problem = str(exc)
            await asyncio.sleep(SLAVE_SYNC_SECONDS)

    async def sync_metadata(self) -> None:
        """Copy the master's topics, groups, delay offsets and consumer offsets now."""
        broker = self.broker
        store = broker.store
        assert store is not None
        topics_changed = await self._copy(RequestCode.GET_ALL_TOPIC_CONFIG, broker.topics)
        await self._copy(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, broker.groups)
        await self._copy(RequestCode.GET_ALL_DELAY_OFFSET, store.schedule)
        offsets = await self._ask(RequestCode.GET_ALL_CONSUMER_OFFSET)
        merged = store.consumer_offsets.encode()
        merged["offsetTable"].update(offsets.get("offsetTable", {}))
        store.consumer_offsets.copy_from(merged)
        self.last_sync_ms = broker.clock_ms()
        if self.sync_problem:
            log.info("slave sync from master %s works again", self.master_addr)
        self.sync_problem = ""
        if topics_changed:
            broker.topics_changed()

    async def _copy(self, code: int, table: ConfigFile) -> bool:
        return table.copy_from(await self._ask(code))

    async def _ask(self, code: int) -> dict[str, Any]:
        request = RemotingCommand.request(code, {})
        response = await self.broker.client.invoke(self.master_addr, request, timeout=SYNC_TIMEOUT_SECONDS)
        if response.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"{RequestCode(code).name} refused ({response.code}): {response.remark}")
        answer = orjson.loads(response.body)
        if not isinstance(answer, dict):
            raise ValueError(f"{RequestCode(code).name}: the answer is not a JSON object")
        return answer

    # -- status ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS: this broker's replication, as its side sees it."""
        base = {"brokerName": self.config.broker_name, "brokerRole": self.config.broker_role}
        if self.master is not None:
            return {**base, **self.master.status().to_json()}
        assert self.slave is not None
        return {
            **base,
            **self.slave.status().to_json(),
            "masterAddr": self.master_addr,
            "lastSyncMs": self.last_sync_ms,
            "syncProblem": self.sync_problem,
        }
