"""The admin client's topic calls: create, delete, configs (attributes and message type
included), queue offsets and consumers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from broker_core.client.admin.cluster import ClusterReads
from broker_core.client.adminmodels import QueueStat, TopicStats
from broker_core.errors import AdminError
from broker_core.model.messagetype import UNSPECIFIED
from broker_core.model.topicattributes import (
    AttributeChanges,
    TopicAttributeError,
    format_attribute_changes,
    parse_attribute_changes,
)
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
        self,
        config: TopicConfig,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        attributes: str | Mapping[str, str | None] | None = None,
    ) -> list[str]:
        """Create or update a topic on every master of ``cluster``, or on one broker.

        ``attributes`` changes the topic's attributes: RocketMQ's string
        (``"+message.type=FIFO,-key"``, mqadmin's ``-a``) or a mapping of key to value
        (None: remove the key).  Without it the config's own ``attributes`` are set (each
        ``+key=value``); when neither names any, an existing topic keeps its attributes.
        The brokers judge the change (``broker_core.model.topicattributes``).

        An order topic created on a cluster also gets its ``ORDER_TOPIC_CONFIG`` entry on
        every nameserver (``brokerName:writeQueueNums;...``), as mqadmin does, so order
        producers see its queues in a fixed order.  Returns the broker addresses changed.

        Raises:
            AdminError: for a config or an attribute string that is malformed (nothing is
                sent), or the brokers' refusal (e.g. an unknown attribute or value).
        """
        if cluster is None and broker_addr is None:
            raise AdminError("give the cluster or the broker address to create the topic on")
        problem = config.problem()
        if problem is not None:
            raise AdminError(problem)
        changes = _attribute_changes(config, attributes)
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
        if changes:
            fields["attributes"] = format_attribute_changes(changes)
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

    async def topic_config(self, topic: str, *, broker_addr: str | None = None) -> TopicConfig:
        """``topic``'s config, attributes included (GET_TOPIC_CONFIG), from ``broker_addr`` or
        from the first master of its route (by broker name) that holds it.

        Raises:
            AdminError: code TOPIC_NOT_EXIST when no nameserver routes it or no broker
                asked holds it.
        """
        if broker_addr is not None:
            addrs = [broker_addr]
        else:
            masters = await self._route_masters(topic)
            addrs = [masters[name] for name in sorted(masters)]
        responses = await self._ask_each(addrs, RequestCode.GET_TOPIC_CONFIG, {"topic": topic}, skip=NOT_HERE)
        for addr in addrs:
            if addr in responses:
                return TopicConfig.from_json(self._json(responses[addr], "topic config"))
        raise AdminError(f"no broker has topic {topic!r}", code=ResponseCode.TOPIC_NOT_EXIST)

    async def topic_message_type(self, topic: str) -> str:
        """``topic``'s message type (its ``message.type`` attribute, NORMAL when it has none),
        read from a master of its route; UNSPECIFIED when no broker has the topic, as
        RocketMQ's proxy answers (``broker_core.model.messagetype``)."""
        try:
            return (await self.topic_config(topic)).message_type
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return UNSPECIFIED
            raise

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


def _attribute_changes(
    config: TopicConfig, attributes: str | Mapping[str, str | None] | None
) -> AttributeChanges:
    """The attribute changes a create or update sends (see ``create_or_update_topic``).

    Raises AdminError for a malformed string, or a key or value that would not survive the
    wire form (a ``,`` or ``=`` in it, a sign in a key).
    """
    asked: AttributeChanges | None = None
    if isinstance(attributes, str):
        text = attributes
    else:
        asked = dict(config.attributes if attributes is None else attributes)
        text = format_attribute_changes(asked)
    try:
        changes = parse_attribute_changes(text)
    except TopicAttributeError as exc:
        raise AdminError(f"attributes {text!r}: {exc}") from None
    if asked is not None and changes != asked:
        raise AdminError(f"attributes {asked!r}: a key or value holds ',', '=', '+' or '-'")
    return changes
