"""The broker process: store, topic and group tables, remoting server, nameserver registration.

Start order matters: the server binds first, so the address the broker advertises (and
writes into every record as STOREHOST, which clients send retries back to) is the real
one even when the configured port is 0 (tests); then the store opens (recovering if the
last stop was unclean) and the broker registers with its nameservers.

Request processors (send, pull, heartbeats, offsets, admin...) register on
``self.server``; this module only wires the pieces together.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker_core.aio import after_writes, stop_task
from broker_core.broker.acl import PlainAcl
from broker_core.broker.clients import ClientTables
from broker_core.broker.groups import SubscriptionGroupManager
from broker_core.broker.locks import RebalanceLockManager
from broker_core.broker.maintenance import MaintenanceService, default_leases_ms
from broker_core.broker.pop.service import PopService
from broker_core.broker.processors.aclconfig import AclConfigProcessor
from broker_core.broker.processors.admin import AdminProcessor
from broker_core.broker.processors.clients import ClientProcessor
from broker_core.broker.processors.connections import ConnectionProcessor
from broker_core.broker.processors.locks import LockProcessor
from broker_core.broker.processors.maintenance import MaintenanceProcessor
from broker_core.broker.processors.offsets import OffsetProcessor
from broker_core.broker.processors.pop import PopProcessor
from broker_core.broker.processors.pull import PullHoldService, PullProcessor
from broker_core.broker.processors.query import QueryProcessor
from broker_core.broker.processors.resetoffset import ResetOffsetProcessor
from broker_core.broker.processors.send import SendProcessor
from broker_core.broker.processors.sendback import SendBackProcessor
from broker_core.broker.processors.stats import StatsProcessor
from broker_core.broker.processors.transaction import EndTransactionProcessor
from broker_core.broker.registration import BrokerRegistration
from broker_core.broker.replication import BrokerReplication
from broker_core.broker.stats import BrokerStats
from broker_core.broker.topics import TopicConfigManager
from broker_core.broker.transaction import TransactionService
from broker_core.clock import wall_clock_ms
from broker_core.config import BrokerConfig, StoreConfig
from broker_core.model.topicconfig import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.server import RemotingServer
from broker_core.store.store import MessageStore
from broker_core.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    OFFSET_MOVED_EVENT,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TIMER_TOPIC,
)

log = logging.getLogger(__name__)

PERM_RW = PERM_READ | PERM_WRITE


class _GuardedServer:
    """Registers handlers behind the ACL check (a refusal is NO_PERMISSION, and logged)."""

    def __init__(self, server: RemotingServer, acl: PlainAcl) -> None:
        self._server = server
        self._acl = acl

    def register(self, code: int, handler: Callable[..., Any]) -> None:
        acl = self._acl

        def guarded(request: Any, conn: Any) -> Any:
            problem = acl.check(request, conn.remote_address)
            if problem is not None:
                log.warning("ACL refused request %s from %s: %s", request.code, conn.remote_address, problem)
                return request.response(ResponseCode.NO_PERMISSION, problem)
            return handler(request, conn)

        self._server.register(code, guarded)


def _slave_refuses_end_transaction(request: RemotingCommand, conn: Any) -> RemotingCommand:
    return request.response(
        ResponseCode.SLAVE_NOT_AVAILABLE, "this broker is a slave: transactions end at the master"
    )


class BrokerController:
    """One broker: ``await start()``, serve, ``await close()``."""

    def __init__(
        self,
        config: BrokerConfig,
        store_config: StoreConfig,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.store_config = store_config
        self.clock_ms = clock_ms
        root = store_config.store_path_root_dir
        self.topics = TopicConfigManager(root, clock=clock_ms)
        self.groups = SubscriptionGroupManager(root, clock=clock_ms)
        self.server = RemotingServer(
            config.broker_ip1 if config.broker_ip1 else "127.0.0.1",
            config.listen_port,
            max_frame_size=config.max_frame_size_bytes,
            idle_timeout=config.server_channel_max_idle_time_seconds,
            write_buffer_high_water_mark=config.write_buffer_high_water_mark,
            write_buffer_low_water_mark=config.write_buffer_low_water_mark,
            partial_frames_max_bytes=config.server_partial_frames_max_bytes,
            partial_frame_timeout=config.server_partial_frame_timeout_millis / 1000,
            tls=config.tls_server(),
            busy_poll_micros=config.server_busy_poll_micros,
        )
        self.client = RemotingClient(tls=config.tls_client())
        self.clients = ClientTables()
        self.locks = RebalanceLockManager(clock_ms)
        self.store: MessageStore | None = None
        # RocketMQ 5's pop consumption (made with the processors, once the store is open).
        self.pop: PopService | None = None
        self.registration: BrokerRegistration | None = None
        self.replication: BrokerReplication | None = None
        self._maintenance: MaintenanceService | None = None
        self.stats = BrokerStats()
        self.acl: PlainAcl | None = None
        self.transactions: TransactionService | None = None
        self.boot_timestamp = 0
        self._background: set[asyncio.Task[None]] = set()
        self._housekeeping: asyncio.Task[None] | None = None

    @property
    def maintenance(self) -> MaintenanceService:
        """The maintenance jobs: run on request, and on the broker's timers as
        ``standaloneMaintenance`` says (by default whenever the platform is silent)."""
        assert self._maintenance is not None, "the broker is not started"
        return self._maintenance

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        """The ip:port clients use (and STOREHOST in every record)."""
        return f"{self.config.broker_ip1}:{self.port}"

    async def start(self) -> None:
        self.topics.load()
        self.groups.load()
        if self.config.acl_enable:
            self.acl = PlainAcl(Path(self.store_config.store_path_root_dir) / "config")
        self.ensure_system_topics()
        await self.server.start()
        store_config = dataclasses.replace(self.store_config, store_host=self.address)
        # Opening may recover a crashed store: file work, kept off the event loop.
        store = MessageStore(
            store_config,
            clock_ms=self.clock_ms,
            topic_queue_nums=self._queue_nums,
            replica=self.config.is_slave,
        )
        await asyncio.get_running_loop().run_in_executor(None, store.open)
        self.store = store
        store.add_arrival_listener(self.stats.on_arrival)
        self.replication = BrokerReplication(self)
        self.replication.start()
        self.registration = BrokerRegistration(
            self.config,
            self.client,
            self.topic_config_wrapper,
            broker_addr=self.address,
            ha_addr=lambda: self.replication.ha_addr if self.replication is not None else "",
            on_master=self._learned_master,
        )
        self.transactions = TransactionService(self)
        self.transactions.load()
        self._register_processors()
        if not self.config.is_slave:  # check-backs are the master's (they write op records)
            self.transactions.start()
        self._maintenance = MaintenanceService(
            store,
            self.clock_ms,
            mode=self.config.standalone_maintenance,
            leases_ms=default_leases_ms(self.config),
            overdue_ms=self.config.delay_scan_overdue_millis,
        )
        self._maintenance.start()
        self._housekeeping = asyncio.create_task(self._housekeeping_loop(), name="client-housekeeping")
        await self.registration.register_all()
        self.registration.start()
        self.boot_timestamp = self.clock_ms()
        log.info(
            "broker %s (%s) serving on %s",
            self.config.broker_name,
            self.config.broker_cluster_name,
            self.address,
        )

    async def close(self) -> None:
        """Unregister, stop serving, then close the store cleanly (checkpoint, no abort file)."""
        await stop_task(self._housekeeping)
        self._housekeeping = None
        if self._maintenance is not None:
            await self._maintenance.stop()
        if self.transactions is not None:
            await self.transactions.stop()
            self.transactions = None
        if self.registration is not None:
            await self.registration.stop()
            self.registration = None
        await self.server.close()
        if self.pop is not None:
            self.pop.close()
            self.pop = None
        if self.replication is not None:
            await self.replication.stop()
            self.replication = None
        await self.client.close()
        if self.store is not None:
            store, self.store = self.store, None
            await asyncio.get_running_loop().run_in_executor(None, store.close)

    def _register_processors(self) -> None:
        server: Any = _GuardedServer(self.server, self.acl) if self.acl is not None else self.server
        send = SendProcessor(self)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            server.register(code, send.handle)
        hold = PullHoldService(asyncio.get_running_loop())
        assert self.store is not None
        self.store.add_arrival_listener(hold.on_arrival)
        self.store.set_prompt_dispatch(hold.is_waiting)
        self.store.set_drain_soon(after_writes(asyncio.get_running_loop()))
        server.register(RequestCode.PULL_MESSAGE, PullProcessor(self, hold).handle)
        self.pop = PopService(self, hold.wake)
        pop = PopProcessor(self, hold, self.pop)
        server.register(RequestCode.POP_MESSAGE, pop.pop)
        server.register(RequestCode.ACK_MESSAGE, pop.ack)
        server.register(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, pop.change_invisible_time)
        server.register(RequestCode.QUIVER_GET_POP_STATUS, pop.status)
        clients = ClientProcessor(self)
        server.register(RequestCode.HEART_BEAT, clients.heartbeat)
        server.register(RequestCode.CHECK_CLIENT_CONFIG, clients.check_client_config)
        server.register(RequestCode.UNREGISTER_CLIENT, clients.unregister_client)
        server.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, clients.consumer_list)
        offsets = OffsetProcessor(self)
        server.register(RequestCode.QUERY_CONSUMER_OFFSET, offsets.query_consumer_offset)
        server.register(RequestCode.UPDATE_CONSUMER_OFFSET, offsets.update_consumer_offset)
        server.register(RequestCode.GET_MAX_OFFSET, offsets.max_offset)
        server.register(RequestCode.GET_MIN_OFFSET, offsets.min_offset)
        server.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, offsets.search_offset)
        server.register(RequestCode.GET_EARLIEST_MSG_STORETIME, offsets.earliest_store_time)
        server.register(RequestCode.CONSUMER_SEND_MSG_BACK, SendBackProcessor(self).handle)
        assert self.transactions is not None
        if self.config.is_slave:
            server.register(RequestCode.END_TRANSACTION, _slave_refuses_end_transaction)
        else:
            server.register(RequestCode.END_TRANSACTION, EndTransactionProcessor(self.transactions).handle)
        locks = LockProcessor(self)
        server.register(RequestCode.LOCK_BATCH_MQ, locks.lock)
        server.register(RequestCode.UNLOCK_BATCH_MQ, locks.unlock)
        query = QueryProcessor(self)
        server.register(RequestCode.VIEW_MESSAGE_BY_ID, query.view_by_offset)
        server.register(RequestCode.QUERY_MESSAGE, query.query_by_key)
        admin = AdminProcessor(self)
        server.register(RequestCode.UPDATE_AND_CREATE_TOPIC, admin.update_and_create_topic)
        server.register(RequestCode.DELETE_TOPIC_IN_BROKER, admin.delete_topic)
        server.register(RequestCode.GET_ALL_TOPIC_CONFIG, admin.all_topic_config)
        server.register(RequestCode.GET_TOPIC_CONFIG, admin.topic_config)
        server.register(RequestCode.GET_TOPIC_NAME_LIST, admin.topic_name_list)
        server.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, admin.update_and_create_group)
        server.register(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, admin.all_group_config)
        server.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, admin.delete_group)
        server.register(RequestCode.GET_BROKER_CONFIG, admin.broker_config)
        server.register(RequestCode.UPDATE_BROKER_CONFIG, admin.update_broker_config)
        stats = StatsProcessor(self)
        server.register(RequestCode.GET_TOPIC_STATS_INFO, stats.topic_stats)
        server.register(RequestCode.GET_CONSUME_STATS, stats.consume_stats)
        server.register(RequestCode.GET_BROKER_RUNTIME_INFO, stats.runtime_info)
        server.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, stats.consumed_by_who)
        server.register(RequestCode.GET_ALL_CONSUMER_OFFSET, stats.all_consumer_offsets)
        server.register(RequestCode.GET_ALL_DELAY_OFFSET, stats.all_delay_offsets)
        server.register(RequestCode.GET_BROKER_HA_STATUS, stats.ha_status)
        server.register(RequestCode.QUIVER_GET_OFFSET_SNAPSHOT, stats.offset_snapshot)
        server.register(RequestCode.QUIVER_GET_SCHEDULE_STATUS, stats.schedule_status)
        acl_config = AclConfigProcessor(self)
        server.register(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, acl_config.update_account)
        server.register(RequestCode.DELETE_ACL_CONFIG, acl_config.delete_account)
        server.register(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, acl_config.update_global_white)
        server.register(RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG, acl_config.get_config)
        connections = ConnectionProcessor(self)
        server.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, connections.consumer_connections)
        server.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, connections.producer_connections)
        server.register(RequestCode.GET_CONSUMER_RUNNING_INFO, connections.consumer_running_info)
        server.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, connections.consume_message_directly)
        server.register(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ResetOffsetProcessor(self).reset_offset)
        maintenance = MaintenanceProcessor(self)
        server.register(RequestCode.QUIVER_RUN_MAINTENANCE_JOB, maintenance.run_job)
        server.register(RequestCode.QUIVER_GET_MAINTENANCE_STATUS, maintenance.status)
        server.register(RequestCode.TRIGGER_DELETE_FILES, maintenance.trigger_delete_files)
        server.register(RequestCode.DELETE_EXPIRED_COMMITLOG, maintenance.delete_expired_commit_log)

    async def _housekeeping_loop(self) -> None:
        """Every 10 s, drop clients silent for 120 s and close their connections (RocketMQ's
        ClientHousekeepingService; both intervals are settings)."""
        while True:
            await asyncio.sleep(self.config.client_housekeeping_interval / 1000)
            try:
                expired = self.clients.expire_idle(self.clock_ms(), self.config.client_channel_expired_time)
                for group in expired:
                    self.notify_ids_changed(group)
                self.stats.roll_day()
            except Exception:  # one bad round must not end housekeeping for good
                log.exception("client housekeeping failed")

    def _learned_master(self, master_addr: str, ha_addr: str) -> None:
        first = self.replication is not None and not self.replication.master_addr
        if self.replication is not None:
            self.replication.learned(master_addr, ha_addr)
        if first and self.replication is not None and self.replication.is_slave:
            # Copy the master's topics and offsets now, not at the next round.
            task = asyncio.get_running_loop().create_task(self._first_sync())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _first_sync(self) -> None:
        assert self.replication is not None
        try:
            await self.replication.sync_metadata()
        except Exception as exc:  # the sync loop tries again
            log.warning("first slave sync failed: %s", exc)

    def notify_ids_changed(self, group: str) -> None:
        """Tell ``group``'s consumers to rebalance now, unless the group turned that off
        (``notifyConsumerIdsChangedEnable = false``: they rebalance on their own timer, as
        with RocketMQ)."""
        config = self.groups.get(group)
        if config is not None and not config.notify_consumer_ids_changed_enable:
            return
        self.clients.notify_ids_changed(group)

    def topics_changed(self) -> None:
        """Tell the nameservers now, not at the next 30-second round (RocketMQ does too)."""
        if self.registration is not None:
            task = asyncio.get_running_loop().create_task(self.registration.register_all())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    # -- topics ----------------------------------------------------------------------------

    def _queue_nums(self, topic: str) -> int | None:
        """How many queues ``topic`` has here (the store refuses ids beyond), or None."""
        config = self.topics.get(topic)
        if config is None:
            return None
        return max(config.read_queue_nums, config.write_queue_nums)

    def ensure_system_topics(self) -> None:
        """Create RocketMQ's system topics this broker needs (existing configs are kept)."""
        system = [
            TopicConfig(SELF_TEST_TOPIC, 1, 1, PERM_RW),
            TopicConfig(OFFSET_MOVED_EVENT, 1, 1, PERM_RW),
            TopicConfig(SCHEDULE_TOPIC, 18, 18, PERM_RW),
            TopicConfig(TIMER_TOPIC, 1, 1, PERM_RW),
            TopicConfig(RMQ_SYS_TRANS_HALF_TOPIC, 1, 1, PERM_RW),
            TopicConfig(RMQ_SYS_TRANS_OP_HALF_TOPIC, 1, 1, PERM_RW),
            # Tools address a whole cluster or one broker through topics named after them.
            TopicConfig(self.config.broker_cluster_name, 1, 1, PERM_RW | PERM_INHERIT),
            TopicConfig(self.config.broker_name, 1, 1, PERM_RW | PERM_INHERIT),
        ]
        if self.config.trace_topic_enable:
            system.append(TopicConfig(self.config.msg_trace_topic_name, 1, 1, PERM_RW))
        if self.config.auto_create_topic_enable:
            queues = self.config.default_topic_queue_nums
            system.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, queues, queues, PERM_RW | PERM_INHERIT))
        for topic_config in system:
            self.topics.ensure(topic_config)

    def topic_config_wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper: what registration sends the nameservers.

        A broker not both readable and writeable advertises its own permission on every
        topic, as RocketMQ does, so clients stop sending (or pulling) there.
        """
        broker_perm = self.config.broker_permission
        table = {}
        for name, config in sorted(self.topics.all().items()):
            entry = config.to_json()
            if broker_perm & PERM_RW != PERM_RW:
                entry["perm"] = broker_perm
            table[name] = entry
        return {"dataVersion": self.topics.data_version.to_json(), "topicConfigTable": table}
