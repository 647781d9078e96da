"""What the nameservers know, as clients see it: cluster info and topic routes.

Read-only values parsed from the nameserver's JSON bodies (GET_BROKER_CLUSTER_INFO 106,
GET_ROUTEINFO_BY_TOPIC 105).  The bodies may be fastjson's dialect, with bare integer
``brokerAddrs`` keys (``{0:"ip:port"}``); ``broker_core.remoting.fastjson.loads`` turns
those into strings and the parsers here into ints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker_core.model.groupconfig import MASTER_ID
from broker_core.routedata import QueueData

BrokerName = str
ClusterName = str


@dataclass(frozen=True, slots=True)
class BrokerData:
    """One broker name: its cluster and its addresses by broker id (0 = the master)."""

    broker_name: BrokerName
    cluster: ClusterName
    addrs: Mapping[int, str] = field(default_factory=dict)

    @property
    def master_addr(self) -> str | None:
        """The master's ``ip:port``, or None while no master is registered."""
        return self.addrs.get(MASTER_ID)

    @property
    def any_addr(self) -> str | None:
        """The master if there is one, else the lowest-id slave: where reads may go."""
        if not self.addrs:
            return None
        return self.addrs.get(MASTER_ID) or self.addrs[min(self.addrs)]

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "brokerAddrs": {str(bid): addr for bid, addr in sorted(self.addrs.items())},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BrokerData:
        addrs = {int(bid): str(addr) for bid, addr in (obj.get("brokerAddrs") or {}).items()}
        return cls(str(obj["brokerName"]), str(obj.get("cluster") or ""), addrs)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    """Where a topic lives: its queues per broker and those brokers' addresses."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]
    order_topic_conf: str | None = None

    def master_addrs(self) -> dict[BrokerName, str]:
        """Master address by broker name, for the brokers that have one."""
        return {b.broker_name: b.master_addr for b in self.broker_datas if b.master_addr}

    def read_addrs(self) -> dict[BrokerName, str]:
        """One address per broker name where reads may go (the master when it is up)."""
        return {b.broker_name: addr for b in self.broker_datas if (addr := b.any_addr)}

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "queueDatas": [q.to_json() for q in self.queue_datas],
            "brokerDatas": [b.to_json() for b in self.broker_datas],
        }
        if self.order_topic_conf:
            data["orderTopicConf"] = self.order_topic_conf
        return data

    @classmethod
    def from_json(cls, topic: str, obj: Mapping[str, Any]) -> TopicRoute:
        return cls(
            topic,
            tuple(QueueData.from_json(q) for q in obj.get("queueDatas") or []),
            tuple(BrokerData.from_json(b) for b in obj.get("brokerDatas") or []),
            obj.get("orderTopicConf") or None,
        )


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """Every registered broker name, and which cluster each belongs to."""

    brokers: Mapping[BrokerName, BrokerData]
    clusters: Mapping[ClusterName, tuple[BrokerName, ...]]

    def brokers_of(self, cluster: ClusterName) -> list[BrokerData]:
        """The brokers of ``cluster`` by name; empty when the cluster is unknown."""
        return [self.brokers[name] for name in self.clusters.get(cluster, ()) if name in self.brokers]

    def master_addrs(self, cluster: ClusterName | None = None) -> dict[BrokerName, str]:
        """Master address by broker name, of one cluster or of all."""
        brokers = self.brokers_of(cluster) if cluster is not None else list(self.brokers.values())
        return {b.broker_name: b.master_addr for b in brokers if b.master_addr}

    def broker_by_addr(self, addr: str) -> BrokerData | None:
        """The broker name that has ``addr`` among its addresses."""
        for broker in self.brokers.values():
            if addr in broker.addrs.values():
                return broker
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {name: b.to_json() for name, b in sorted(self.brokers.items())},
            "clusterAddrTable": {c: list(names) for c, names in sorted(self.clusters.items())},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ClusterInfo:
        brokers = {
            str(name): BrokerData.from_json(data) for name, data in (obj.get("brokerAddrTable") or {}).items()
        }
        clusters = {
            str(cluster): tuple(sorted(str(n) for n in names))
            for cluster, names in (obj.get("clusterAddrTable") or {}).items()
        }
        return cls(brokers, clusters)
