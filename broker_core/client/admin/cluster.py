"""The admin client's reads of the cluster: brokers, topics and routes, from the nameservers.

Every other part starts here to find the brokers a call goes to: ``_masters`` (one broker,
one cluster's masters or all of them) and ``_route_masters`` (the masters of a topic).
"""

from __future__ import annotations

from broker_core.client.admin.base import AdminRequests
from broker_core.client.routes import ClusterInfo, TopicRoute
from broker_core.errors import AdminError
from broker_core.remoting.codes import RequestCode, ResponseCode

__all__ = ["ClusterReads"]


class ClusterReads(AdminRequests):
    """Cluster info, broker liveness, topic lists and routes (nameserver requests)."""

    async def cluster_info(self) -> ClusterInfo:
        """Every registered broker and its cluster (GET_BROKER_CLUSTER_INFO)."""
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        return ClusterInfo.from_json(self._json(response, "cluster info"))

    async def broker_heartbeats(self) -> dict[str, int]:
        """When each broker last registered with the nameserver that answered (epoch ms by address)."""
        response = await self._namesrv(RequestCode.QUIVER_GET_BROKER_LIVE_INFO)
        table = self._json(response, "broker live info").get("lastUpdateTimestamp") or {}
        return {str(addr): int(ms) for addr, ms in table.items()}

    async def topic_list(self) -> list[str]:
        """Every topic the nameservers route, system topics included, sorted."""
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(str(t) for t in self._json(response, "topic list").get("topicList") or [])

    async def topics_by_cluster(self, cluster: str) -> list[str]:
        """The topics with queues on the brokers of ``cluster``."""
        response = await self._namesrv(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": cluster})
        return sorted(str(t) for t in self._json(response, "topic list").get("topicList") or [])

    async def topic_route(self, topic: str) -> TopicRoute:
        """Where ``topic`` lives.

        Raises:
            AdminError: code TOPIC_NOT_EXIST when no nameserver routes it.
        """
        response = await self._namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return TopicRoute.from_json(topic, self._json(response, "topic route"))

    async def _route_masters(self, topic: str) -> dict[str, str]:
        masters = (await self.topic_route(topic)).master_addrs()
        if not masters:
            raise AdminError(
                f"topic {topic!r} has no master broker online", code=ResponseCode.TOPIC_NOT_EXIST
            )
        return masters

    async def _masters(self, *, cluster: str | None = None, broker_addr: str | None = None) -> list[str]:
        """The master addresses to change: one broker, one cluster's masters, or all masters."""
        if broker_addr is not None and cluster is not None:
            raise AdminError("give a cluster or a broker address, not both")
        if broker_addr is not None:
            return [broker_addr]
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.clusters:
            known = ", ".join(sorted(info.clusters)) or "none"
            raise AdminError(f"cluster {cluster!r} is not registered with the nameservers (known: {known})")
        masters = info.master_addrs(cluster)
        if not masters:
            raise AdminError(f"no master broker is registered{f' in cluster {cluster!r}' if cluster else ''}")
        return sorted(masters.values())
