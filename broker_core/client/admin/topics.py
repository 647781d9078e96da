"""The admin client's topic calls: create, delete, configs, queue offsets and consumers."""

from __future__ import annotations

from typing import Final

from broker_core.client.admin.cluster import ClusterReads
from broker_core.client.adminmodels import QueueStat, TopicStats
from broker_core.errors import AdminError
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.topics import AUTO_CREATE_TOPIC_KEY_TOPIC

__all__ = ["NOT_HERE", "TopicCalls"]

ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"
# What a broker answers when it has no such topic or group: "nothing here", not a failure.
NOT_HERE: Final = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST})


class TopicCalls(ClusterReads):
    """Topic configs on the masters (and order configs on the nameservers), stats, consumers."""

    async def create_or_update_topic(
        self, config: TopicConfig, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Create or update a topic on every master of ``cluster``, or on one broker.

        An order topic created on a cluster also gets its ``ORDER_TOPIC_CONFIG`` entry on
        every nameserver (``brokerName:writeQueueNums;...``), as mqadmin does, so order
        producers see its queues in a fixed order.  Returns the broker addresses changed.
        """
        if cluster is None and broker_addr is None:
            raise AdminError("give the cluster or the broker address to create the topic on")
        problem = config.problem()
        if problem is not None:
            raise AdminError(problem)
        addrs = await self._masters(cluster=cluster, broker_addr=broker_addr)
        fields = {
            "topic": config.topic_name,
            "defaultTopic": AUTO_CREATE_TOPIC_KEY_TOPIC,
            "readQueueNums": config.read_queue_nums,
            "writeQueueNums": config.write_queue_nums,
            "perm": config.perm,
            "topicFilterType": config.topic_filter_type,
            "topicSysFlag": config.topic_sys_flag,
            "order": config.order,
        }
        await self._ask_each(addrs, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
        if config.order and cluster is not None:
            info = await self.cluster_info()
            conf = ";".join(f"{b.broker_name}:{config.write_queue_nums}" for b in info.brokers_of(cluster))
            await self._each_namesrv(
                RequestCode.PUT_KV_CONFIG,
                {"namespace": ORDER_TOPIC_CONFIG_NAMESPACE, "key": config.topic_name, "value": conf},
            )
        return addrs

    async def delete_topic(self, topic: str, *, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the masters of ``cluster`` (default: those of its route),
        then from every nameserver.  Returns the broker addresses it was deleted on.
        """
        if cluster is not None:
            addrs = await self._masters(cluster=cluster)
        else:
            addrs = sorted((await self._route_masters(topic)).values())
        await self._ask_each(addrs, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        fields = {"topic": topic} if cluster is None else {"topic": topic, "clusterName": cluster}
        await self._each_namesrv(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields)
        return addrs

    async def topic_configs(self, broker_addr: str) -> dict[str, TopicConfig]:
        """Every topic config of one broker (GET_ALL_TOPIC_CONFIG), by name."""
        response = await self._invoke(broker_addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        table = self._json(response, "topic config").get("topicConfigTable") or {}
        return {str(name): TopicConfig.from_json(obj) for name, obj in sorted(table.items())}

    async def topic_stats(self, topic: str) -> TopicStats:
        """Min and max offset of every queue of ``topic`` on the masters of its route."""
        masters = await self._route_masters(topic)
        responses = await self._ask_each(
            masters.values(), RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}, skip=NOT_HERE
        )
        if not responses:
            raise AdminError(f"no broker has topic {topic!r}", code=ResponseCode.TOPIC_NOT_EXIST)
        queues: list[QueueStat] = []
        for response in responses.values():
            queues.extend(TopicStats.queues_from_body(self._json(response, "topic stats")))
        return TopicStats(topic, tuple(sorted(queues, key=lambda q: q.queue)))

    async def topic_consumers(self, topic: str) -> list[str]:
        """The consumer groups that consume ``topic`` (QUERY_TOPIC_CONSUME_BY_WHO)."""
        masters = await self._route_masters(topic)
        responses = await self._ask_each(
            masters.values(), RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}
        )
        groups: set[str] = set()
        for response in responses.values():
            groups.update(str(g) for g in self._json(response, "group list").get("groupList") or [])
        return sorted(groups)
