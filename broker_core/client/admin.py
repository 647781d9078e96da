"""AdminClient: the typed admin API over the remoting protocol (mqadmin's calls, in asyncio).

The console, Celery jobs, Spark reports and the ``quiver-admin`` CLI all manage a cluster
through this one class.  It finds brokers through the nameservers (cluster info, topic
routes; one nameserver after another until one answers) and sends admin requests to the
broker masters (brokerId 0).  Callers get dataclasses (``broker_core.client.routes``,
``broker_core.client.adminmodels``, ``MessageExt``), never frames; a refusal raises
``AdminError`` with the response code and remark, no answer at all
``AdminUnreachableError``.

Requests to several brokers go out concurrently; when any of them fails the whole call
fails (after every request has finished), so a result is never silently partial.

Thread-safety: event-loop only, like the ``RemotingClient`` underneath.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, ParamSpec, TypeVar

import orjson

from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.broker.maintenance import JOBS
from broker_core.broker.topics import TopicConfig
from broker_core.client.adminmessages import MessageOperations
from broker_core.client.adminmodels import (
    ClientConnection,
    ConsumerConnection,
    ConsumeStats,
    GroupSummary,
    MaintenanceRun,
    MaintenanceStatus,
    OffsetSnapshot,
    QueueProgress,
    QueueStat,
    TopicStats,
    as_message_queue,
    merge_connections,
    parse_properties_text,
)
from broker_core.client.routes import ClusterInfo, TopicRoute
from broker_core.errors import AdminError, AdminUnreachableError, BrokerCoreError, MessageIllegalError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting import fastjson
from broker_core.remoting.acl import sign_request
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.store.message import (
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    RecordFormatError,
    decode_message_id,
    iter_records,
)
from broker_core.topics import AUTO_CREATE_TOPIC_KEY_TOPIC, RETRY_GROUP_TOPIC_PREFIX

__all__ = ["MAINTENANCE_JOBS", "AdminClient", "parse_namesrv_addr"]

MAINTENANCE_JOBS: Final = JOBS  # the broker's own list
"""The broker maintenance jobs QUIVER_RUN_MAINTENANCE_JOB can run (``broker.maintenance.JOBS``,
repeated here so that clients need not import the broker's machinery)."""

ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"
LONG_MAX: Final = 2**63 - 1
DEFAULT_QUERY_MAX_NUM: Final = 64
"""The most a broker returns for one QUERY_MESSAGE (RocketMQ's ``maxQueryNum`` default)."""

_GROUP_SUMMARY_CONCURRENCY = 8
_NOT_HERE = frozenset({ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST})

T = TypeVar("T")
P = ParamSpec("P")


def parse_namesrv_addr(addrs: str | Sequence[str] | None) -> list[str]:
    """``"a:9876;b:9876"`` (RocketMQ's namesrvAddr; commas too) or a list -> addresses, in order."""
    if not addrs:
        return []
    parts = addrs.replace(",", ";").split(";") if isinstance(addrs, str) else list(addrs)
    return [p.strip() for p in parts if p.strip()]


def _code_name(code: int) -> str:
    try:
        return f"{ResponseCode(code).name} ({code})"
    except ValueError:
        return f"code {code}"


def _request_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"


class AdminClient(MessageOperations):
    """Manage a cluster through its nameservers: ``async with AdminClient("ns:9876") as admin``.

    Args:
        namesrv_addr: nameserver addresses, ``"a:p;b:p"`` or a sequence.  May be empty
            for calls that name their broker (``broker_config(addr)``...); the others then
            raise ``AdminError``.
        timeout: seconds to wait for each response.
        connect_timeout: seconds to wait for each new connection.
        remoting: a client to share (not closed by ``close``); by default one of our own.
        access_key, secret_key: an ACL account (``plain_acl.yml``); when given, every
            request is signed with it, as RocketMQ's tools do for a broker with ``aclEnable``.
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str] | None,
        *,
        timeout: float = 5.0,
        connect_timeout: float = 3.0,
        remoting: RemotingClient | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        if bool(access_key) != bool(secret_key):
            raise AdminError("an ACL account needs both an access key and a secret key")
        self._credentials = (access_key, secret_key) if access_key and secret_key else None
        self.namesrv_addrs = parse_namesrv_addr(namesrv_addr)
        self.timeout = timeout
        self._remoting = remoting if remoting is not None else RemotingClient(connect_timeout=connect_timeout)
        self._owns_remoting = remoting is None
        self._namesrv_index = 0  # the last nameserver that answered is asked first

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close our connections (a shared ``remoting`` client is left open)."""
        if self._owns_remoting:
            await self._remoting.close()

    # -- transport ---------------------------------------------------------------------------

    async def _send(
        self, addr: str, code: int, fields: Mapping[str, Any] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Send one request and return whatever the remote answered."""
        request = RemotingCommand.request(code, dict(fields or {}), body)
        if self._credentials is not None:
            sign_request(request, *self._credentials)
        try:
            return await self._remoting.invoke(addr, request, self.timeout)
        except RemotingError as exc:
            reason = str(exc).removeprefix(f"{addr}: ")
            raise AdminUnreachableError(
                f"{addr} did not answer {_request_name(code)}: {reason}", addr=addr
            ) from exc

    async def _invoke(
        self,
        addr: str,
        code: int,
        fields: Mapping[str, Any] | None = None,
        body: bytes = b"",
        *,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Send one request; return the response when its code is in ``accept``."""
        response = await self._send(addr, code, fields, body)
        if response.code not in set(accept):
            raise self._refusal(addr, code, response)
        return response

    @staticmethod
    def _refusal(addr: str, code: int, response: RemotingCommand) -> AdminError:
        remark = response.remark or ""
        return AdminError(
            f"{addr} refused {_request_name(code)}: {_code_name(response.code)}"
            + (f": {remark}" if remark else ""),
            code=response.code,
            remark=remark,
            addr=addr,
        )

    async def _namesrv(
        self,
        code: int,
        fields: Mapping[str, Any] | None = None,
        *,
        accept: Iterable[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Ask the nameservers in turn until one answers (any answer, refusals included)."""
        self._need_namesrv()
        failures = []
        count = len(self.namesrv_addrs)
        for step in range(count):
            index = (self._namesrv_index + step) % count
            addr = self.namesrv_addrs[index]
            try:
                response = await self._send(addr, code, fields)
            except AdminUnreachableError as exc:
                failures.append(str(exc))
                continue
            self._namesrv_index = index
            if response.code not in set(accept):
                raise self._refusal(addr, code, response)
            return response
        raise AdminUnreachableError("no nameserver answered: " + "; ".join(failures))

    def _need_namesrv(self) -> None:
        if not self.namesrv_addrs:
            raise AdminError("no nameserver address given (namesrvAddr, e.g. 127.0.0.1:9876)")

    @staticmethod
    def _json(response: RemotingCommand, what: str) -> Any:
        """The response body as JSON (fastjson's dialect accepted)."""
        try:
            return fastjson.loads(response.body) if response.body else {}
        except (fastjson.FastjsonError, UnicodeDecodeError) as exc:
            raise AdminError(f"malformed {what} body: {exc}", code=response.code) from exc

    async def _gather(self, calls: Iterable[Awaitable[T]]) -> list[T]:
        """Run ``calls`` concurrently; raise the first failure once all have finished."""
        results = await asyncio.gather(*calls, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return results  # type: ignore[return-value]

    async def _ask_each(
        self,
        addrs: Iterable[str],
        code: int,
        fields: Mapping[str, Any] | None = None,
        body: bytes = b"",
        *,
        skip: Iterable[int] = (),
    ) -> dict[str, RemotingCommand]:
        """Send one request to every address; successes by address.

        Answers whose code is in ``skip`` mean "nothing here" and are left out; any other
        refusal, or a broker that does not answer, fails the call.
        """
        addr_list = sorted(set(addrs))
        accept = {ResponseCode.SUCCESS, *skip}
        responses = await self._gather(self._invoke(a, code, fields, body, accept=accept) for a in addr_list)
        return {a: r for a, r in zip(addr_list, responses, strict=True) if r.code == ResponseCode.SUCCESS}

    # -- nameserver --------------------------------------------------------------------------

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

    # -- topics ------------------------------------------------------------------------------

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

    async def _each_namesrv(self, code: int, fields: Mapping[str, Any]) -> list[str]:
        """Send to every nameserver (they share nothing); return those that answered.

        A nameserver that is down is skipped: it holds no routes until brokers register
        with it again, and they register their current tables.  Only when none answers
        does the call fail.
        """
        self._need_namesrv()
        results = await asyncio.gather(
            *(self._invoke(addr, code, fields) for addr in self.namesrv_addrs), return_exceptions=True
        )
        answered, failures = [], []
        for addr, result in zip(self.namesrv_addrs, results, strict=True):
            if isinstance(result, AdminUnreachableError):
                failures.append(str(result))
            elif isinstance(result, BaseException):
                raise result
            else:
                answered.append(addr)
        if not answered:
            raise AdminUnreachableError("no nameserver answered: " + "; ".join(failures))
        return answered

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
            masters.values(), RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}, skip=_NOT_HERE
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

    # -- consumer groups -------------------------------------------------------------------

    async def consume_stats(
        self, group: str, topic: str | None = None, *, masters: Sequence[str] | None = None
    ) -> ConsumeStats:
        """``group``'s progress on every queue (of ``topic``, or of all it consumes).

        Every master is asked: a group's offsets live on each broker it consumed from.

        Raises:
            AdminError: code SUBSCRIPTION_GROUP_NOT_EXIST when no broker knows the group.
        """
        addrs = masters if masters is not None else await self._masters()
        fields = {"consumerGroup": group} if topic is None else {"consumerGroup": group, "topic": topic}
        responses = await self._ask_each(
            addrs, RequestCode.GET_CONSUME_STATS, fields, skip={*_NOT_HERE, ResponseCode.QUERY_NOT_FOUND}
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
            {"consumerGroup": group},
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
            {"producerGroup": group},
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
        configs, offsets, topics = await self._gather(
            [
                self._gather(self.subscription_groups(a) for a in addrs),
                self._gather(self.consumer_offsets(a) for a in addrs),
                self.topic_list(),
            ]
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
        stats, connection = await self._gather(
            [self._stats_or_none(group, masters), self._connection_or_none(group, masters)]
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

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: to the end), on every master of the topic.

        Online consumers are told by their broker to jump there.  Without ``force`` a
        queue whose committed offset is already below the new one is left alone.
        Returns the new offset of every queue.
        """
        masters = await self._route_masters(topic)
        fields = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force}
        responses = await self._ask_each(masters.values(), RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
        offsets: dict[MessageQueue, int] = {}
        for response in responses.values():
            table = self._json(response, "reset offset").get("offsetTable") or {}
            for key, offset in table.items():
                offsets[as_message_queue(key)] = int(offset)
        return dict(sorted(offsets.items()))

    # -- messages ------------------------------------------------------------------------------

    async def reset_offsets_exactly(
        self, group: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Move ``group`` to the given offset of each queue (within its stored range); online
        consumers are told at once, an offline group resumes there.  Returns the new offsets."""
        done: dict[MessageQueue, int] = {}
        for queue, offset in sorted(offsets.items()):
            masters = await self._route_masters(queue.topic)
            addr = masters.get(queue.broker_name)
            if addr is None:
                raise AdminError(f"broker {queue.broker_name!r} has no master serving {queue.topic!r}")
            fields = {
                "topic": queue.topic,
                "group": group,
                "timestamp": -1,
                "isForce": True,
                "queueId": queue.queue_id,
                "offset": offset,
            }
            await self._invoke(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            done[queue] = offset
        return done

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message with this offset msgId (store host + commit-log offset).

        Raises:
            AdminError: not an offset msgId, a host that is no known broker, or no message there.
        """
        try:
            addr, offset = decode_message_id(offset_msg_id.strip())
        except MessageIllegalError as exc:
            raise AdminError(f"{exc}; an offset msgId is 32 hex characters") from exc
        info = await self.cluster_info()
        if info.broker_by_addr(addr) is None:
            raise AdminError(
                f"msgId {offset_msg_id} points at {addr}, which is no broker the nameservers know "
                "(a client msgId? query it by unique key with its topic)",
                code=ResponseCode.QUERY_NOT_FOUND,
            )
        response = await self._invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        messages = self._records(response)
        if not messages:
            raise AdminError(
                f"{addr} has no message at offset {offset}", code=ResponseCode.QUERY_NOT_FOUND, addr=addr
            )
        return messages[0]

    @staticmethod
    def _records(response: RemotingCommand) -> list[MessageExt]:
        try:
            return list(iter_records(response.body))
        except RecordFormatError as exc:
            raise AdminError(f"malformed message records: {exc}") from exc

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin_ms: int = 0,
        end_ms: int = LONG_MAX,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS include ``key`` (or whose UNIQ_KEY is ``key``),
        stored within [begin_ms, end_ms], from every broker of the topic, oldest first.

        Each broker returns at most ``max_num``.  ``unique_key`` asks for the client msgId
        (UNIQ_KEY) instead; see ``query_by_unique_key``.
        """
        route = await self.topic_route(topic)
        fields: dict[str, Any] = {
            "topic": topic,
            "key": key,
            "maxNum": max_num,
            "beginTimestamp": begin_ms,
            "endTimestamp": end_ms,
        }
        if unique_key:
            fields["_UNIQUE_KEY_QUERY"] = "true"
        responses = await self._ask_each(
            route.read_addrs().values(),
            RequestCode.QUERY_MESSAGE,
            fields,
            skip={ResponseCode.QUERY_NOT_FOUND},
        )
        found: dict[str, MessageExt] = {}
        for response in responses.values():
            for msg in self._records(response):
                found.setdefault(msg.msg_id, msg)
        return sorted(found.values(), key=lambda m: (m.store_timestamp, m.store_host, m.commit_log_offset))

    async def query_by_unique_key(self, topic: str, msg_id: str) -> list[MessageExt]:
        """The stored copies of the message with client msgId ``msg_id`` (its UNIQ_KEY).

        Usually one; more when the producer retried a send that had in fact been stored.
        """
        messages = await self.query_by_key(topic, msg_id, unique_key=True)
        return [m for m in messages if m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == msg_id]

    # -- brokers -----------------------------------------------------------------------------

    async def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """The broker's runtime figures (GET_BROKER_RUNTIME_INFO), all values as strings."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        table = self._json(response, "runtime info").get("table") or {}
        return {str(k): str(v) for k, v in sorted(table.items())}

    async def broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's running settings by RocketMQ key name (GET_BROKER_CONFIG)."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_CONFIG)
        return dict(sorted(parse_properties_text(response.body.decode("utf-8", errors="replace")).items()))

    async def update_broker_config(self, broker_addr: str, changes: Mapping[str, str]) -> dict[str, str]:
        """Change settings of the running broker (UPDATE_BROKER_CONFIG; all or nothing, until
        it restarts) and return its settings as they now are."""
        if not changes:
            raise AdminError("no setting to change")
        text = "".join(f"{key}={value}\n" for key, value in changes.items())
        await self._invoke(broker_addr, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode("utf-8"))
        return await self.broker_config(broker_addr)

    async def run_maintenance(
        self, broker_addr: str, job: str, *, scheduled: bool = False, lease_ms: int | None = None
    ) -> MaintenanceRun:
        """Run one maintenance job on the broker now and return how it went.

        ``scheduled``: this is the platform's schedule driving the job, so the broker's own
        timer stands by for the job's lease (at least ``lease_ms`` when given); an
        operator's one-off run leaves the broker's timers as they are.
        """
        if job not in MAINTENANCE_JOBS:
            raise AdminError(f"unknown maintenance job {job!r} (one of {', '.join(MAINTENANCE_JOBS)})")
        fields = {"job": job}
        if scheduled:
            fields["driver"] = "platform"
            if lease_ms is not None:
                fields["leaseMillis"] = str(lease_ms)
        response = await self._invoke(broker_addr, RequestCode.QUIVER_RUN_MAINTENANCE_JOB, fields)
        return MaintenanceRun.from_json(job, self._json(response, "maintenance run"))

    async def maintenance_status(self, broker_addr: str) -> MaintenanceStatus:
        """Who drives each maintenance job on the broker (platform, or the broker on
        fallback), its lease, and its last run."""
        response = await self._invoke(broker_addr, RequestCode.QUIVER_GET_MAINTENANCE_STATUS)
        return MaintenanceStatus.from_json(self._json(response, "maintenance status"))

    async def offset_snapshot(self, broker_addr: str) -> OffsetSnapshot:
        """Every committed offset on the broker beside its queue's offsets, and the put/get
        totals, in one call (what the platform's offset history records)."""
        response = await self._invoke(broker_addr, RequestCode.QUIVER_GET_OFFSET_SNAPSHOT)
        return OffsetSnapshot.from_json(self._json(response, "offset snapshot"))

    # -- ACL (plain_acl.yml accounts) ---------------------------------------------------------

    async def acl_config(self, broker_addr: str) -> dict[str, Any]:
        """The broker's ACL: ``globalWhiteAddrs`` and ``plainAccessConfigs`` (secrets included)."""
        response = await self._invoke(broker_addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        return dict(self._json(response, "ACL config"))

    async def update_acl_account(self, broker_addr: str, account: Mapping[str, Any]) -> None:
        """Create or update one account (accessKey, secretKey, whiteRemoteAddress, admin,
        defaultTopicPerm, defaultGroupPerm, topicPerms and groupPerms as ``a=PUB,b=SUB``)."""
        fields = {
            k: ",".join(v) if isinstance(v, list | tuple) else v for k, v in account.items() if v is not None
        }
        await self._invoke(broker_addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields)

    async def delete_acl_account(self, broker_addr: str, access_key: str) -> None:
        await self._invoke(broker_addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    async def update_global_white_addrs(self, broker_addr: str, addresses: Sequence[str]) -> None:
        fields = {"globalWhiteAddrs": ",".join(addresses)}
        await self._invoke(broker_addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields)

    async def schedule_status(self, broker_addr: str) -> dict[str, Any]:
        """Delayed messages waiting per level (next due time) and pending half messages (age)."""
        response = await self._invoke(broker_addr, RequestCode.QUIVER_GET_SCHEDULE_STATUS)
        return dict(self._json(response, "schedule status"))


def _malformed_answers_are_admin_errors(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Turn an answer of the wrong shape (a field missing or of the wrong type, which
    surfaces as KeyError, TypeError... while reading it) into an AdminError, so callers
    (the console, Celery jobs, the CLI) handle one exception type."""

    @functools.wraps(method)
    async def checked(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except BrokerCoreError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise AdminError(f"{method.__name__}: malformed answer: {type(exc).__name__}: {exc}") from exc

    return checked


for _name in dir(AdminClient):
    _method = getattr(AdminClient, _name)
    if not _name.startswith("_") and inspect.iscoroutinefunction(_method):
        setattr(AdminClient, _name, _malformed_answers_are_admin_errors(_method))
