"""Figures for the console and tools: topic stats, consume stats, runtime info, who consumes.

GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208), GET_BROKER_RUNTIME_INFO (28),
QUERY_TOPIC_CONSUME_BY_WHO (300) and GET_ALL_CONSUMER_OFFSET (43).  Topic and consume
stats key their tables by MessageQueue, written in fastjson's dialect as Java tools
expect (``broker_core.remoting.fastjson``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from broker_core import __version__
from broker_core.messagequeue import MessageQueue
from broker_core.remoting import fastjson
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import GetConsumeStatsRequestHeader
from broker_core.store.cleanup import disk_used_ratio

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController
    from broker_core.store.store import MessageStore


def _tps(stats_rate: float) -> str:
    return f"{stats_rate:.2f}"


def _by_group(
    totals: dict[tuple[str, str], int], mornings: dict[tuple[str, str], int]
) -> list[dict[str, Any]]:
    """Counters keyed by (group, topic) as the snapshot lists them, each with its morning."""
    return [
        {"group": group, "topic": topic, "total": total, "morning": mornings.get((group, topic), 0)}
        for (group, topic), total in sorted(totals.items())
    ]


class StatsProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    @property
    def _store(self) -> MessageStore:
        assert self.broker.store is not None
        return self.broker.store

    def topic_stats(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Per queue: min and max offset, and when its last message was stored."""
        topic = request.ext_fields.get("topic", "")
        config = self.broker.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self._store
        name = self.broker.config.broker_name
        table: dict[MessageQueue, dict[str, int]] = {}
        for queue_id in range(config.write_queue_nums):
            max_offset = store.get_max_offset_in_queue(topic, queue_id)
            last = store.get_message_store_timestamp(topic, queue_id, max_offset - 1) if max_offset > 0 else 0
            table[MessageQueue(topic, name, queue_id)] = {
                "minOffset": store.get_min_offset_in_queue(topic, queue_id),
                "maxOffset": max_offset,
                "lastUpdateTimestamp": max(0, last),
            }
        return request.response(body=fastjson.dumps({"offsetTable": table}))

    def consume_stats(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Per queue of each topic the group consumes here: broker and consumer offsets.

        The topics are those the group committed offsets in, or subscribes to while
        online; ``topic`` narrows them to one.  Lag is brokerOffset - consumerOffset.  A
        group unknown here gets an empty table (tools decide what that means).
        """
        header = GetConsumeStatsRequestHeader.from_fields(request.ext_fields)
        group, only = header.consumer_group, header.topic
        store = self._store
        topics = store.consumer_offsets.which_topics_by_consumer_group(group)
        subscribed: set[str] = set()
        for client in self.broker.clients.consumer_clients(group):
            subscribed.update(client.subscriptions)
        topics |= subscribed
        if only is not None:
            topics = {only} if only in topics or self.broker.topics.get(only) else set()
        name = self.broker.config.broker_name
        table: dict[MessageQueue, dict[str, int]] = {}
        for topic in sorted(topics):
            config = self.broker.topics.get(topic)
            # An online group is measured on what it subscribes to now, not on topics it
            # left behind (their lag would only grow), as RocketMQ does.
            if config is None or (subscribed and topic not in subscribed):
                continue
            for queue_id in range(config.read_queue_nums):
                consumer_offset = max(0, store.consumer_offsets.query_offset(group, topic, queue_id))
                last = 0
                if consumer_offset > 0:
                    last = max(0, store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1))
                table[MessageQueue(topic, name, queue_id)] = {
                    "brokerOffset": store.get_max_offset_in_queue(topic, queue_id),
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": last,
                }
        body = {"consumeTps": round(self.broker.stats.get_tps(group, only), 2), "offsetTable": table}
        return request.response(body=fastjson.dumps(body))

    def consumed_by_who(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Groups that consume ``topic`` here: by committed offsets or an online subscription."""
        topic = request.ext_fields.get("topic", "")
        groups = set(self._store.consumer_offsets.which_groups_by_topic(topic))
        groups.update(self.broker.clients.groups_consuming(topic))
        return request.response(body=orjson.dumps({"groupList": sorted(groups)}))

    def all_consumer_offsets(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """The whole offset table as ``consumerOffset.json`` holds it."""
        return request.response(body=orjson.dumps(self._store.consumer_offsets.encode()))

    def all_delay_offsets(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """The delay-level progress as ``delayOffset.json`` holds it (a slave copies it)."""
        return request.response(body=orjson.dumps(self._store.schedule.encode()))

    def ha_status(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """GET_BROKER_HA_STATUS: this broker's replication (``BrokerReplication.status``)."""
        replication = self.broker.replication
        if replication is None:
            return request.response(ResponseCode.SYSTEM_ERROR, "the broker is not started")
        return request.response(body=orjson.dumps(replication.status()))

    def offset_snapshot(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """Every committed offset beside its queue's broker offsets, and the traffic totals.

        QUIVER_GET_OFFSET_SNAPSHOT: what the platform's offset-history job records every
        5 s, in one answer whatever the number of groups.  ``storeTimestamp`` is when the
        message at the committed offset was stored (0 when the group has caught up), so a
        reader can tell lag in time as well as in messages.  Counters run from
        ``bootTimestamp``: a reader taking deltas sees a restart as a new boot time.
        ``topicPutsMorning`` and each get's ``morning`` are the totals when today (UTC)
        began, so a reader's first sample of the day still tells what came before it.
        ``producerPuts`` counts what each producer group had stored per topic.
        ``onlineGroups`` lists the groups with clients connected here (count, model, TPS).
        """
        store = self._store
        queues = []
        for key, by_queue in sorted(store.consumer_offsets.offset_table.items()):
            topic, _, group = key.partition("@")
            for queue_id, offset in sorted(by_queue.items()):
                max_offset = store.get_max_offset_in_queue(topic, queue_id)
                min_offset = store.get_min_offset_in_queue(topic, queue_id)
                # The oldest message the group has still to consume: at its committed offset,
                # or at the queue's start when expiry removed what it had not consumed.
                next_offset = max(offset, min_offset)
                behind = 0 <= next_offset < max_offset
                stored_at = store.get_message_store_timestamp(topic, queue_id, next_offset) if behind else 0
                queues.append(
                    {
                        "group": group,
                        "topic": topic,
                        "queueId": queue_id,
                        "consumerOffset": offset,
                        "brokerOffset": max_offset,
                        "minOffset": min_offset,
                        "storeTimestamp": max(0, stored_at),
                    }
                )
        totals = self.broker.stats.totals()
        clients = self.broker.clients
        online = []
        for group in sorted(clients.consumer_groups()):
            members = clients.consumer_clients(group)
            if not members:
                continue
            online.append(
                {
                    "group": group,
                    "clients": len(members),
                    "messageModel": members[0].message_model,
                    "consumeType": members[0].consume_type,
                    "consumeTps": round(self.broker.stats.get_tps(group), 2),
                }
            )
        body = {
            "brokerName": self.broker.config.broker_name,
            "timestampMs": self.broker.clock_ms(),
            "bootTimestamp": self.broker.boot_timestamp,
            "queues": queues,
            "onlineGroups": online,
            "topicPuts": dict(sorted(totals.puts.items())),
            "topicPutsMorning": dict(sorted(totals.puts_morning.items())),
            "groupGets": _by_group(totals.gets, totals.gets_morning),
            "producerPuts": _by_group(totals.produced, totals.produced_morning),
        }
        return request.response(body=orjson.dumps(body))

    def schedule_status(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """QUIVER_GET_SCHEDULE_STATUS: the delay levels' backlog, the timer messages waiting
        (with the next due time among those read), and the pending half messages."""
        now = self.broker.clock_ms()
        levels = [
            {
                "level": row["level"],
                "delayMs": row["delay_ms"],
                "waiting": row["waiting"],
                "nextDueMs": row["next_due_ms"],
            }
            for row in self._store.schedule.backlog(now)
        ]
        timers = self._store.timers.backlog()
        assert self.broker.transactions is not None
        half, pending = self.broker.transactions.pending()
        body = {
            "timestampMs": now,
            "delayLevels": levels,
            "timers": {"waiting": timers["waiting"], "nextDueMs": timers["next_due_ms"]},
            "halfMessages": half,
            "pendingHalfMessages": pending,
        }
        return request.response(body=orjson.dumps(body))

    def runtime_info(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        """RocketMQ's runtime KVTable (all values strings), plus the maintenance jobs' last runs."""
        return request.response(body=orjson.dumps({"table": self.runtime_table()}))

    def runtime_table(self) -> dict[str, str]:
        broker, store, stats = self.broker, self._store, self.broker.stats
        stats.roll_day()
        uptime_s = max(0, (broker.clock_ms() - broker.boot_timestamp) // 1000)
        table: dict[str, Any] = {
            "brokerVersionDesc": f"Quiver {__version__}",
            "brokerVersion": "401",
            "brokerName": broker.config.broker_name,
            "brokerClusterName": broker.config.broker_cluster_name,
            "brokerAddr": broker.address,
            "bootTimestamp": broker.boot_timestamp,
            "runtime": _runtime_text(uptime_s),
            "msgPutTotalYesterdayMorning": stats.put_total_yesterday_morning,
            "msgPutTotalTodayMorning": stats.put_total_today_morning,
            "msgPutTotalTodayNow": stats.puts.total,
            "msgGetTotalYesterdayMorning": stats.get_total_yesterday_morning,
            "msgGetTotalTodayMorning": stats.get_total_today_morning,
            "msgGetTotalTodayNow": stats.gets.total,
            "putTps": " ".join(_tps(stats.put_tps(None, s)) for s in (10, 60, 600)),
            "getTransferedTps": " ".join(_tps(stats.get_tps(None, None, s)) for s in (10, 60, 600)),
            "earliestMessageTimeStamp": max(0, store.get_earliest_message_time()),
            # Read only: check_disk_space() would also act on what it finds.
            "commitLogDiskRatio": f"{disk_used_ratio(store.root):.4f}",
            "flushDiskType": store.config.flush_disk_type,
            "consumerGroups": len(broker.clients.consumer_groups()),
            "producerGroups": len(broker.clients.producer_groups()),
            "topicCount": len(broker.topics.all()),
            "standaloneMaintenance": broker.maintenance.mode,
            "brokerId": broker.config.broker_id,
            "brokerRole": broker.config.broker_role,
        }
        if broker.replication is not None:
            table.update(_replication_figures(broker.replication.status()))
        table.update(store.stats)
        for job, state in broker.maintenance.status()["jobs"].items():
            table[f"maintenance.{job}.driver"] = state["driver"]
            table[f"maintenance.{job}.fallback"] = str(state["fallback"]).lower()
            run = state["lastRun"]
            if run is not None:
                table[f"maintenance.{job}.lastRunTimestamp"] = run["startedMs"]
                table[f"maintenance.{job}.durationMs"] = f"{run['durationMs']:.3f}"
                table[f"maintenance.{job}.result"] = run["result"]
                table[f"maintenance.{job}.runner"] = run["runner"]
        return {key: "" if value is None else str(value) for key, value in table.items()}


def _replication_figures(status: dict[str, Any]) -> dict[str, Any]:
    """The runtime keys of a broker's replication (``BrokerReplication.status``).

    A master: its connected and in-sync slaves, each slave's lag under ``haSlave.<addr>``
    (the HA link's peer address), and RocketMQ's ``slaveFallBehindMuch``: the bytes of its
    log the most advanced slave does not hold (the whole log while no slave is connected).
    A slave: its master, whether the HA link is up, and the link's last problem.
    """
    if status.get("role") == "master":
        slaves = status.get("slaves", [])
        best = max((s["ackedOffset"] for s in slaves), default=0)
        figures: dict[str, Any] = {
            "haConnectedSlaves": len(slaves),
            "haInSyncSlaves": sum(1 for s in slaves if s["inSync"]),
            "slaveFallBehindMuch": max(0, status["maxOffset"] - best),
        }
        for slave in slaves:
            key = f"haSlave.{slave['addr']}"
            figures[f"{key}.ackedOffset"] = slave["ackedOffset"]
            figures[f"{key}.behindBytes"] = slave["behindBytes"]
            figures[f"{key}.behindMs"] = slave["behindMs"]
            figures[f"{key}.inSync"] = str(slave["inSync"]).lower()
        if status.get("problems"):
            figures["haProblem"] = status["problems"][-1]
        return figures
    return {
        "haMasterAddr": status.get("masterAddr", ""),
        "haMasterHaAddr": status.get("masterHaAddr", ""),
        "haConnected": str(bool(status.get("connected"))).lower(),
        "haLastFrameMs": status.get("lastFrameMs", 0),
        "haProblem": status.get("problem") or status.get("syncProblem") or "",
    }


def _runtime_text(seconds: int) -> str:
    """RocketMQ's uptime format: ``[ 0 days, 1 hours, 2 minutes, 3 seconds ]``."""
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"
