"""The nameserver's route tables (RocketMQ ``RouteInfoManager``).

Four tables, rebuilt entirely from broker registrations (nothing is persisted):

* ``topic_queue_table``: topic -> broker name -> QueueData (queue counts, perm, sysflag),
  taken from each master's topic configs;
* ``broker_addr_table``: broker name -> BrokerData (cluster, {broker id: "ip:port"});
* ``cluster_addr_table``: cluster name -> broker names;
* ``broker_live_table``: broker address -> BrokerLiveInfo (last registration time, the
  data version it registered with, its connection, its HA address).

A broker re-registers every 30 s; ``scan_not_active_brokers`` drops one silent for longer
than the expiry (120 s) and everything it contributed.  A master's registration with a new
data version replaces its queue data: topics it no longer lists lose its queues.

Single-threaded by design: the nameserver runs these on its event loop only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker_core.model.groupconfig import MASTER_ID
from broker_core.model.topicconfig import PERM_WRITE
from broker_core.routedata import QueueData
from broker_core.store.configfile import DataVersion

ORDER_TOPIC_CONFIG_NAMESPACE = "ORDER_TOPIC_CONFIG"

BrokerName = str
BrokerAddr = str
ClusterName = str
TopicName = str


@dataclass(slots=True)
class BrokerData:
    """A broker name's cluster and addresses, by broker id (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerAddrs": {str(broker_id): addr for broker_id, addr in sorted(self.broker_addrs.items())},
        }


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    channel: object | None
    ha_server_addr: str


@dataclass(slots=True)
class RegisterResult:
    ha_server_addr: str = ""
    master_addr: str = ""


