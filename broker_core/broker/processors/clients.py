"""HEART_BEAT (34), UNREGISTER_CLIENT (35) and GET_CONSUMER_LIST_BY_GROUP (38)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.filters import sql_filter
from broker_core.broker.groups import group_not_exist_remark
from broker_core.broker.retry import ensure_send_back_topic
from broker_core.errors import ResponseError, StoreError
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader
from broker_core.sql92 import is_sql92
from broker_core.topics import retry_topic

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)


class ClientProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self._watched: set[int] = set()
        # The consumer-offsets write under way, and the next one, which unregisters arriving
        # meanwhile wait for (see ``_persist_offsets``).
        self._writing: asyncio.Future[str] | None = None
        self._next_write: asyncio.Future[str] | None = None

    def check_client_config(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG: may this broker serve the consumer's subscription?

        Java's push and lite-pull consumers ask at ``start()`` for each subscription that is
        not by tag, and fail to start on a refusal.  RocketMQ's answers: SUCCESS for a tag
        subscription (or none); SYSTEM_ERROR "The broker does not support consumer to
        filter message by SQL92" without ``enablePropertyFilter``; SUBSCRIPTION_PARSE_FAILED
        for an expression that does not compile (here with what is wrong and where).
        """
        try:
            body = orjson.loads(request.body) if request.body else {}
        except orjson.JSONDecodeError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the check body is not JSON: {exc}")
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(sub, dict):
            return request.response(ResponseCode.SUCCESS)
        expression_type = sub.get("expressionType")
        if not is_sql92(expression_type if isinstance(expression_type, str) else None):
            return request.response(ResponseCode.SUCCESS)
        try:
            sql_filter(
                str(sub.get("subString") or ""),
                str(expression_type),
                enabled=self.broker.config.enable_property_filter,
            )
        except ResponseError as exc:
            return request.response(exc.code, exc.remark)
        return request.response(ResponseCode.SUCCESS)

    def heartbeat(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Register the client's producer and consumer groups.

        With ``autoCreateSubscriptionGroup = false`` a consumer group this broker does not
        know is refused here, not only at its pulls.  RocketMQ 4.9 answers such a heartbeat
        SUCCESS and registers the consumer anyway, whose pulls then all fail: the consumer
        looks online in every tool while it cannot consume.  Here the unknown groups are
        left out (no membership, no retry topic) and the answer is
        SUBSCRIPTION_GROUP_NOT_EXIST naming them and the setting, so the refusal shows in
        the client's log; the rest of the heartbeat (producers, known groups) still counts.
        The official C++ and Java clients log a refused heartbeat and carry on, sending the
        next one on their timer: once the group is created they are served.
        """
        try:
            body = orjson.loads(request.body) if request.body else {}
        except orjson.JSONDecodeError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"the heartbeat body is not JSON: {exc}")
        if not isinstance(body, dict) or not body.get("clientID"):
            return request.response(ResponseCode.SYSTEM_ERROR, "the heartbeat body lacks clientID")
        refused = self._drop_unknown_groups(body)
        try:
            changed = self.broker.clients.heartbeat(
                body, conn, language=request.language, version=request.version, now_ms=self.broker.clock_ms()
            )
        except (KeyError, TypeError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed heartbeat: {exc!r}")
        self._watch(conn)
        for consumer in body.get("consumerDataSet") or []:
            self._ensure_group(str(consumer["groupName"]))
        for group in changed:
            self.broker.notify_ids_changed(group)
        if refused:
            remark = "; ".join(group_not_exist_remark(group) for group in refused)
            log.warning("heartbeat of %s refused: %s", body.get("clientID"), remark)
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark)
        return request.response()

    def _drop_unknown_groups(self, body: dict[str, Any]) -> list[str]:
        """Take the consumer groups the broker may not serve out of ``body``; return their names.

        A group is known when it is stored, or created now because autoCreateSubscriptionGroup
        is on (RocketMQ's ``findSubscriptionGroupConfig``).
        """
        consumers = body.get("consumerDataSet")
        if not isinstance(consumers, list):
            return []
        auto_create = self.broker.config.auto_create_subscription_group
        kept, refused = [], []
        for consumer in consumers:
            group = str(consumer.get("groupName", "")) if isinstance(consumer, dict) else ""
            if group and self.broker.groups.find(group, auto_create=auto_create) is None:
                refused.append(group)
            else:
                kept.append(consumer)
        body["consumerDataSet"] = kept
        return refused

    def _ensure_group(self, group: str) -> None:
        """A known consumer group gets its retry topic, with the group's retryQueueNums queues."""
        config = self.broker.groups.find(group, auto_create=self.broker.config.auto_create_subscription_group)
        if config is not None:
            ensure_send_back_topic(self.broker, retry_topic(group), max(1, config.retry_queue_nums))

    def _watch(self, conn: Any) -> None:
        if id(conn) in self._watched:
            return
        self._watched.add(id(conn))

        def closed(c: Any) -> None:
            self._watched.discard(id(c))
            for group in self.broker.clients.connection_closed(c):
                self.broker.notify_ids_changed(group)

        conn.add_close_callback(closed)

    async def unregister_client(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Forget the client's groups; for a consumer group, write the consumer offsets to
        disk before answering.

        A consumer that shuts down commits its offsets (UPDATE_CONSUMER_OFFSET, which only
        changes the table in memory) and then unregisters, our clients as the official Java
        and C++ ones do, on the same connection: by the time this request is handled its
        final commits are in the table, and once it is answered they are on disk
        (``consumerOffset.json``, written atomically and fsynced).  A broker killed right
        after redelivers nothing to it.

        The worst case that remains is a consumer still running when the broker dies: its
        offsets on disk are those of the last periodic write (the offset-persistence job,
        every 5 s: RocketMQ's ``flushConsumerOffsetInterval``; up to the job's lease if the
        platform's passes stop), on top of its own commit period (5 s), so what it consumed
        in those seconds is delivered again (at-least-once).  A consumer whose unregister the
        broker never answered (it died first) is in that case too.  If the disk refuses the
        write, the answer is SYSTEM_ERROR saying so (the client logs it), though the client
        is unregistered all the same.
        """
        header = UnregisterClientRequestHeader.from_fields(request.ext_fields)
        consumer_group = header.consumer_group or ""
        changed = self.broker.clients.unregister(
            header.client_id, header.producer_group or "", consumer_group
        )
        for group in changed:
            self.broker.notify_ids_changed(group)
        if consumer_group and self.broker.store is not None:
            problem = await self._persist_offsets()
            if problem:
                log.warning("unregistering %s of %s: %s", header.client_id, consumer_group, problem)
                return request.response(
                    ResponseCode.SYSTEM_ERROR,
                    f"unregistered, but the consumer offsets are not on disk: {problem}",
                )
        return request.response()

    async def _persist_offsets(self) -> str:
        """Write the consumer offsets now; return what went wrong ('' when they are on disk).

        Unregisters that arrive while a write runs share the next one (which starts after
        they all committed), so consumers shutting down together cost one write each round,
        not one each.
        """
        if self._next_write is None:
            self._next_write = asyncio.ensure_future(self._write_offsets())
        return await asyncio.shield(self._next_write)

    async def _write_offsets(self) -> str:
        if self._writing is not None:
            await asyncio.wait([self._writing])
        self._writing, self._next_write = self._next_write, None
        store = self.broker.store
        assert store is not None
        try:
            ok = await asyncio.get_running_loop().run_in_executor(None, store.persist_offsets)
        except (StoreError, OSError) as exc:
            return str(exc)
        finally:
            self._writing = None
        return "" if ok is not False else "the disk refused the write (see the broker's log)"

    def consumer_list(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        group = GetConsumerListByGroupRequestHeader.from_fields(request.ext_fields).consumer_group
        ids = self.broker.clients.consumer_ids(group)
        if not ids:
            return request.response(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.response(body=orjson.dumps({"consumerIdList": ids}))
