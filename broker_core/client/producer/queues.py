"""Where a topic's messages may be sent: its writable queues, taken in turn.

``TopicPublishInfo`` is RocketMQ's structure of the same name, built from a nameserver
route as ``MQClientInstance.topicRouteData2TopicPublishInfo`` builds it:

- an ordered topic (the nameserver's ``orderTopicConf``, ``"broker-a:4;broker-b:4"``)
  gets exactly the queues that string lists, in its order, whatever the route says;
- any other topic gets ``write_queue_nums`` queues from every broker whose queue data
  allows writing (``perm & PERM_WRITE``) and that has a master registered, brokers in name
  order: a read-only broker or one that has only slaves left takes no sends.

The round-robin position starts at a random value, so that many producers started at
once do not all send their first message to the same queue.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field

from broker_core.client.routes import BrokerName, TopicRoute
from broker_core.messagequeue import MessageQueue
from broker_core.model.topicconfig import PERM_WRITE

# The counter stays a non-negative Java int, as RocketMQ's ThreadLocalIndex keeps it.
POSITIVE_MASK = 0x7FFFFFFF


class RoundRobinIndex:
    """A counter that hands out successive positions: RocketMQ's ``ThreadLocalIndex``.

    Java keeps one per thread; we keep one per owner behind a lock, which spreads sends
    the same way and stays fair when several threads share a producer.  Thread-safe.
    """

    def __init__(self, start: int | None = None) -> None:
        """Start at ``start``, or at a random non-negative value when it is None."""
        self._value = random.randrange(POSITIVE_MASK + 1) if start is None else start & POSITIVE_MASK
        self._lock = threading.Lock()

    def increment_and_get(self) -> int:
        """Advance by one and return the new position (never negative)."""
        with self._lock:
            self._value = (self._value + 1) & POSITIVE_MASK
            return self._value


def parse_order_topic_conf(topic: str, conf: str) -> tuple[MessageQueue, ...]:
    """The queues ``"broker-a:4;broker-b:2"`` names: ids 0..n-1 on each broker, in order.

    Blank entries (a trailing ``;``) are skipped; anything else that is not
    ``name:count`` raises ValueError.
    """
    queues: list[MessageQueue] = []
    for entry in conf.split(";"):
        if not entry.strip():
            continue
        name, sep, count = entry.partition(":")
        if not sep or not name.strip() or not count.strip().isdigit():
            raise ValueError(f"orderTopicConf entry {entry!r} of {topic!r} is not broker:count")
        queues.extend(MessageQueue(topic, name.strip(), queue_id) for queue_id in range(int(count)))
    return tuple(queues)


def writable_queues(route: TopicRoute, topic: str) -> tuple[MessageQueue, ...]:
    """The queues of ``topic`` a producer may send to: writable queue data on brokers with
    a master."""
    brokers_with_master = {b.broker_name for b in route.broker_datas if b.master_addr is not None}
    queues: list[MessageQueue] = []
    for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if data.perm & PERM_WRITE and data.broker_name in brokers_with_master:
            queues.extend(MessageQueue(topic, data.broker_name, i) for i in range(data.write_queue_nums))
    return tuple(queues)


@dataclass(frozen=True, slots=True, eq=False)
class TopicPublishInfo:
    """A topic's sendable queues and its round-robin position.

    Immutable but for the position; a route refresh builds a new one.  Safe to share
    between threads.
    """

    topic: str
    route: TopicRoute
    message_queues: tuple[MessageQueue, ...]
    order_topic: bool = False
    send_which_queue: RoundRobinIndex = field(default_factory=RoundRobinIndex)

    @classmethod
    def from_route(
        cls, route: TopicRoute, *, topic: str | None = None, start: int | None = None
    ) -> TopicPublishInfo:
        """Build from a nameserver route.

        ``topic`` names the queues' topic when it is not the route's own: a send to a topic
        not yet created goes over the route of the auto-create topic (TBW102), as in
        RocketMQ.  ``start`` fixes the round-robin position (tests).  Raises ValueError when
        the route's ``orderTopicConf`` is malformed.
        """
        topic = route.topic if topic is None else topic
        index = RoundRobinIndex(start)
        if route.order_topic_conf:
            return cls(topic, route, parse_order_topic_conf(topic, route.order_topic_conf), True, index)
        return cls(topic, route, writable_queues(route, topic), False, index)

    def ok(self) -> bool:
        """True when there is at least one queue to send to."""
        return bool(self.message_queues)

    def write_queue_nums(self, broker_name: BrokerName | None) -> int:
        """How many queues ``broker_name`` accepts writes on for this topic; 0 when none.

        Read from the route's queue data (RocketMQ's ``getQueueIdByBroker``): the fault
        strategy uses it to aim a send at a broker chosen by latency rather than by turn.
        """
        for data in self.route.queue_datas:
            if data.broker_name == broker_name and data.perm & PERM_WRITE:
                return data.write_queue_nums
        return 0

    def queue_at(self, position: int) -> MessageQueue:
        """The queue a round-robin ``position`` lands on."""
        return self.message_queues[position % len(self.message_queues)]

    def select_one_message_queue(self, last_broker_name: BrokerName | None = None) -> MessageQueue:
        """The next queue in turn; on a retry, one on another broker than ``last_broker_name``.

        With ``last_broker_name`` set, up to one full turn of positions is tried for a queue
        of another broker (each try advances the position); when every queue is on that
        broker, the next queue in turn is taken anyway.  Raises LookupError when the topic
        has no sendable queue (check ``ok()`` first).
        """
        if not self.message_queues:
            raise LookupError(f"topic {self.topic!r} has no writable queue")
        if last_broker_name is not None:
            for _ in self.message_queues:
                mq = self.queue_at(self.send_which_queue.increment_and_get())
                if mq.broker_name != last_broker_name:
                    return mq
        return self.queue_at(self.send_which_queue.increment_and_get())
