"""INVOKE_BROKER_TO_RESET_OFFSET (222): move a group's offsets in a topic to a point in time.

For each queue of the topic the new offset is the first message stored at or after
``timestamp`` (``-1``: the queue's end).  Without ``isForce`` an offset only moves back,
never past what the group has consumed.  Unlike a Java broker, which refuses when the
group is offline, Quiver commits the new offsets itself, so an offline group resumes
from them (a group the broker knows nothing of is refused: a typo must not create
one); online consumers are told at once with RESET_CONSUMER_CLIENT_OFFSET (220),
in the body shape their language reads (the C++ client parses only an array).

With ``queueId`` and ``offset`` (RocketMQ 5's reset by queue) only that queue moves, to
exactly that offset, which must lie within the queue's stored range.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson

from broker_core.broker.clients import ConsumerClient
from broker_core.errors import MessageIllegalError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting import fastjson
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import header_bool, header_bool_for

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

TO_MAX_OFFSET = -1


def offset_table_body(offsets: dict[MessageQueue, int], language: str) -> bytes:
    """``{"offsetTable": ...}``: an array of queues for C++ readers, a MessageQueue map otherwise."""
    if language == "CPP":
        rows = [{**mq.to_json(), "offset": offset} for mq, offset in sorted(offsets.items())]
        return orjson.dumps({"offsetTable": rows})
    return fastjson.dumps({"offsetTable": dict(sorted(offsets.items()))})


class ResetOffsetProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def reset_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        topic, group = fields.get("topic", ""), fields.get("group", "")
        force = header_bool(fields.get("isForce"))
        try:
            timestamp = int(fields.get("timestamp") or TO_MAX_OFFSET)
        except ValueError:
            return request.response(
                ResponseCode.SYSTEM_ERROR, f"timestamp {fields.get('timestamp')!r} is not a number"
            )
        config = self.broker.topics.get(topic)
        if config is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if not self._known_group(group):
            return request.response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"the consumer group[{group}] not exist here (no config, offsets or clients); "
                "create it first (updateSubGroup) to reset a group that has never consumed",
            )
        try:
            if fields.get("queueId") not in (None, "") and fields.get("offset") not in (None, ""):
                offsets = self._reset_queue(group, topic, config.write_queue_nums, fields, conn)
            else:
                offsets = self._reset(group, topic, config.write_queue_nums, timestamp, force, conn)
        except MessageIllegalError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"cannot reset offsets: {exc}")
        for client in self.broker.clients.consumer_clients(group):
            self._notify(client, group, topic, timestamp, force, offsets)
        log.info(
            "reset offsets of group %s in %s to %s (force=%s): %s", group, topic, timestamp, force, offsets
        )
        return request.response(body=offset_table_body(offsets, request.language))

    def _known_group(self, group: str) -> bool:
        """A typo must not create a group: it needs a config, offsets or an online client."""
        store = self.broker.store
        assert store is not None
        return bool(
            self.broker.groups.get(group)
            or store.consumer_offsets.which_topics_by_consumer_group(group)
            or self.broker.clients.consumer_ids(group)
        )

    def _reset_queue(
        self, group: str, topic: str, queues: int, fields: dict[str, str], conn: Any
    ) -> dict[MessageQueue, int]:
        """Set one queue's offset exactly (the console's per-queue reset)."""
        store = self.broker.store
        assert store is not None
        try:
            queue_id, offset = int(fields["queueId"]), int(fields["offset"])
        except ValueError:
            raise MessageIllegalError("queueId and offset must be numbers") from None
        if not 0 <= queue_id < queues:
            raise MessageIllegalError(f"queue {queue_id} does not exist: {topic} has {queues} queue(s)")
        low, high = (
            store.get_min_offset_in_queue(topic, queue_id),
            store.get_max_offset_in_queue(topic, queue_id),
        )
        if not low <= offset <= high:
            raise MessageIllegalError(
                f"offset {offset} of queue {queue_id} is outside its range [{low}, {high}]"
            )
        store.consumer_offsets.commit_offset(
            getattr(conn, "remote_address", "admin"), group, topic, queue_id, offset
        )
        return {MessageQueue(topic, self.broker.config.broker_name, queue_id): offset}

    def _reset(
        self, group: str, topic: str, queues: int, timestamp: int, force: bool, conn: Any
    ) -> dict[MessageQueue, int]:
        store = self.broker.store
        assert store is not None
        name = self.broker.config.broker_name
        offsets: dict[MessageQueue, int] = {}
        for queue_id in range(queues):
            current = store.consumer_offsets.query_offset(group, topic, queue_id)
            if timestamp == TO_MAX_OFFSET:
                target = store.get_max_offset_in_queue(topic, queue_id)
            else:
                target = store.get_offset_in_queue_by_time(topic, queue_id, timestamp)
            new = target if force or current < 0 or target < current else current
            store.consumer_offsets.commit_offset(
                getattr(conn, "remote_address", "admin"), group, topic, queue_id, new
            )
            offsets[MessageQueue(topic, name, queue_id)] = new
        return offsets

    @staticmethod
    def _notify(
        client: ConsumerClient,
        group: str,
        topic: str,
        timestamp: int,
        force: bool,
        offsets: dict[MessageQueue, int],
    ) -> None:
        request = RemotingCommand.request(
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
            {
                "topic": topic,
                "group": group,
                "timestamp": str(timestamp),
                "isForce": header_bool_for(force, client.language),
            },
            offset_table_body(offsets, client.language),
            oneway=True,
        )
        if not client.conn.send_oneway(request):
            log.info("could not tell consumer %s of the reset: its connection is closing", client.client_id)
