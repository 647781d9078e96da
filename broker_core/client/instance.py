"""The client instance: what a process's producers and consumers of one client id share.

RocketMQ's ``MQClientInstance``: one per process and client id (``ip@instance``).  It owns
the connections to nameservers and brokers, the cache of topic routes (re-read every
30 s and on a miss), the heartbeats every broker of interest gets every 30 s, and the
requests brokers send to clients.  Shutting the last user down unregisters its groups
from every broker and closes the connections.

The instance runs its own asyncio loop on a daemon thread, so that applications, Celery
tasks and Spark executors can call producers and consumers from any thread without an
event loop of their own; ``submit`` hands a coroutine to that loop and ``call`` waits for
it.  Application callbacks never run on that loop (``run_callback`` gives them a small
thread pool, RocketMQ's callback executor): a callback that blocks, or sends
synchronously, would otherwise stall or deadlock every request of the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import random
import threading
import zlib
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import orjson
import uvloop

from broker_core.client.adminmodels import as_message_queue
from broker_core.client.config import ClientConfig
from broker_core.client.requests import BrokerRequests
from broker_core.client.routes import TopicRoute
from broker_core.errors import BrokerRefusedError, ClientError, NoRouteError
from broker_core.messagequeue import MessageQueue
from broker_core.model.groupconfig import MASTER_ID
from broker_core.model.message import (
    PROPERTY_PRODUCER_GROUP,
    RecordFormatError,
    decode_properties,
    decode_record,
)
from broker_core.remoting import fastjson
from broker_core.remoting.acl import sign_request
from broker_core.remoting.blocking import BlockingChannels
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
)
from broker_core.remoting.server import Handler
from broker_core.sql92 import is_sql92

if TYPE_CHECKING:
    from broker_core.client.consumer.common import SubscriptionData
    from broker_core.client.producer.producer import Producer

log = logging.getLogger(__name__)

T = TypeVar("T")
PROPERTY_CORRELATION_ID = "CORRELATION_ID"  # RocketMQ MessageConst: pairs a reply with its request


class GroupMember(Protocol):
    """A producer or consumer registered with the instance under its group."""

    group: str

    def heartbeat_data(self) -> dict[str, Any]:
        """Its entry in a heartbeat's producerDataSet or consumerDataSet."""
        ...


