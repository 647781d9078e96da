"""Consumers of a Quiver (or RocketMQ) cluster.

``pull`` holds the pull consumer (queue-and-offset pulls, and subscribe-and-poll);
``offsetstore`` where consumer offsets are kept (the broker, or a local file when
broadcasting); ``rebalance`` RocketMQ's queue allocation strategies (which queues of a
topic each consumer of a group pulls); ``consistenthash`` the hash ring behind
CONSISTENT_HASH.
"""

from __future__ import annotations

from broker_core.client.consumer.offsetstore import (
    LocalFileOffsetStore,
    OffsetFileError,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from broker_core.client.consumer.pull import (
    ConsumeFromWhere,
    MessageModel,
    PullConsumer,
    PullResult,
    PullStatus,
)
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
    "LocalFileOffsetStore",
    "MachineRoomResolver",
    "MessageModel",
    "OffsetFileError",
    "OffsetStore",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
]
