"""Consumers of a Quiver (or RocketMQ) cluster: rebalance strategies so far.

``rebalance`` holds RocketMQ's queue allocation strategies (which queues of a topic each
consumer of a group pulls); ``consistenthash`` the hash ring behind CONSISTENT_HASH.
"""

from __future__ import annotations

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
    "MachineRoomResolver",
]
