"""Route data as the nameserver serves it: the one definition of a topic's queue data.

The nameserver builds ``QueueData`` from each master's registration and writes it into
GET_ROUTEINFO_BY_TOPIC answers; clients read it back from there.  Queue counts and perm
must be JSON numbers: the C++ client rejects strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BrokerName = str


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of a topic: counts and permission bits (6 = read + write)."""

    broker_name: BrokerName
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> QueueData:
        # Older 4.x nameservers spell the flag topicSynFlag.
        sys_flag = obj.get("topicSysFlag", obj.get("topicSynFlag", 0))
        return cls(
            str(obj["brokerName"]),
            int(obj.get("readQueueNums") or 0),
            int(obj.get("writeQueueNums") or 0),
            int(obj.get("perm") or 0),
            int(sys_flag or 0),
        )
