"""Consumers of a Quiver (or RocketMQ) cluster.

``push`` holds the push consumer (a listener called with pulled messages), ``pull`` the
pull consumer (pulls by queue and offset) and ``litepull`` the subscribe-and-poll
consumer built on it; ``common`` what they share (message model, consume-from-where,
subscription data, the heartbeat entry); ``assignment`` the one rebalance of the push and
subscribe-and-poll consumers and where a new queue starts; ``rebalance`` RocketMQ's queue
allocation strategies (which queues of a topic each consumer of a group pulls);
``consistenthash`` the hash ring behind CONSISTENT_HASH; ``offsetstore`` where consumer
offsets are kept (the broker, or a local file when broadcasting).
"""

from __future__ import annotations

from broker_core.client.consumer.common import (
    ConsumeFromWhere,
    MessageModel,
    MessageSelector,
    SubscriptionData,
)
from broker_core.client.consumer.litepull import LitePullConsumer
from broker_core.client.consumer.offsetstore import (
    LocalFileOffsetStore,
    OffsetFileError,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from broker_core.client.consumer.pull import PullConsumer, PullResult, PullStatus
from broker_core.client.consumer.rebalance import (
    AllocateMachineRoomNearby,
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    MachineRoomResolver,
)

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ConsumeFromWhere",
    "LitePullConsumer",
    "LocalFileOffsetStore",
    "MachineRoomResolver",
    "MessageModel",
    "MessageSelector",
    "OffsetFileError",
    "OffsetStore",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "SubscriptionData",
]
