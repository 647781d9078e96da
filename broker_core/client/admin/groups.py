"""The admin client's consumer- and producer-group calls: progress, connections, configs,
pop consumption.

A group's offsets live on each broker it consumed from, so progress, connections and pop
books are asked of every master and merged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

import orjson

from broker_core.client.admin.cluster import ClusterReads
from broker_core.client.admin.topics import NOT_HERE
from broker_core.client.adminmodels import (
    BrokerPopStatus,
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    GroupSummary,
    PopStatus,
    QueueProgress,
    merge_connections,
)
from broker_core.errors import AdminError, BrokerRefusedError, ClientError
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from broker_core.topics import RETRY_GROUP_TOPIC_PREFIX

__all__ = ["GroupCalls"]

_GROUP_SUMMARY_CONCURRENCY = 8


class GroupCalls(ClusterReads):
    """Consume stats, consumer and producer connections, subscription group configs."""

    async def consume_stats(
        self, group: str, topic: str | None = None, *, masters: Sequence[str] | None = None
    ) -> ConsumeStats:
        """``group``'s progress on every queue (of ``topic``, or of all it consumes).

        Every master is asked: a group's offsets live on each broker it consumed from.

        Raises:
            AdminError: code SUBSCRIPTION_GROUP_NOT_EXIST when no broker knows the group.
        """
        addrs = masters if masters is not None else await self._masters()
        fields = GetConsumeStatsRequestHeader(group, topic).to_fields()
        responses = await self._ask_each(
            addrs, RequestCode.GET_CONSUME_STATS, fields, skip={*NOT_HERE, ResponseCode.QUERY_NOT_FOUND}
        )
        queues: list[QueueProgress] = []
        tps = 0.0
        for response in responses.values():
            body = self._json(response, "consume stats")
            queues.extend(ConsumeStats.queues_from_body(body))
            tps += float(body.get("consumeTps") or 0.0)
        if not queues:
            # Brokers answer an empty table for a group they know nothing of (as Java's do).
            raise AdminError(
                f"consumer group {group!r} has consumed nothing on any broker (no offsets, no subscriptions)",
                code=ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
            )
        return ConsumeStats(group, tuple(sorted(queues, key=lambda q: q.queue)), tps)

    async def consumer_connections(
        self, group: str, *, masters: Sequence[str] | None = None
    ) -> ConsumerConnection:
        """Who consumes for ``group`` now, merged over every master.

        Raises:
            AdminError: code CONSUMER_NOT_ONLINE when no broker has a client of the group.
        """
        addrs = masters if masters is not None else await self._masters()
        responses = await self._ask_each(
            addrs,
            RequestCode.GET_CONSUMER_CONNECTION_LIST,
            GetConsumerConnectionListRequestHeader(group).to_fields(),
            skip={ResponseCode.CONSUMER_NOT_ONLINE},
        )
        found = [
            ConsumerConnection.from_body(group, self._json(r, "consumer connection"))
            for r in responses.values()
        ]
        if not found:
            raise AdminError(
                f"consumer group {group!r} is not online (no broker has a client of it)",
                code=ResponseCode.CONSUMER_NOT_ONLINE,
            )
        first = found[0]
        subscriptions = {topic: sub for c in reversed(found) for topic, sub in c.subscriptions.items()}
        return ConsumerConnection(
            group,
            merge_connections(*(c.connections for c in found)),
            dict(sorted(subscriptions.items())),
            first.consume_type,
            first.message_model,
            first.consume_from_where,
        )

    async def producer_connections(
        self, group: str, topic: str | None = None
    ) -> tuple[ClientConnection, ...]:
        """The producers of ``group`` connected to the masters of ``topic`` (or to all masters).

        Raises:
            AdminError: no broker asked has a producer of the group.
        """
        if topic is not None:
            addrs = list((await self._route_masters(topic)).values())
        else:
            addrs = await self._masters()
        responses = await self._ask_each(
            addrs,
            RequestCode.GET_PRODUCER_CONNECTION_LIST,
            GetProducerConnectionListRequestHeader(group).to_fields(),
            skip={ResponseCode.SYSTEM_ERROR},  # what a broker answers when it has none
        )
        connections = merge_connections(
            *(
                (
                    ClientConnection.from_json(c)
                    for c in self._json(r, "producer connection").get("connectionSet") or []
                )
                for r in responses.values()
            )
        )
        if not connections:
            where = f"the brokers of topic {topic!r}" if topic is not None else "any broker"
            raise AdminError(
                f"producer group {group!r} is not online (no producer connected to {where})",
                code=ResponseCode.QUERY_NOT_FOUND,
            )
        return connections

    async def broker_pop_status(
        self, broker_addr: str, group: str | None = None, *, broker_name: str = ""
    ) -> BrokerPopStatus:
        """One broker's pop books (of ``group``, or of every group) (QUIVER_GET_POP_STATUS).

        A broker that does not know the request (RocketMQ's own, whose pop state is kept
        otherwise) has no books here.

        Raises:
            AdminError: the broker refused or answered something unreadable.
        """
        try:
            body = await self.requests.pop_status(broker_addr, group or "")
        except BrokerRefusedError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                return BrokerPopStatus(broker_name, broker_addr)
            raise AdminError(str(exc), code=exc.code, remark=exc.remark, addr=broker_addr) from exc
        except ClientError as exc:
            raise AdminError(str(exc), addr=broker_addr) from exc
        return BrokerPopStatus.from_body(broker_name, broker_addr, body)

    async def pop_status(self, group: str | None = None) -> PopStatus:
        """Pop consumption (RocketMQ 5 clients, through the proxy) on every master: each
        broker's books of ``group`` (or of every group), acked rates and FIFO flags.

        Raises:
            AdminError: a master refused or did not answer (the result is never partial).
        """
        masters = (await self.cluster_info()).master_addrs()
        found = await self._gather(
            self.broker_pop_status(addr, group, broker_name=name) for name, addr in sorted(masters.items())
        )
        return PopStatus(tuple(found))

    async def subscription_groups(self, broker_addr: str) -> dict[str, SubscriptionGroupConfig]:
        """Every subscription group config of one broker, by group name."""
        response = await self._invoke(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = self._json(response, "subscription group").get("subscriptionGroupTable") or {}
        return {str(name): SubscriptionGroupConfig.from_json(obj) for name, obj in sorted(table.items())}

    async def consumer_offsets(self, broker_addr: str) -> dict[tuple[str, str], dict[int, int]]:
        """Every committed offset of one broker: (topic, group) -> {queue id: offset}."""
        response = await self._invoke(broker_addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        table = self._json(response, "consumer offsets").get("offsetTable") or {}
        offsets: dict[tuple[str, str], dict[int, int]] = {}
        for key, by_queue in table.items():
            topic, sep, group = str(key).partition("@")
            if sep:
                offsets[(topic, group)] = {int(q): int(o) for q, o in (by_queue or {}).items()}
        return offsets

    async def group_list(self) -> list[str]:
        """Every consumer group the cluster knows, sorted.

        The union of the masters' subscription group configs, the groups with committed
        offsets, and the groups whose retry topic exists (every consumer that ever sent a
        heartbeat has one), so groups without a config still show.
        """
        addrs = await self._masters()
        (configs, offsets), topics = await self._both(
            self._both(
                self._gather(self.subscription_groups(a) for a in addrs),
                self._gather(self.consumer_offsets(a) for a in addrs),
            ),
            self.topic_list(),
        )
        groups = {name for table in configs for name in table}
        groups.update(group for table in offsets for (_topic, group) in table)
        groups.update(
            t[len(RETRY_GROUP_TOPIC_PREFIX) :] for t in topics if t.startswith(RETRY_GROUP_TOPIC_PREFIX)
        )
        return sorted(g for g in groups if g)

    async def group_summary(self, group: str, *, masters: Sequence[str] | None = None) -> GroupSummary:
        """``group``'s clients, consume type and model, TPS and total lag."""
        if masters is None:
            masters = await self._masters()
        stats, connection = await self._both(
            self._stats_or_none(group, masters), self._connection_or_none(group, masters)
        )
        return GroupSummary(
            group,
            len(connection.connections) if connection else 0,
            connection.consume_type if connection else "",
            connection.message_model if connection else "",
            stats.consume_tps if stats else 0.0,
            stats.total_lag if stats else 0,
        )

    async def _stats_or_none(self, group: str, masters: Sequence[str]) -> ConsumeStats | None:
        try:
            return await self.consume_stats(group, masters=masters)
        except AdminError as exc:
            if exc.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                return None  # listed for its retry topic only: nothing to measure
            raise

    async def _connection_or_none(self, group: str, masters: Sequence[str]) -> ConsumerConnection | None:
        try:
            return await self.consumer_connections(group, masters=masters)
        except AdminError as exc:
            if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
                return None
            raise

    async def group_summaries(self, groups: Iterable[str] | None = None) -> list[GroupSummary]:
        """A summary of every group (default: ``group_list()``), a few groups at a time."""
        names = list(groups) if groups is not None else await self.group_list()
        masters = await self._masters()  # once for all groups, not twice per group
        limit = asyncio.Semaphore(_GROUP_SUMMARY_CONCURRENCY)

        async def one(name: str) -> GroupSummary:
            async with limit:
                return await self.group_summary(name, masters=masters)

        return await self._gather(one(name) for name in names)

    async def create_or_update_subscription_group(
        self, config: SubscriptionGroupConfig, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        """Store a group's config on every master of ``cluster`` or on one broker; return the addresses."""
        if cluster is None and broker_addr is None:
            raise AdminError("give the cluster or the broker address to update the group on")
        problem = config.problem()
        if problem is not None:
            raise AdminError(problem)
        addrs = await self._masters(cluster=cluster, broker_addr=broker_addr)
        body = orjson.dumps(config.to_json())
        await self._ask_each(addrs, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
        return addrs

    async def delete_subscription_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        remove_offset: bool = False,
    ) -> list[str]:
        """Delete a group's config (and with ``remove_offset`` its offsets and retry topic)."""
        if cluster is None and broker_addr is None:
            raise AdminError("give the cluster or the broker address to delete the group from")
        addrs = await self._masters(cluster=cluster, broker_addr=broker_addr)
        fields = {"groupName": group, "removeOffset": remove_offset}
        # The broker drops the group's retry topic itself and re-registers without it.
        await self._ask_each(addrs, RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)
        return addrs
