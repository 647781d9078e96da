"""Broker sets and their replication, as the console shows them and the replication alerts
read them.

A broker set is the brokers sharing a ``brokerName``: ``brokerId = 0`` its master, any other
id a slave.  ``broker_sets`` asks every member for its GET_BROKER_HA_STATUS (and the master
for its settings) at the same time and joins both sides: the master's view of each slave
link (offset acknowledged, bytes and milliseconds behind, in sync) with each slave's own
view of its link (connected, what it holds, its problems).

The master lists its links by the slave's socket address (``ip:ephemeral port``), not by
the slave's broker address; a slave names that address as its ``localAddr``, which matches
it exactly.  A slave that does not (it is down, or not ours) is matched by host, then by
the offset it holds; a link that no listed slave accounts for is shown on its own
(``brokerId`` None), never dropped.

A slave that stops is dropped by the nameservers at once, and with it every trace of it
but the master's missing link.  So the replication check remembers the slaves it saw
(Redis, per console cluster, ``note_slaves``) and ``broker_sets`` shows a remembered slave
that is no longer listed — asked at its last address, named with its error — until it is
back or ``QUIVER_FORGET_BROKER_SECONDS`` have passed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypedDict

import orjson
from redis.exceptions import RedisError

from broker_core.client.admin import AdminClient
from broker_core.model.hastatus import BrokerHAStatus, SlaveLinkStatus
from console.core.redis import redis_client
from console.quiver import platform_settings

log = logging.getLogger(__name__)

# Per console cluster: the slaves the replication check saw listed, by
# ``<broker cluster>/<broker name>/<broker id>``: ``RememberedSlave`` as JSON.
SEEN_KEY = "quiver:replication:slaves:{cluster}"

# What a broker set's state says, worst first.
MASTER_DOWN = "master down"
MASTER_NOT_ANSWERING = "master not answering"
SLAVE_DISCONNECTED = "slave disconnected"
SLAVE_BEHIND = "slave behind"
NO_SLAVE = "no slave"
STANDALONE = "standalone"
OK = "ok"
STATES = (MASTER_DOWN, MASTER_NOT_ANSWERING, SLAVE_DISCONNECTED, SLAVE_BEHIND, NO_SLAVE, STANDALONE, OK)
# States that need no one's attention (a lone ASYNC_MASTER is a plain broker).
FINE_STATES = (OK, STANDALONE)


class SlaveRow(TypedDict):
    """One slave of a set: the master's view of its link joined with its own.

    ``brokerId`` is None for a link the master holds that no listed slave accounts for;
    ``registered`` is False for a slave the nameservers no longer list (remembered).
    ``connected``: the HA link is up by every side that answered (False when none did).
    ``ackedOffset``, ``behindMs``, ``inSync``, ``lastReportMs`` are the master's figures
    (None without a link); ``behindBytes`` is the master's, or the master's log end less
    what the slave holds when there is no link.  ``lagging``: behind more than the
    thresholds (None: unknown).  ``error`` names the slave when it did not answer.
    """

    addr: str
    brokerId: int | None
    registered: bool
    connected: bool
    maxOffset: int | None
    ackedOffset: int | None
    behindBytes: int | None
    behindMs: int | None
    inSync: bool | None
    lastReportMs: int | None
    lastFrameMs: int | None
    lagging: bool | None
    problems: list[str]
    error: str | None


class BrokerSet(TypedDict):
    """One broker name: its master (None when the nameservers list none), the master's role
    and ``slaveReadEnable`` (None when unknown), its log end and HA address, the set's
    ``state`` (``STATES``), the master's refused links (``problems``), why the master could
    not be read (``error``), and its slaves."""

    cluster: str
    brokerName: str
    master: str | None
    role: str | None
    slaveReadEnable: bool | None
    haAddr: str | None
    maxOffset: int | None
    state: str
    problems: list[str]
    error: str | None
    slaves: list[SlaveRow]


class RememberedSlave(TypedDict):
    """A slave the replication check saw listed: where, and when last (epoch ms)."""

    cluster: str
    brokerName: str
    brokerId: int
    addr: str
    seenMs: int


@dataclass(frozen=True)
class LagLimits:
    """How far behind a slave may be: bytes and milliseconds (0: that limit is off)."""

    max_bytes: int
    max_ms: int

    @classmethod
    def from_settings(cls) -> LagLimits:
        quiver = platform_settings()
        return cls(quiver["REPLICATION_MAX_BEHIND_BYTES"], quiver["REPLICATION_MAX_BEHIND_SECONDS"] * 1000)

    def lagging(self, behind_bytes: int | None, behind_ms: int | None) -> bool | None:
        """Over either limit: True; within every limit that is on: False; else unknown."""
        checks = [(self.max_bytes, behind_bytes), (self.max_ms, behind_ms)]
        if any(limit and value is not None and value > limit for limit, value in checks):
            return True
        if all(value is not None for limit, value in checks if limit):
            return False
        return None


def _host(addr: str) -> str:
    return addr.rsplit(":", 1)[0]


def _words(addr: str, failure: BaseException) -> str:
    return f"{addr} did not answer: {failure or type(failure).__name__}"


def _epoch_words(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


@dataclass
class _Member:
    broker_id: int
    addr: str
    registered: bool
    seen_ms: int = 0


def _match_links(
    links: list[SlaveLinkStatus],
    slaves: list[tuple[_Member, BrokerHAStatus | BaseException]],
    master: str,
) -> tuple[dict[int, SlaveLinkStatus], list[SlaveLinkStatus]]:
    """Which of the master's ``links`` is which slave's (by broker id), and the links left.

    A slave that names its end of the link (``local_addr``) takes that link.  Others:
    slaves that say they are connected to this master take a link from their own host
    first (the one nearest the offset they hold); then a slave that did not answer takes
    the only link from its host, if it alone lives there; then a connected slave on another
    interface takes the nearest remaining link; a slave that says it is not connected
    takes a same-host link last (a link the master has not noticed closing yet).
    """
    pool = list(links)
    matched: dict[int, SlaveLinkStatus] = {}

    def take(member: _Member, candidates: list[SlaveLinkStatus], offset: int | None) -> None:
        if not candidates:
            return
        link = candidates[0]
        if offset is not None:
            link = min(candidates, key=lambda c: abs(c.acked_offset - offset))
        pool.remove(link)
        matched[member.broker_id] = link

    def here(status: BrokerHAStatus | BaseException) -> bool:
        return (
            isinstance(status, BrokerHAStatus)
            and status.side == "slave"
            and status.connected
            and status.master_addr in ("", master)
        )

    # Exact first: a slave names its end of the link, which is how the master lists it.
    for member, status in slaves:
        if isinstance(status, BrokerHAStatus) and status.local_addr:
            exact = [c for c in pool if c.addr == status.local_addr]
            take(member, exact, None)
    hosts = [_host(m.addr) for m, _ in slaves]
    for member, status in slaves:
        if here(status) and member.broker_id not in matched:
            assert isinstance(status, BrokerHAStatus)
            same = [c for c in pool if _host(c.addr) == _host(member.addr)]
            take(member, same, status.max_offset)
    for member, status in slaves:
        if isinstance(status, BaseException) and member.broker_id not in matched:
            same = [c for c in pool if _host(c.addr) == _host(member.addr)]
            if len(same) == 1 and hosts.count(_host(member.addr)) == 1:
                take(member, same, None)
    for member, status in slaves:
        if here(status) and member.broker_id not in matched:
            assert isinstance(status, BrokerHAStatus)
            take(member, list(pool), status.max_offset)
    for member, status in slaves:
        if isinstance(status, BrokerHAStatus) and member.broker_id not in matched:
            same = [c for c in pool if _host(c.addr) == _host(member.addr)]
            take(member, same, status.max_offset)
    return matched, pool


def _slave_row(
    member: _Member,
    status: BrokerHAStatus | BaseException,
    link: SlaveLinkStatus | None,
    master: str | None,
    master_status: BrokerHAStatus | BaseException | None,
    limits: LagLimits,
) -> SlaveRow:
    answered = isinstance(status, BrokerHAStatus)
    master_answered = isinstance(master_status, BrokerHAStatus)
    problems: list[str] = []
    if not member.registered:
        problems.append(f"not listed by the nameservers since {_epoch_words(member.seen_ms)}")
    own_max: int | None = None
    last_frame: int | None = None
    says_connected = False
    if isinstance(status, BrokerHAStatus):
        if status.side != "slave":
            problems.append(f"answers as a {status.broker_role}, not as a slave")
        else:
            own_max, last_frame = status.max_offset, status.last_frame_ms
            says_connected = status.connected
            if status.connected and master and status.master_addr and status.master_addr != master:
                says_connected = False
                problems.append(f"copies {status.master_addr}, not this set's master {master}")
            problems.extend(p for p in (status.problem, status.sync_problem) if p)
    if master is None:
        connected = says_connected
    elif answered and master_answered:
        connected = says_connected and link is not None
    elif master_answered:
        connected = link is not None
    else:
        connected = says_connected
    behind_bytes: int | None = None
    if link is not None:
        behind_bytes = link.behind_bytes
    elif isinstance(master_status, BrokerHAStatus) and own_max is not None:
        behind_bytes = max(0, master_status.max_offset - own_max)
    return {
        "addr": member.addr,
        "brokerId": member.broker_id,
        "registered": member.registered,
        "connected": connected,
        "maxOffset": own_max,
        "ackedOffset": link.acked_offset if link else None,
        "behindBytes": behind_bytes,
        "behindMs": link.behind_ms if link else None,
        "inSync": link.in_sync if link else (False if master_answered else None),
        "lastReportMs": link.last_report_ms if link else None,
        "lastFrameMs": last_frame,
        "lagging": limits.lagging(behind_bytes, link.behind_ms if link else None),
        "problems": problems,
        "error": None if isinstance(status, BrokerHAStatus) else _words(member.addr, status),
    }


def _link_row(link: SlaveLinkStatus, limits: LagLimits) -> SlaveRow:
    """A link the master holds that no listed slave accounts for."""
    return {
        "addr": link.addr,
        "brokerId": None,
        "registered": False,
        "connected": True,
        "maxOffset": None,
        "ackedOffset": link.acked_offset,
        "behindBytes": link.behind_bytes,
        "behindMs": link.behind_ms,
        "inSync": link.in_sync,
        "lastReportMs": link.last_report_ms,
        "lastFrameMs": None,
        "lagging": limits.lagging(link.behind_bytes, link.behind_ms),
        "problems": ["a link from a slave the nameservers do not list"],
        "error": None,
    }


def _state(master: str | None, role: str | None, error: str | None, slaves: list[SlaveRow]) -> str:
    known = [s for s in slaves if s["brokerId"] is not None]
    if master is None:
        return MASTER_DOWN
    if error:
        return MASTER_NOT_ANSWERING
    if any(not s["connected"] or s["error"] for s in known):
        return SLAVE_DISCONNECTED
    if any(s["lagging"] for s in slaves):
        return SLAVE_BEHIND
    if not known:
        return NO_SLAVE if role == "SYNC_MASTER" else STANDALONE
    return OK


async def _ha(admin: AdminClient, addr: str) -> BrokerHAStatus:
    return await admin.ha_status(addr)


async def broker_sets(
    admin: AdminClient, remembered: Iterable[RememberedSlave] = (), limits: LagLimits | None = None
) -> list[BrokerSet]:
    """Every broker set the nameservers list (and any a ``remembered`` slave belongs to),
    by cluster and name: its master, role, ``slaveReadEnable``, state and problems, and per
    slave the link as both sides see it.  A broker that does not answer is named with its
    error; ``limits`` (default: the settings) say when a slave is ``lagging``."""
    limits = limits or LagLimits.from_settings()
    info = await admin.cluster_info()
    sets: dict[tuple[str, str], dict[int, _Member]] = {}
    for cluster, names in sorted(info.clusters.items()):
        for name in names:
            if name in info.brokers:
                sets[(cluster, name)] = {
                    int(i): _Member(int(i), addr, True) for i, addr in info.brokers[name].addrs.items()
                }
    listed = {m.addr for members in sets.values() for m in members.values()}
    for seen in remembered:
        members = sets.setdefault((seen["cluster"], seen["brokerName"]), {})
        if seen["brokerId"] not in members and seen["addr"] not in listed:
            members[seen["brokerId"]] = _Member(seen["brokerId"], seen["addr"], False, seen["seenMs"])
    addrs = sorted({m.addr for members in sets.values() for m in members.values()})
    masters = sorted(members[0].addr for members in sets.values() if 0 in members)
    statuses, configs = await asyncio.gather(
        asyncio.gather(*(_ha(admin, a) for a in addrs), return_exceptions=True),
        asyncio.gather(*(admin.broker_config(a) for a in masters), return_exceptions=True),
    )
    by_addr: dict[str, BrokerHAStatus | BaseException] = dict(zip(addrs, statuses, strict=True))
    config_of: dict[str, dict[str, str] | BaseException] = dict(zip(masters, configs, strict=True))
    rows: list[BrokerSet] = []
    for (cluster, name), members in sorted(sets.items()):
        head = members.get(0)
        master = head.addr if head else None
        master_status = by_addr[master] if master else None
        slaves = [(m, by_addr[m.addr]) for i, m in sorted(members.items()) if i != 0]
        role: str | None = None
        read_enable: bool | None = None
        error: str | None = None
        problems: list[str] = []
        links: list[SlaveLinkStatus] = []
        if master is not None:
            config = config_of[master]
            if not isinstance(config, BaseException):
                role = config.get("brokerRole")
                if "slaveReadEnable" in config:
                    read_enable = config["slaveReadEnable"].strip().lower() == "true"
            if isinstance(master_status, BrokerHAStatus):
                role = master_status.broker_role
                links, problems = master_status.slaves, list(master_status.problems)
            elif master_status is not None:
                error = _words(master, master_status)
        matched, unmatched = _match_links(links, slaves, master or "")
        slave_rows = [
            _slave_row(m, s, matched.get(m.broker_id), master, master_status, limits) for m, s in slaves
        ]
        # A refusal names the slave's socket address: it is a slave's when it alone is on that host.
        hosts = [_host(r["addr"]) for r in slave_rows]
        for refusal in problems:
            for row in slave_rows:
                if refusal.startswith(_host(row["addr"]) + ":") and hosts.count(_host(row["addr"])) == 1:
                    row["problems"].append(f"the master turned its link away: {refusal}")
        slave_rows.extend(_link_row(link, limits) for link in unmatched)
        master_answer = master_status if isinstance(master_status, BrokerHAStatus) else None
        rows.append(
            {
                "cluster": cluster,
                "brokerName": name,
                "master": master,
                "role": role,
                "slaveReadEnable": read_enable,
                "haAddr": master_answer.ha_addr if master_answer else None,
                "maxOffset": master_answer.max_offset if master_answer else None,
                "state": _state(master, role, error, slave_rows),
                "problems": problems,
                "error": error,
                "slaves": slave_rows,
            }
        )
    return rows


# -- the slaves seen lately -------------------------------------------------------------------


def _seen_key(cluster: str) -> str:
    return SEEN_KEY.format(cluster=cluster)


def remembered_slaves(cluster: str) -> list[RememberedSlave]:
    """The slaves of console cluster ``cluster`` the check saw listed within
    ``QUIVER_FORGET_BROKER_SECONDS`` ([] when Redis does not answer)."""
    forget_ms = platform_settings()["FORGET_BROKER_SECONDS"] * 1000
    now = time.time_ns() // 1_000_000
    try:
        entries = redis_client().hvals(_seen_key(cluster))
    except RedisError as exc:
        log.warning("replication: cannot read the slaves seen lately: %s", exc)
        return []
    found: list[RememberedSlave] = []
    for raw in entries:
        try:
            entry = orjson.loads(raw)
            seen: RememberedSlave = {
                "cluster": str(entry["cluster"]),
                "brokerName": str(entry["brokerName"]),
                "brokerId": int(entry["brokerId"]),
                "addr": str(entry["addr"]),
                "seenMs": int(entry["seenMs"]),
            }
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
        if now - seen["seenMs"] <= forget_ms:
            found.append(seen)
    return sorted(found, key=lambda s: (s["cluster"], s["brokerName"], s["brokerId"]))


def note_slaves(cluster: str, sets: Sequence[BrokerSet]) -> None:
    """Remember the slaves ``sets`` list as registered (now), and forget those not listed
    for ``QUIVER_FORGET_BROKER_SECONDS`` (best effort: Redis trouble is logged)."""
    now = time.time_ns() // 1_000_000
    forget_ms = platform_settings()["FORGET_BROKER_SECONDS"] * 1000
    key = _seen_key(cluster)
    seen = {
        f"{s['cluster']}/{s['brokerName']}/{row['brokerId']}": orjson.dumps(
            {
                "cluster": s["cluster"],
                "brokerName": s["brokerName"],
                "brokerId": row["brokerId"],
                "addr": row["addr"],
                "seenMs": now,
            }
        )
        for s in sets
        for row in s["slaves"]
        if row["registered"] and row["brokerId"] is not None
    }
    try:
        client = redis_client()
        stale = []
        for field, raw in client.hgetall(key).items():
            name = field.decode() if isinstance(field, bytes) else str(field)
            try:
                old = int(orjson.loads(raw)["seenMs"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                old = 0
            if name not in seen and now - old > forget_ms:
                stale.append(name)
        pipe = client.pipeline(transaction=False)
        if seen:
            pipe.hset(key, mapping=seen)  # type: ignore[arg-type]
        if stale:
            pipe.hdel(key, *stale)
        pipe.execute()
    except RedisError as exc:
        log.warning("replication: could not note the slaves seen: %s", exc)


def slave_key(broker_name: str, broker_id: int) -> str:
    """How a replication alert names its slave (the alert's ``group``)."""
    return f"{broker_name}-slave-{broker_id}"
