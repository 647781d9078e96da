"""ConsistentHashRouter: a hash ring of physical nodes, each placed as virtual nodes.

Built to give the same answers as RocketMQ's ``common.consistenthash.ConsistentHashRouter``
(used by the CONSISTENT_HASH rebalance strategy), so that a Quiver consumer and a Java
consumer in one group agree on who owns which queue:

- a physical node is known by its key; it is never placed on the ring itself, only its
  virtual nodes, whose keys are ``"<node key>-<replica index>"`` (indexes from 0, or on
  from the node's existing replicas when it is added again);
- the default hash is the first four bytes of the MD5 digest of the key's UTF-8 bytes, read
  big-endian as an unsigned number (0 .. 2**32 - 1) (RocketMQ 4.9 encodes with the JVM's
  default charset, UTF-8 on the usual Linux setups; 5.x always uses UTF-8);
- two virtual nodes with the same hash keep the ring slot of the one placed last;
- an object key is routed to the first virtual node whose hash is >= the key's hash,
  wrapping to the lowest one.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Callable, Iterable

HashFunction = Callable[[str], int]
"""Maps a key to a point on the ring; RocketMQ's ``HashFunction.hash`` (a Java long)."""


def md5_hash(key: str) -> int:
    """RocketMQ's default ring hash: MD5 of the key's UTF-8 bytes, first 4 bytes big-endian."""
    # Java's UTF-8 encoder writes '?' for a lone surrogate; errors="replace" does the same.
    return int.from_bytes(hashlib.md5(key.encode("utf-8", "replace")).digest()[:4], "big")


def virtual_node_key(node_key: str, replica_index: int) -> str:
    """The ring key of replica ``replica_index`` of the physical node ``node_key``."""
    return f"{node_key}-{replica_index}"


class ConsistentHashRouter:
    """A ring of physical nodes (by key) with virtual nodes; not thread-safe.

    Built once per rebalance by the strategy, so it only grows; nodes are plain strings
    (for rebalancing, consumer client ids).
    """

    def __init__(
        self, nodes: Iterable[str] = (), virtual_node_count: int = 0, hash_function: HashFunction = md5_hash
    ) -> None:
        self._hash = hash_function
        self._ring: dict[int, tuple[str, int]] = {}  # hash -> (physical node, replica index)
        self._points: list[int] | None = []  # sorted ring hashes; None when stale
        for node in nodes:
            self.add_node(node, virtual_node_count)

    def add_node(self, node: str, virtual_node_count: int) -> None:
        """Place ``virtual_node_count`` more replicas of ``node``; ValueError when negative."""
        if virtual_node_count < 0:
            raise ValueError(f"illegal virtual node counts :{virtual_node_count}")
        existing = self.existing_replicas(node)
        for index in range(existing, existing + virtual_node_count):
            self._ring[self._hash(virtual_node_key(node, index))] = (node, index)
        self._points = None

    def existing_replicas(self, node: str) -> int:
        """How many virtual nodes of ``node`` hold a ring slot now."""
        return sum(1 for physical, _ in self._ring.values() if physical == node)

    def route_node(self, object_key: str) -> str | None:
        """The physical node owning ``object_key``, or None when the ring is empty."""
        if not self._ring:
            return None
        if self._points is None:
            self._points = sorted(self._ring)
        at = bisect_left(self._points, self._hash(object_key))
        point = self._points[at] if at < len(self._points) else self._points[0]
        return self._ring[point][0]