class ClientInstance:
    """Connections, routes and heartbeats shared by one client id's producers and consumers."""

    _registry: dict[str, ClientInstance] = {}
    _registry_lock = threading.Lock()

    @classmethod
    def acquire(cls, config: ClientConfig) -> ClientInstance:
        """The running instance for ``config``'s client id (started on first use)."""
        with cls._registry_lock:
            instance = cls._registry.get(config.client_id)
            if instance is None or instance._stopped:
                instance = cls._registry[config.client_id] = cls(config)
                instance._start()
            instance._users += 1
            return instance

    def release(self) -> None:
        """One user fewer; the last one shuts the instance down."""
        with ClientInstance._registry_lock:
            self._users -= 1
            if self._users > 0:
                return
            if ClientInstance._registry.get(self.config.client_id) is self:
                del ClientInstance._registry[self.config.client_id]
        self._shutdown()

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.client_id = config.client_id
        self.routes: dict[str, TopicRoute] = {}
        self.producers: dict[str, GroupMember] = {}
        self.consumers: dict[str, GroupMember] = {}
        self._users = 0
        self._stopped = False
        self._loop = uvloop.new_event_loop()  # as the servers run: less Python per request
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"quiver-client-{self.client_id}", daemon=True
        )
        self._remoting: RemotingClient | None = None
        self._timers: list[asyncio.Task[None]] = []
        # Guards _stopped against submit(): nothing is handed to a loop about to stop.
        self._state_lock = threading.Lock()
        # Coroutines submitted from other threads, started together at the loop's next turn.
        self._submitted: list[tuple[Coroutine[Any, Any, Any], concurrent.futures.Future[Any]]] = []
        self._drain_scheduled = False
        # The coroutines submitted and not finished: failed, not orphaned, at shutdown.
        self._inflight: set[asyncio.Task[Any]] = set()
        # The nameserver to ask first (update_route): a random one, then the last that answered.
        self._namesrv_index = random.randrange(1 << 16)
        # Broker addresses that have had a heartbeat: a new one gets its first at once.
        self._heartbeated: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._callbacks = concurrent.futures.ThreadPoolExecutor(
            max_workers=4, thread_name_prefix=f"quiver-callback-{self.client_id}"
        )
        self._inner_producer: Producer | None = None
        # Sockets of threads that block on their own requests (synchronous sends).
        self._blocking = BlockingChannels(
            connect_timeout=config.request_timeout_ms / 1000, busy_poll_micros=config.busy_poll_micros
        )
        # Typed broker requests (send, pull, consumer list...) over ``invoke``.
        self.requests = BrokerRequests(self.invoke)

    # -- the loop thread -------------------------------------------------------------------

    def _start(self) -> None:
        self._thread.start()
        self.submit(self._open()).result()

    async def _open(self) -> None:
        self._remoting = RemotingClient(
            connect_timeout=self.config.request_timeout_ms / 1000, tls=self.config.tls_context()
        )
        self._remoting.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._on_consumer_ids_changed)
        self._remoting.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._on_reset_offset)
        self._remoting.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check_transaction_state)
        self._remoting.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._on_running_info)
        self._remoting.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._on_consume_message_directly)
        self._remoting.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, self._on_consumer_status)
        self._remoting.register(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, self._on_reply_message)
        self._timers = [
            asyncio.create_task(self._every(self.config.poll_name_server_interval, self.refresh_routes)),
            asyncio.create_task(self._every(self.config.heartbeat_broker_interval, self.heartbeat_all)),
        ]

    def _on_consumer_ids_changed(self, request: RemotingCommand, conn: Any) -> None:
        """A broker says a group's members changed: that group's consumer rebalances now."""
        member = self.consumers.get(
            NotifyConsumerIdsChangedRequestHeader.from_fields(request.ext_fields).consumer_group
        )
        notify = getattr(member, "on_consumer_ids_changed", None)
        if notify is not None:
            notify()

    def _on_check_transaction_state(self, request: RemotingCommand, conn: Any) -> None:
        """A broker asks about a half message: the producer of its group (PGROUP) answers.

        The body is the half message's record; the answer goes back to the broker that
        asked, the connection's peer.
        """
        try:
            header = CheckTransactionStateRequestHeader.from_fields(request.ext_fields)
            msg = decode_record(request.body)
            msg.body = msg.uncompressed_body()  # the checker sees the body as it was sent
        except (RecordFormatError, ValueError, zlib.error) as exc:
            log.warning("ignoring a malformed transaction check from %s: %s", conn.remote_address, exc)
            return
        group = msg.properties.get(PROPERTY_PRODUCER_GROUP, "")
        check = getattr(self.producers.get(group), "check_transaction_state", None)
        if check is None:
            log.warning("transaction check for group %r from %s: no producer", group, conn.remote_address)
            return
        check(conn.remote_address, msg, header)

    def _on_running_info(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """A console asks a consumer of ours about itself (relayed by the broker)."""
        member = self.consumers.get(
            GetConsumerRunningInfoRequestHeader.from_fields(request.ext_fields).consumer_group
        )
        info = getattr(member, "running_info", None)
        if info is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "no consumer of that group in this client")
        return request.response(body=fastjson.dumps(info()))

    async def _on_consume_message_directly(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """A console has a consumer of ours consume one message now (relayed by the broker):
        its listener runs once, off the loop, and its ConsumeMessageDirectlyResult is the body."""
        header = ConsumeMessageDirectlyRequestHeader.from_fields(request.ext_fields)
        group = header.consumer_group
        member = self.consumers.get(group)
        if member is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer"
            )
        consume = getattr(member, "consume_message_directly", None)
        if consume is None:
            return request.response(
                ResponseCode.SYSTEM_ERROR,
                f"consumer group {group} of client {self.client_id} has no message listener "
                "(a pull consumer): it cannot consume a message directly",
            )
        try:
            msg = decode_record(request.body)
        except (RecordFormatError, ValueError) as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed message record: {exc}")
        result = await consume(msg, header.broker_name or "")
        return request.response(body=fastjson.dumps(result))

    def _on_consumer_status(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """A broker asks a group's offsets of a topic here (RocketMQ's GetConsumerStatusBody:
        queue -> offset; all topics when none is named, nothing for an unknown group)."""
        member = self.consumers.get(request.ext_fields.get("group", ""))
        status = getattr(member, "consumer_status", None)
        offsets = status(request.ext_fields.get("topic", "")) if status is not None else {}
        return request.response(body=fastjson.dumps({"messageQueueTable": offsets, "consumerTable": {}}))

    def _on_reply_message(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """A broker pushes the reply to a request-reply message: no request of this client
        waits for one (it sends none), so, as Java's client does with a reply nobody waits
        for, it is acknowledged and logged."""
        log.warning(
            "reply message (correlation %s) from %s: no request of this client waits for it",
            decode_properties(request.ext_fields.get("properties", "")).get(PROPERTY_CORRELATION_ID, ""),
            conn.remote_address,
        )
        return request.response()

    def inner_producer(self) -> Producer:
        """The instance's own producer (RocketMQ's CLIENT_INNER_PRODUCER), made on first use:
        consumers send failed messages to their retry topic through it."""
        from broker_core.client.producer.producer import Producer  # producer imports this module

        with self._state_lock:
            if self._inner_producer is None:
                self._inner_producer = Producer.inner(self)
            return self._inner_producer

    async def run_blocking(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on the callback threads, awaited from the loop (a listener,
        which may block or send synchronously, must not run on the loop)."""
        return await asyncio.get_running_loop().run_in_executor(self._callbacks, partial(fn, *args, **kwargs))

    def _on_reset_offset(self, request: RemotingCommand, conn: Any) -> None:
        """A broker reset a group's offsets (the console, mqadmin): its consumer jumps there."""
        member = self.consumers.get(request.ext_fields.get("group", ""))
        reset = getattr(member, "on_reset_offset", None)
        if reset is None:
            return
        try:
            body = fastjson.loads(request.body) if request.body else {}
            table = body.get("offsetTable") or {}
            if isinstance(table, dict):  # fastjson's MessageQueue-keyed map
                offsets = {as_message_queue(key): int(offset) for key, offset in table.items()}
            else:  # the array form brokers send C++ clients
                offsets = {MessageQueue.from_json(row): int(row["offset"]) for row in table}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring a malformed offset reset from %s: %s", conn.remote_address, exc)
            return
        reset(request.ext_fields.get("topic", ""), offsets)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the instance's loop; a future any thread can wait on.

        A coroutine still running when the instance shuts down fails with ClientError, so
        its future always completes.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._state_lock:
            if self._stopped:
                coro.close()
                raise ClientError(f"client instance {self.client_id} is shut down")
            self._submitted.append((coro, future))
            wake = not self._drain_scheduled
            self._drain_scheduled = True
        if wake:  # one wake-up of the loop for everything submitted meanwhile
            self._loop.call_soon_threadsafe(self._start_submitted)
        return future

    def _start_submitted(self) -> None:
        """On the loop: start the coroutines ``submit`` queued, each chained to its future."""
        with self._state_lock:
            submitted, self._submitted = self._submitted, []
            self._drain_scheduled = False
        for coro, future in submitted:
            if future.cancelled():  # given up on before it started
                coro.close()
                continue
            task = self._loop.create_task(self._tracked(coro))
            task.add_done_callback(partial(_settle_future, future))
            future.add_done_callback(partial(self._cancel_if_cancelled, task))

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the instance's loop and wait for its result (blocking API).

        Refused on the loop's own thread, where waiting would deadlock the instance.
        """
        if threading.get_ident() == self._thread.ident:
            coro.close()
            self.check_may_block()
        return self.submit(coro).result(timeout_s)

    def _cancel_if_cancelled(self, task: asyncio.Task[Any], future: concurrent.futures.Future[Any]) -> None:
        """A caller who cancels the future cancels the coroutine too."""
        if future.cancelled() and not task.done():
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                self._loop.call_soon_threadsafe(task.cancel)

    def run_callback(self, callback: Any, *args: Any) -> None:
        """Run an application callback off the loop thread (RocketMQ's callback executor)."""
        try:
            self._callbacks.submit(callback, *args)
        except RuntimeError:  # the pool is shut down: the instance is gone, run it here
            callback(*args)

    async def _tracked(self, coro: Coroutine[Any, Any, T]) -> T:
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        try:
            return await coro
        except asyncio.CancelledError:
            if self._stopped:
                raise ClientError(f"client instance {self.client_id} shut down during the request") from None
            raise
        finally:
            self._inflight.discard(task)

    def call_soon(self, callback: Any, *args: Any) -> None:
        """Run ``callback(*args)`` on the instance's loop (from any thread)."""
        self._loop.call_soon_threadsafe(callback, *args)

    def register_handler(self, code: int, handler: Handler) -> None:
        """Answer requests that brokers send this client (NOTIFY_CONSUMER_IDS_CHANGED...)."""
        assert self._remoting is not None
        self._remoting.register(code, handler)

    async def _every(self, interval_ms: int, job: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await job()
            except Exception:  # a timer must outlive one bad round
                log.exception("client timer %s failed", getattr(job, "__name__", job))

    def _shutdown(self) -> None:
        """Stop taking work, close (unregister, connections), fail what is still running,
        then stop the loop: no caller is left waiting on a future that can never complete."""
        with self._state_lock:
            if self._stopped:
                return
            self._stopped = True
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
        except Exception:
            log.exception("client instance %s did not close cleanly", self.client_id)
        self._blocking.close()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()
        self._callbacks.shutdown(wait=False)

    async def _close(self) -> None:
        for task in [*self._timers, *self._background]:
            task.cancel()
        await asyncio.gather(*self._timers, *self._background, return_exceptions=True)
        await self.unregister_all()
        if self._remoting is not None:
            await self._remoting.close()
        inflight = list(self._inflight)
        for task in inflight:
            task.cancel()
        await asyncio.gather(*inflight, return_exceptions=True)

    # -- requests --------------------------------------------------------------------------

    async def invoke(
        self, addr: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send ``request`` to ``addr`` (signed when an ACL account is set); its response.

        Raises RemotingError (connect, timeout, closed) for transport failures.
        """
        assert self._remoting is not None
        if self.config.access_key and self.config.secret_key:
            sign_request(request, self.config.access_key, self.config.secret_key)
        timeout = self.config.request_timeout_ms / 1000 if timeout_s is None else timeout_s
        return await self._remoting.invoke(addr, request, timeout)

    def invoke_blocking(self, addr: str, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """``invoke`` done by the calling thread on a socket of its own, without the loop.

        For a caller that would only wait for the loop's answer (synchronous sends): it
        saves the two thread hand-offs.  Refused on the loop's thread, which must not block.
        Raises RemotingError as ``invoke`` does.
        """
        self.check_may_block()
        if self.config.access_key and self.config.secret_key:
            sign_request(request, self.config.access_key, self.config.secret_key)
        return self._blocking.connection(addr).request(request, timeout_s)

    def check_may_block(self) -> None:
        """Raise ClientError on the loop's own thread, where a blocking call would deadlock."""
        if threading.get_ident() == self._thread.ident:
            raise ClientError(
                "a blocking client call was made on the client's own event-loop thread; "
                "it would deadlock: use the async API there"
            )

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        assert self._remoting is not None
        if self.config.access_key and self.config.secret_key:
            sign_request(request, self.config.access_key, self.config.secret_key)
        await self._remoting.invoke_oneway(addr, request)

    # -- routes ----------------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRoute:
        """The cached route of ``topic``, read from the nameservers on a miss.

        Raises NoRouteError when no nameserver knows the topic.
        """
        route = self.routes.get(topic)
        if route is None:
            route = await self.update_route(topic)
        return route

    async def check_subscription(self, group: str, sub: SubscriptionData) -> None:
        """Ask a master broker of ``sub``'s topic whether it serves ``sub`` (CHECK_CLIENT_CONFIG),
        for a SQL92 selector; a tag one needs no asking.  As Java's consumers do at start.

        Raises BrokerRefusedError (the broker's code and remark) or NoRouteError.
        """
        if not is_sql92(sub.expression_type):
            return
        route = await self.route(sub.topic)
        addrs = sorted(route.master_addrs().values())
        if not addrs:
            raise NoRouteError(f"no master broker serves topic {sub.topic!r}")
        await self.requests.check_client_config(addrs[0], self.config.client_id, group, sub.to_json())

    async def update_route(self, topic: str) -> TopicRoute:
        """Ask the nameservers in turn for ``topic``'s route and cache it.

        As RocketMQ's clients do, each instance starts at a random nameserver and keeps
        asking the last one that answered: a nameserver that is down costs one failed
        attempt, not one per lookup, and clients spread over the nameservers.
        """
        addrs = self.config.namesrv_addrs
        if not addrs:
            raise NoRouteError(f"no nameserver address configured (namesrvAddr) to route {topic!r}")
        start = self._namesrv_index % len(addrs)
        problems = []
        for step in range(len(addrs)):
            addr = addrs[(start + step) % len(addrs)]
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            try:
                response = await self.invoke(addr, request)
            except RemotingError as exc:
                problems.append(str(exc))
                continue
            if response.code == ResponseCode.TOPIC_NOT_EXIST:
                problems.append(f"{addr}: {response.remark or 'no route'}")
                continue
            if response.code != ResponseCode.SUCCESS:
                raise BrokerRefusedError(
                    f"{addr} refused the route query for {topic!r}: {response.code} {response.remark or ''}",
                    code=response.code,
                    remark=response.remark or "",
                    addr=addr,
                )
            try:
                route = TopicRoute.from_json(topic, fastjson.loads(response.body))
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"{addr}: malformed route: {exc}")
                continue
            self._namesrv_index = start + step
            self.routes[topic] = route
            self._greet_new_brokers(route)
            return route
        raise NoRouteError(f"no route for topic {topic!r}: " + "; ".join(problems))

    async def refresh_routes(self) -> None:
        """Re-read every cached route (the 30-second timer); a topic gone keeps its old route."""
        for topic in list(self.routes):
            with contextlib.suppress(NoRouteError, BrokerRefusedError):
                await self.update_route(topic)

    def broker_addrs(self, broker_name: str) -> dict[int, str]:
        """A broker name's addresses by broker id, from the cached routes."""
        for route in list(self.routes.values()):  # list(): other threads read it too
            for broker in route.broker_datas:
                if broker.broker_name == broker_name and broker.addrs:
                    return dict(broker.addrs)
        return {}

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs(broker_name).get(MASTER_ID)

    async def find_master(self, broker_name: str, topic: str) -> str:
        """The master address of ``broker_name``, re-reading ``topic``'s route on a miss.

        Raises NoRouteError when the route has no master for it.
        """
        addr = self.master_addr(broker_name)
        if addr is None:
            await self.update_route(topic)
            addr = self.master_addr(broker_name)
        if addr is None:
            raise NoRouteError(f"broker {broker_name!r} has no master address in the route of {topic!r}")
        return addr

    async def find_broker(self, broker_name: str, topic: str, broker_id: int = MASTER_ID) -> str:
        """Where to read ``broker_name``'s queues: its broker ``broker_id`` (the one a pull
        answer suggested), else its master, else its lowest-id slave, re-reading ``topic``'s
        route on a miss (RocketMQ's ``findBrokerAddressInSubscribe``).  Pulls, offsets and
        consumer lists go on from a slave while the master is down.

        Raises NoRouteError when the route has no broker of that name.
        """
        addrs = self.broker_addrs(broker_name)
        if not addrs:
            await self.update_route(topic)
            addrs = self.broker_addrs(broker_name)
        if not addrs:
            raise NoRouteError(f"no address of broker {broker_name!r} in the route of {topic!r}")
        return addrs.get(broker_id) or addrs.get(MASTER_ID) or addrs[min(addrs)]

    # -- groups and heartbeats --------------------------------------------------------------

    async def register_producer(self, member: GroupMember) -> None:
        if member.group in self.producers:
            raise ClientError(f"producer group {member.group!r} is already started in {self.client_id}")
        self.producers[member.group] = member
        await self.heartbeat_all()

    async def register_consumer(self, member: GroupMember) -> None:
        if member.group in self.consumers:
            raise ClientError(f"consumer group {member.group!r} is already started in {self.client_id}")
        self.consumers[member.group] = member
        await self.heartbeat_all()

    async def unregister(self, member: GroupMember, *, consumer: bool) -> None:
        """Forget ``member`` here and on every broker (UNREGISTER_CLIENT)."""
        table = self.consumers if consumer else self.producers
        if table.get(member.group) is not member:
            return
        del table[member.group]
        if consumer:
            header = UnregisterClientRequestHeader(self.client_id, consumer_group=member.group)
        else:
            header = UnregisterClientRequestHeader(self.client_id, producer_group=member.group)
        await self._each_broker(
            lambda: RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_fields())
        )

    async def unregister_all(self) -> None:
        for member in list(self.producers.values()):
            await self.unregister(member, consumer=False)
        for member in list(self.consumers.values()):
            await self.unregister(member, consumer=True)

    def heartbeat_body(self) -> bytes:
        return orjson.dumps(
            {
                "clientID": self.client_id,
                "producerDataSet": [p.heartbeat_data() for p in self.producers.values()],
                "consumerDataSet": [c.heartbeat_data() for c in self.consumers.values()],
            }
        )

    def _greet_new_brokers(self, route: TopicRoute) -> None:
        """Heartbeat, in the background, brokers of ``route`` that have had none yet.

        Without it a broker would learn of this client's groups only at the next 30-second
        round: until then it could not check a transaction back with the producer group, and
        the console would not list the producer.  (Java's first heartbeat round runs one
        second after start, by when the first sends have read their routes.)
        """
        if not self.producers and not self.consumers:
            return
        fresh = {
            addr
            for broker in route.broker_datas
            for broker_id, addr in broker.addrs.items()
            if (broker_id == MASTER_ID or self.consumers) and addr not in self._heartbeated
        }
        if not fresh:
            return
        self._heartbeated.update(fresh)
        body = self.heartbeat_body()
        task = asyncio.get_running_loop().create_task(
            self._to_addrs(fresh, lambda: RemotingCommand.request(RequestCode.HEART_BEAT, body=body))
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def heartbeat_all(self) -> None:
        """One heartbeat to every broker of the cached routes: masters for producers, every
        address when there are consumers (they may pull from slaves)."""
        if not self.producers and not self.consumers:
            return
        body = self.heartbeat_body()
        addrs = self._broker_addrs(masters_only=not self.consumers)
        self._heartbeated.update(addrs)
        await self._to_addrs(addrs, lambda: RemotingCommand.request(RequestCode.HEART_BEAT, body=body))

    async def _each_broker(self, make: Any, *, masters_only: bool = True) -> None:
        await self._to_addrs(self._broker_addrs(masters_only=masters_only), make)

    def _broker_addrs(self, *, masters_only: bool) -> set[str]:
        addrs = set()
        for route in self.routes.values():
            for broker in route.broker_datas:
                for broker_id, addr in broker.addrs.items():
                    if broker_id == MASTER_ID or not masters_only:
                        addrs.add(addr)
        return addrs

    async def _to_addrs(self, addrs: set[str], make: Any) -> None:
        await asyncio.gather(*(self._quietly(addr, make()) for addr in sorted(addrs)))

    async def _quietly(self, addr: str, request: RemotingCommand) -> None:
        try:
            response = await self.invoke(addr, request)
        except RemotingError as exc:
            log.info("%s to %s failed: %s", RequestCode(request.code).name, addr, exc)
            return
        if response.code != ResponseCode.SUCCESS:
            log.warning(
                "%s refused by %s: %s %s",
                RequestCode(request.code).name,
                addr,
                response.code,
                response.remark,
            )


def _settle_future(future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    """Give ``future`` the outcome of ``task`` (asyncio's run_coroutine_threadsafe does this)."""
    if task.cancelled():
        future.cancel()
    if not future.set_running_or_notify_cancel():
        return
    error = task.exception()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(task.result())
