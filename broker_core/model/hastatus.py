"""What each side of replication reports about its links: the body of
``GET_BROKER_HA_STATUS``, built by the broker (``broker_core.ha``) and read by the admin
client, the console's broker sets and the replication alerts (``BrokerHAStatus``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SlaveLinkStatus:
    """A master's view of one connected slave."""

    addr: str
    # The commit-log offset the slave last reported holding.
    acked_offset: int
    # Bytes of the master's log the slave does not hold yet, and how long ago the oldest
    # of them was stored (0 when it holds everything).
    behind_bytes: int
    behind_ms: int
    # Close enough to count for SYNC_MASTER (within haMaxGapNotInSync).
    in_sync: bool
    connected_ms: int
    last_report_ms: int

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SlaveLinkStatus:
        return cls(
            addr=str(obj["addr"]),
            acked_offset=int(obj["ackedOffset"]),
            behind_bytes=int(obj["behindBytes"]),
            behind_ms=int(obj["behindMs"]),
            in_sync=bool(obj["inSync"]),
            connected_ms=int(obj["connectedMs"]),
            last_report_ms=int(obj["lastReportMs"]),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "addr": self.addr,
            "ackedOffset": self.acked_offset,
            "behindBytes": self.behind_bytes,
            "behindMs": self.behind_ms,
            "inSync": self.in_sync,
            "connectedMs": self.connected_ms,
            "lastReportMs": self.last_report_ms,
        }


@dataclass
class MasterHAStatus:
    """A master's replication: its log's end, its slaves, and the links it refused."""

    ha_addr: str
    max_offset: int
    slaves: list[SlaveLinkStatus] = field(default_factory=list)
    # Recent refusals (a slave ahead of this master's log, or behind its oldest file), newest last.
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": "master",
            "haAddr": self.ha_addr,
            "maxOffset": self.max_offset,
            "slaves": [s.to_json() for s in self.slaves],
            "problems": list(self.problems),
        }


@dataclass
class SlaveHAStatus:
    """A slave's replication: whom it copies, whether the link is up, what it holds."""

    master_ha_addr: str
    connected: bool
    max_offset: int
    # Bytes received from masters since this broker started.
    received_bytes: int = 0
    # This end of the link (ip:port): what the master's status lists the link as.
    local_addr: str = ""
    last_frame_ms: int = 0
    problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "role": "slave",
            "masterHaAddr": self.master_ha_addr,
            "connected": self.connected,
            "maxOffset": self.max_offset,
            "receivedBytes": self.received_bytes,
            "localAddr": self.local_addr,
            "lastFrameMs": self.last_frame_ms,
            "problem": self.problem,
        }


@dataclass
class BrokerHAStatus:
    """One broker's answer to GET_BROKER_HA_STATUS, either side's, as a client reads it."""

    broker_name: str
    broker_role: str
    # "master" or "slave": which of the fields below mean something.
    side: str
    max_offset: int
    # A master's:
    ha_addr: str = ""
    slaves: list[SlaveLinkStatus] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # A slave's:
    master_addr: str = ""
    master_ha_addr: str = ""
    local_addr: str = ""
    connected: bool = False
    last_frame_ms: int = 0
    last_sync_ms: int = 0
    problem: str = ""
    sync_problem: str = ""

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> BrokerHAStatus:
        """Parse the answer; KeyError/ValueError/TypeError when it is not one."""
        return cls(
            broker_name=str(obj["brokerName"]),
            broker_role=str(obj["brokerRole"]),
            side=str(obj["role"]),
            max_offset=int(obj["maxOffset"]),
            ha_addr=str(obj.get("haAddr", "")),
            slaves=[SlaveLinkStatus.from_json(s) for s in obj.get("slaves", [])],
            problems=[str(p) for p in obj.get("problems", [])],
            master_addr=str(obj.get("masterAddr", "")),
            master_ha_addr=str(obj.get("masterHaAddr", "")),
            local_addr=str(obj.get("localAddr", "")),
            connected=bool(obj.get("connected", False)),
            last_frame_ms=int(obj.get("lastFrameMs", 0)),
            last_sync_ms=int(obj.get("lastSyncMs", 0)),
            problem=str(obj.get("problem", "")),
            sync_problem=str(obj.get("syncProblem", "")),
        )