class RouteInfoManager:
    """The four route tables and the operations on them."""

    def __init__(self, *, clock_ms: Callable[[], int], broker_expire_ms: int = 120_000) -> None:
        self._clock_ms = clock_ms
        self.broker_expire_ms = broker_expire_ms
        self.topic_queue_table: dict[TopicName, dict[BrokerName, QueueData]] = {}
        self.broker_addr_table: dict[BrokerName, BrokerData] = {}
        self.cluster_addr_table: dict[ClusterName, set[BrokerName]] = {}
        self.broker_live_table: dict[BrokerAddr, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddr, list[str]] = {}
        # KV config (RocketMQ KVConfigManager): namespace -> key -> value.
        self.kv_config: dict[str, dict[str, str]] = {}

    # -- registration ------------------------------------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: DataVersion,
        topic_configs: Mapping[str, Mapping[str, Any]] | None,
        filter_servers: list[str],
        channel: object | None,
    ) -> RegisterResult:
        """Record a broker's (re-)registration; return its master's HA and client addresses."""
        self.cluster_addr_table.setdefault(cluster_name, set()).add(broker_name)
        broker_data = self.broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = self.broker_addr_table[broker_name] = BrokerData(cluster_name, broker_name)
        broker_data.cluster = cluster_name
        # The same address under another id (a slave promoted to master): forget the old id.
        for other_id, addr in list(broker_data.broker_addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del broker_data.broker_addrs[other_id]
        previous = broker_data.broker_addrs.get(broker_id)
        broker_data.broker_addrs[broker_id] = broker_addr
        register_first = register_first or previous is None

        if broker_id == MASTER_ID and topic_configs is not None:
            live = self.broker_live_table.get(broker_addr)
            changed = (
                live is None
                or live.data_version.counter != data_version.counter
                or (live.data_version.timestamp != data_version.timestamp)
            )
            if changed or register_first:
                self._replace_queue_data(broker_name, topic_configs)

        self.broker_live_table[broker_addr] = BrokerLiveInfo(
            self._clock_ms(), data_version, channel, ha_server_addr
        )
        if filter_servers:
            self.filter_server_table[broker_addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(broker_addr, None)

        result = RegisterResult()
        if broker_id != MASTER_ID:
            master_addr = broker_data.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(master_addr)
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _replace_queue_data(self, broker_name: str, topic_configs: Mapping[str, Mapping[str, Any]]) -> None:
        listed = set()
        for topic, config in topic_configs.items():
            listed.add(topic)
            queue_data = QueueData(
                broker_name=broker_name,
                read_queue_nums=int(config.get("readQueueNums", 16)),
                write_queue_nums=int(config.get("writeQueueNums", 16)),
                perm=int(config.get("perm", 6)),
                topic_sys_flag=int(config.get("topicSysFlag", 0)),
            )
            self.topic_queue_table.setdefault(topic, {})[broker_name] = queue_data
        # Topics the master no longer lists (deleted on it) lose its queues.
        for topic in [t for t, by_broker in self.topic_queue_table.items() if broker_name in by_broker]:
            if topic not in listed:
                self._remove_queue(topic, broker_name)

    def _remove_queue(self, topic: str, broker_name: str) -> None:
        by_broker = self.topic_queue_table.get(topic)
        if by_broker is None:
            return
        by_broker.pop(broker_name, None)
        if not by_broker:
            del self.topic_queue_table[topic]

    def unregister_broker(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """Remove one broker address (a clean shutdown)."""
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None and broker_data.broker_addrs.get(broker_id) == broker_addr:
            del broker_data.broker_addrs[broker_id]
        self._forget_empty_broker(broker_name, cluster_name)

    def _forget_empty_broker(self, broker_name: str, cluster_name: str | None = None) -> None:
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None or broker_data.broker_addrs:
            return
        del self.broker_addr_table[broker_name]
        clusters = [cluster_name] if cluster_name else list(self.cluster_addr_table)
        clusters.append(broker_data.cluster)
        for cluster in clusters:
            names = self.cluster_addr_table.get(cluster)
            if names is not None:
                names.discard(broker_name)
                if not names:
                    del self.cluster_addr_table[cluster]
        for topic in [t for t, by_broker in self.topic_queue_table.items() if broker_name in by_broker]:
            self._remove_queue(topic, broker_name)

    def update_live_timestamp(self, broker_addr: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update_ms = self._clock_ms()

    def data_version_of(self, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(broker_addr)
        return live.data_version if live is not None else None

    # -- expiry --------------------------------------------------------------------------

    def scan_not_active_brokers(self) -> list[tuple[str, object | None]]:
        """Drop brokers silent for longer than the expiry; return (addr, channel) of each."""
        now = self._clock_ms()
        expired = [
            (addr, live.channel)
            for addr, live in self.broker_live_table.items()
            if now - live.last_update_ms > self.broker_expire_ms
        ]
        for addr, _channel in expired:
            self.remove_broker_addr(addr)
        return expired

    def on_channel_destroyed(self, channel: object) -> str | None:
        """A broker's connection closed: drop the broker it carried; return its address."""
        for addr, live in list(self.broker_live_table.items()):
            if live.channel is channel:
                self.remove_broker_addr(addr)
                return addr
        return None

    def remove_broker_addr(self, broker_addr: str) -> None:
        self.broker_live_table.pop(broker_addr, None)
        self.filter_server_table.pop(broker_addr, None)
        for broker_name, broker_data in list(self.broker_addr_table.items()):
            for broker_id, addr in list(broker_data.broker_addrs.items()):
                if addr == broker_addr:
                    del broker_data.broker_addrs[broker_id]
            self._forget_empty_broker(broker_name)

    # -- queries -------------------------------------------------------------------------

    def pickup_topic_route(self, topic: str) -> dict[str, Any] | None:
        """The route a client gets for ``topic`` (TopicRouteData), or None when unknown."""
        by_broker = self.topic_queue_table.get(topic)
        if not by_broker:
            return None
        broker_datas = [
            self.broker_addr_table[name].to_json()
            for name in sorted(by_broker)
            if name in self.broker_addr_table
        ]
        if not broker_datas:
            return None
        route: dict[str, Any] = {
            "queueDatas": [by_broker[name].to_json() for name in sorted(by_broker)],
            "brokerDatas": broker_datas,
            "filterServerTable": {
                addr: servers
                for data in broker_datas
                for addr in data["brokerAddrs"].values()
                if (servers := self.filter_server_table.get(addr))
            },
        }
        order_conf = self.kv_config.get(ORDER_TOPIC_CONFIG_NAMESPACE, {}).get(topic)
        if order_conf:
            route["orderTopicConf"] = order_conf
        return route

    def cluster_info(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {
                name: data.to_json() for name, data in sorted(self.broker_addr_table.items())
            },
            "clusterAddrTable": {
                cluster: sorted(names) for cluster, names in sorted(self.cluster_addr_table.items())
            },
        }

    def topic_list(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, by_broker in self.topic_queue_table.items() if names & by_broker.keys())

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        if cluster is None:
            self.topic_queue_table.pop(topic, None)
            return
        for broker_name in self.cluster_addr_table.get(cluster, set()):
            self._remove_queue(topic, broker_name)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Take write permission off every queue of ``broker_name``; return how many topics."""
        count = 0
        for by_broker in self.topic_queue_table.values():
            queue_data = by_broker.get(broker_name)
            if queue_data is not None and queue_data.perm & PERM_WRITE:
                by_broker[broker_name] = dataclasses.replace(queue_data, perm=queue_data.perm & ~PERM_WRITE)
                count += 1
        return count

    # -- KV config -------------------------------------------------------------------------

    def put_kv(self, namespace: str, key: str, value: str) -> None:
        self.kv_config.setdefault(namespace, {})[key] = value

    def get_kv(self, namespace: str, key: str) -> str | None:
        return self.kv_config.get(namespace, {}).get(key)

    def delete_kv(self, namespace: str, key: str) -> None:
        table = self.kv_config.get(namespace)
        if table is not None:
            table.pop(key, None)
            if not table:
                del self.kv_config[namespace]

    def kv_list(self, namespace: str) -> dict[str, str] | None:
        table = self.kv_config.get(namespace)
        return dict(table) if table else None

    def live_brokers(self) -> Iterable[tuple[str, BrokerLiveInfo]]:
        return list(self.broker_live_table.items())
