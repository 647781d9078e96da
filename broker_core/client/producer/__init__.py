"""The producer's parts that need no network: where a send goes, and which brokers to avoid.

``queues.TopicPublishInfo`` is a topic's writable queues with their round-robin position;
``faulttolerance.FaultStrategy`` picks among them while steering away from brokers that
were slow or failed (RocketMQ's sendLatencyFaultEnable).  Both are pure and take their
clock and starting positions as arguments, so tests can drive them exactly.
"""

from __future__ import annotations

from broker_core.client.producer.faulttolerance import FaultItem, FaultStrategy, LatencyFaultTolerance
from broker_core.client.producer.queues import RoundRobinIndex, TopicPublishInfo

__all__ = ["FaultItem", "LatencyFaultTolerance", "FaultStrategy", "RoundRobinIndex", "TopicPublishInfo"]
