"""Rebalance strategies: which of a topic's queues one consumer of a group should pull.

Every consumer of a group runs the same strategy on the same inputs (all queues of the
topic, all client ids of the group) and keeps its own share, so the strategies must be
deterministic and, to share a group with Java consumers, give exactly what RocketMQ 4.9's
``client.consumer.rebalance`` strategies give:

- ``AllocateMessageQueueAveragely`` (AVG, the default): contiguous blocks;
- ``AllocateMessageQueueAveragelyByCircle`` (AVG_BY_CIRCLE): round robin;
- ``AllocateMessageQueueByConfig`` (CONFIG): a fixed list;
- ``AllocateMessageQueueByMachineRoom`` (MACHINE_ROOM): the queues of chosen rooms;
- ``AllocateMachineRoomNearby`` (MACHINE_ROOM_NEARBY-<inner name>): same room first;
- ``AllocateMessageQueueConsistentHash`` (CONSISTENT_HASH): an MD5 hash ring.

Their behaviour is the same from 4.9.0 to 5.x, except that MACHINE_ROOM checked its input
only from 4.9.4 (before, bad input just gave an empty list); we follow the later form.

**Order is the caller's job.**  The strategies use ``mq_all`` and ``cid_all`` in the order
given, as Java's do; RocketMQ's ``RebalanceImpl`` sorts both before calling (queues by
topic, broker name, queue id; client ids as strings).  ``sort_for_allocate`` does that
sort with Java's string order, and the rebalance service must call it (or pass lists
already in that order) for consumers to agree with each other and with Java.

**Input checks** are RocketMQ's (``AbstractAllocateMessageQueueStrategy.check``): an empty
current client id, queue list or client id list raises ValueError (Java's
IllegalArgumentException); a current client id missing from ``cid_all`` is logged and
gets an empty list (it happens when this consumer's heartbeat has not reached the broker
yet).  CONFIG alone checks nothing.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Protocol

from broker_core.client.consumer.consistenthash import ConsistentHashRouter, HashFunction, md5_hash
from broker_core.messagequeue import MessageQueue

log = logging.getLogger(__name__)

DEFAULT_VIRTUAL_NODE_CNT = 10
"""Virtual nodes per consumer on the CONSISTENT_HASH ring (RocketMQ's default)."""


class AllocateMessageQueueStrategy(Protocol):
    """What the rebalance service needs of a strategy (RocketMQ's interface of that name)."""

    @property
    def name(self) -> str:
        """The strategy's RocketMQ name (``getName()``), shown in logs and consumer info."""
        ...

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """The queues of ``mq_all`` that ``current_cid`` should consume, in a stable order."""
        ...


class MachineRoomResolver(Protocol):
    """Tells which machine room (data centre) a broker's queue and a consumer are in.

    Neither answer may be empty: AllocateMachineRoomNearby refuses (ValueError) an empty one.
    """

    def broker_deploy_in(self, mq: MessageQueue) -> str:
        """The machine room of the broker holding ``mq``."""
        ...

    def consumer_deploy_in(self, client_id: str) -> str:
        """The machine room of the consumer ``client_id``."""
        ...


def java_string_key(value: str) -> bytes:
    """A sort key putting strings in Java's ``String.compareTo`` order (UTF-16 code units).

    Python orders by code point, which differs only for characters above U+FFFF against
    U+E000..U+FFFF; the big-endian UTF-16 bytes compare exactly as Java's chars do.
    """
    return value.encode("utf-16-be", "surrogatepass")


def sort_for_allocate(
    mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
) -> tuple[list[MessageQueue], list[str]]:
    """Both lists sorted as RocketMQ's RebalanceImpl sorts them before allocating."""
    mqs = sorted(
        mq_all, key=lambda mq: (java_string_key(mq.topic), java_string_key(mq.broker_name), mq.queue_id)
    )
    return mqs, sorted(cid_all, key=java_string_key)


def message_queue_key(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``: the queue's key on the CONSISTENT_HASH ring."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class AbstractAllocateMessageQueueStrategy(ABC):
    """Base of the strategies that check their input as RocketMQ does (all but CONFIG).

    Subclasses set ``name`` and implement ``allocate``, starting with ``check``.
    """

    @abstractmethod
    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """The queues of ``mq_all`` that ``current_cid`` should consume."""

    @staticmethod
    def check(
        consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> bool:
        """False when ``current_cid`` is not in ``cid_all`` (allocate nothing).

        Raises:
            ValueError: ``current_cid``, ``mq_all`` or ``cid_all`` is empty.
        """
        if not current_cid:
            raise ValueError("currentCID is empty")
        if not mq_all:
            raise ValueError("mqAll is null or mqAll empty")
        if not cid_all:
            raise ValueError("cidAll is null or cidAll empty")
        if current_cid not in cid_all:
            log.info(
                "[BUG] ConsumerGroup: %s The consumerId: %s not in cidAll: %s",
                consumer_group,
                current_cid,
                list(cid_all),
            )
            return False
        return True


class AllocateMessageQueueAveragely(AbstractAllocateMessageQueueStrategy):
    """Contiguous blocks: the first ``len(mq_all) % len(cid_all)`` consumers get one extra.

    6 queues over 4 consumers: c0 q0,q1; c1 q2,q3; c2 q4; c3 q5.  With more consumers
    than queues, consumer i gets queue i and the rest nothing.
    """

    name = "AVG"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)  # the first occurrence, like Java's indexOf
        base, extra = divmod(len(mq_all), len(cid_all))
        if index < extra:
            size, start = base + 1, index * (base + 1)
        else:
            size, start = max(base, 1), index * max(base, 1) + extra
        return list(mq_all[start : start + size])


class AllocateMessageQueueAveragelyByCircle(AbstractAllocateMessageQueueStrategy):
    """Round robin: consumer i gets queues i, i + n, i + 2n, ... of n consumers.

    6 queues over 4 consumers: c0 q0,q4; c1 q1,q5; c2 q2; c3 q3.
    """

    name = "AVG_BY_CIRCLE"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        return list(mq_all[index :: len(cid_all)])


class AllocateMessageQueueByConfig:
    """Always the configured queues, whatever the inputs (no checks, as in Java).

    Every consumer using it gets the same list, so give each consumer its own instance.
    """

    name = "CONFIG"

    def __init__(self, message_queue_list: Iterable[MessageQueue] = ()) -> None:
        self.message_queue_list: list[MessageQueue] = list(message_queue_list)

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """A copy of ``message_queue_list``."""
        return list(self.message_queue_list)


def split_like_java(value: str, sep: str) -> list[str]:
    """Java's ``String.split`` with a literal, non-regex separator and no limit.

    Unlike ``str.split``, trailing empty strings are dropped (``"a@"`` gives ``["a"]``
    and ``"@"`` gives ``[]``), except that a string without the separator is returned whole.
    """
    parts = value.split(sep)
    if len(parts) == 1:
        return parts
    while parts and not parts[-1]:
        parts.pop()
    return parts


class AllocateMessageQueueByMachineRoom(AbstractAllocateMessageQueueStrategy):
    """The queues of brokers named ``<room>@<name>`` in ``consumeridcs``, shared out evenly.

    Queues of other brokers (and of broker names not of exactly that two-part form) are
    left to no one.  Each consumer takes ``len // n`` contiguous queues, then the
    remainder goes one each to the first consumers (unlike AVG, from the end of the list).
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumeridcs: Iterable[str] = ()) -> None:
        self.consumeridcs: frozenset[str] = frozenset(consumeridcs)

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        index = list(cid_all).index(current_cid)
        in_rooms = [mq for mq in mq_all if self._in_rooms(mq.broker_name)]
        each, rest = divmod(len(in_rooms), len(cid_all))
        result = in_rooms[index * each : (index + 1) * each]
        if index < rest:
            result.append(in_rooms[each * len(cid_all) + index])
        return result

    def _in_rooms(self, broker_name: str) -> bool:
        parts = split_like_java(broker_name, "@")
        return len(parts) == 2 and parts[0] in self.consumeridcs


class AllocateMachineRoomNearby(AbstractAllocateMessageQueueStrategy):
    """Same machine room first: a wrapper around another strategy.

    Queues of a room with live consumers go only to that room's consumers (allocated by
    ``strategy`` among them); queues of a room with no consumer are shared by all
    consumers (allocated by ``strategy`` among ``cid_all``), room by room in room-name order.
    """

    def __init__(self, strategy: AllocateMessageQueueStrategy, resolver: MachineRoomResolver) -> None:
        self.strategy = strategy
        self.resolver = resolver

    @property
    def name(self) -> str:
        """``MACHINE_ROOM_NEARBY-`` and the wrapped strategy's name, as Java names it."""
        return f"MACHINE_ROOM_NEARBY-{self.strategy.name}"

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        """Raises ValueError when the resolver gives an empty room for a queue or consumer."""
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        mqs_by_room: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            room = self.resolver.broker_deploy_in(mq)
            if not room:
                raise ValueError(f"Machine room is null for mq {message_queue_key(mq)}")
            mqs_by_room.setdefault(room, []).append(mq)
        cids_by_room: dict[str, list[str]] = {}
        for cid in cid_all:
            room = self.resolver.consumer_deploy_in(cid)
            if not room:
                raise ValueError(f"Machine room is null for consumer id {cid}")
            cids_by_room.setdefault(room, []).append(cid)

        result: list[MessageQueue] = []
        my_room = self.resolver.consumer_deploy_in(current_cid)
        my_room_mqs = mqs_by_room.pop(my_room, None)
        if my_room_mqs:
            result += self.strategy.allocate(consumer_group, current_cid, my_room_mqs, cids_by_room[my_room])
        # Java walks a TreeMap, so orphaned rooms come in String.compareTo order.
        for room in sorted(mqs_by_room, key=java_string_key):
            if room not in cids_by_room:
                result += self.strategy.allocate(consumer_group, current_cid, mqs_by_room[room], cid_all)
        return result


class AllocateMessageQueueConsistentHash(AbstractAllocateMessageQueueStrategy):
    """A hash ring of the consumers; each queue goes to the consumer its key routes to.

    A consumer joining or leaving moves only the queues next to its virtual nodes.  The
    queue's ring key is Java's ``MessageQueue.toString()`` (``message_queue_key``); each
    consumer has ``virtual_node_cnt`` virtual nodes ``"<client id>-<i>"``.  With no
    virtual nodes the ring is empty and no one gets anything, as in Java.
    """

    name = "CONSISTENT_HASH"

    def __init__(
        self, virtual_node_cnt: int = DEFAULT_VIRTUAL_NODE_CNT, hash_function: HashFunction | None = None
    ) -> None:
        if virtual_node_cnt < 0:
            raise ValueError(f"illegal virtualNodeCnt :{virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt
        self.hash_function = hash_function or md5_hash

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if not self.check(consumer_group, current_cid, mq_all, cid_all):
            return []
        router = ConsistentHashRouter(cid_all, self.virtual_node_cnt, self.hash_function)
        return [mq for mq in mq_all if router.route_node(message_queue_key(mq)) == current_cid]
