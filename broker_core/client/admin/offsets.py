"""The admin client's offset calls: where a group is in each queue, and moving it.

Moves through the broker (``reset_offset_by_time``, ``reset_offsets_exactly``) tell online
consumers to jump there; ``update_consumer_offsets`` only writes the committed offset (for
a stopped group).  Also where a queue's messages are by time (``offsets_by_time``,
``earliest_store_times``).
"""

from __future__ import annotations

from collections.abc import Mapping

from broker_core.client.admin.groups import GroupCalls
from broker_core.client.adminmodels import as_message_queue
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.headers import UpdateConsumerOffsetRequestHeader

__all__ = ["OffsetCalls"]


class OffsetCalls(GroupCalls):
    """Reset, skip and set a group's offsets; find a queue's offsets by time."""

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = True
    ) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets on ``topic`` to the first message stored at or after
        ``timestamp_ms`` (-1: to the end), on every master of the topic.

        Online consumers are told by their broker to jump there.  Without ``force`` a
        queue whose committed offset is already below the new one is left alone.
        Returns the new offset of every queue.
        """
        masters = await self._route_masters(topic)
        fields = {"topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": force}
        responses = await self._ask_each(masters.values(), RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
        offsets: dict[MessageQueue, int] = {}
        for response in responses.values():
            table = self._json(response, "reset offset").get("offsetTable") or {}
            for key, offset in table.items():
                offsets[as_message_queue(key)] = int(offset)
        return dict(sorted(offsets.items()))

    async def reset_offsets_exactly(
        self, group: str, offsets: Mapping[MessageQueue, int]
    ) -> dict[MessageQueue, int]:
        """Move ``group`` to the given offset of each queue (within its stored range); online
        consumers are told at once, an offline group resumes there.  Returns the new offsets."""
        done: dict[MessageQueue, int] = {}
        for queue, offset in sorted(offsets.items()):
            masters = await self._route_masters(queue.topic)
            addr = masters.get(queue.broker_name)
            if addr is None:
                raise AdminError(f"broker {queue.broker_name!r} has no master serving {queue.topic!r}")
            fields = {
                "topic": queue.topic,
                "group": group,
                "timestamp": -1,
                "isForce": True,
                "queueId": queue.queue_id,
                "offset": offset,
            }
            await self._invoke(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
            done[queue] = offset
        return done

    async def reset_offset_to_earliest(self, group: str, topic: str) -> dict[MessageQueue, int]:
        """Consume ``topic`` again from its oldest stored message."""
        return await self.reset_offset_by_time(group, topic, 0, force=True)

    async def reset_offset_to_latest(self, group: str, topic: str) -> dict[MessageQueue, int]:
        """Skip everything stored so far in ``topic``: consume only what arrives from now on."""
        return await self.reset_offset_by_time(group, topic, -1, force=True)

    async def skip_accumulated(self, group: str, topic: str | None = None) -> dict[MessageQueue, int]:
        """Move ``group`` to the end of every topic it consumes (or of ``topic``): its lag goes to 0."""
        topics = [topic] if topic is not None else (await self.consume_stats(group)).topics
        moved: dict[MessageQueue, int] = {}
        for name in topics:
            moved.update(await self.reset_offset_to_latest(group, name))
        return dict(sorted(moved.items()))

    async def update_consumer_offsets(self, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Set ``group``'s committed offset of each queue to the given one (checked against
        the queue's range).  Online consumers are not told: their next commit wins, so
        use this for a group that is stopped; ``reset_offset_by_time`` tells them."""
        for queue, offset in offsets.items():
            addr = await self._master_of(queue)
            fields = {"topic": queue.topic, "queueId": queue.queue_id}
            low = int(
                (await self._invoke(addr, RequestCode.GET_MIN_OFFSET, fields)).ext_fields.get("offset") or 0
            )
            high = int(
                (await self._invoke(addr, RequestCode.GET_MAX_OFFSET, fields)).ext_fields.get("offset") or 0
            )
            if not low <= offset <= high:
                raise AdminError(f"offset {offset} of {queue} is outside the queue's range [{low}, {high}]")
            header = UpdateConsumerOffsetRequestHeader(group, queue.topic, queue.queue_id, offset)
            response = await self.requests.update_consumer_offset(addr, header)
            if response.code != ResponseCode.SUCCESS:
                raise self._refusal(addr, RequestCode.UPDATE_CONSUMER_OFFSET, response)

    async def _master_of(self, queue: MessageQueue) -> str:
        addr = (await self._route_masters(queue.topic)).get(queue.broker_name)
        if addr is None:
            raise AdminError(f"broker {queue.broker_name!r} of {queue} has no master in the topic's route")
        return addr

    # -- where messages are by time ------------------------------------------------------------

    async def offsets_by_time(self, topic: str, timestamp_ms: int) -> dict[MessageQueue, int]:
        """Per queue, the offset of the first message stored at or after ``timestamp_ms``."""
        queues = await self._each_queue(topic)
        found = await self._gather(self._offset_by_time(addr, q, timestamp_ms) for addr, q in queues)
        return {q: offset for (_, q), offset in zip(queues, found, strict=True)}

    async def earliest_store_times(self, topic: str) -> dict[MessageQueue, int]:
        """Per queue, when its oldest stored message was stored (epoch ms; 0 when it is empty)."""
        queues = await self._each_queue(topic)

        async def one(addr: str, queue: MessageQueue) -> int:
            fields = {"topic": topic, "queueId": queue.queue_id}
            accept = (ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR)
            response = await self._invoke(addr, RequestCode.GET_EARLIEST_MSG_STORETIME, fields, accept=accept)
            return max(0, int(response.ext_fields.get("timestamp") or 0)) if response.code == 0 else 0

        found = await self._gather(one(addr, q) for addr, q in queues)
        return {q: ts for (_, q), ts in zip(queues, found, strict=True)}

    async def _offset_by_time(self, addr: str, queue: MessageQueue, timestamp_ms: int) -> int:
        fields = {"topic": queue.topic, "queueId": queue.queue_id, "timestamp": timestamp_ms}
        response = await self._invoke(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields)
        return int(response.ext_fields.get("offset") or 0)

    async def _each_queue(self, topic: str) -> list[tuple[str, MessageQueue]]:
        """(master address, queue) for every readable queue of ``topic``."""
        route = await self.topic_route(topic)
        addrs = route.read_addrs()
        return [
            (addrs[q.broker_name], MessageQueue(topic, q.broker_name, queue_id))
            for q in route.queue_datas
            if q.broker_name in addrs
            for queue_id in range(q.read_queue_nums)
        ]
