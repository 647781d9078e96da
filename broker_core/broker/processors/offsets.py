"""Consumer offsets and queue offsets: codes 14, 15, 29, 30, 31 and 32.

A new group's first QUERY_CONSUMER_OFFSET: offset 0 while the queue's minimum offset is
still 0 (nothing expired), so it reads from the start, as a Java broker does for a young
queue; otherwise QUERY_NOT_FOUND, on which the C++ client starts at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import (
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController


def _queue(request: RemotingCommand) -> tuple[str, int]:
    return request.ext_fields.get("topic", ""), int(request.ext_fields.get("queueId") or 0)


class OffsetProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    @property
    def _store(self) -> Any:
        assert self.broker.store is not None
        return self.broker.store

    def query_consumer_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        header = QueryConsumerOffsetRequestHeader.from_fields(request.ext_fields)
        offset = self._store.consumer_offsets.query_offset(
            header.consumer_group, header.topic, header.queue_id
        )
        if offset >= 0:
            return request.response(ext_fields=QueryConsumerOffsetResponseHeader(offset).to_fields())
        if self._store.get_min_offset_in_queue(header.topic, header.queue_id) <= 0:
            return request.response(ext_fields=QueryConsumerOffsetResponseHeader(0).to_fields())
        return request.response(
            ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
        )

    def update_consumer_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        header = UpdateConsumerOffsetRequestHeader.from_fields(request.ext_fields)
        self._store.consumer_offsets.commit_offset(
            getattr(conn, "remote_address", ""),
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.commit_offset,
        )
        return request.response()

    def max_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        return request.response(
            ext_fields={"offset": str(self._store.get_max_offset_in_queue(*_queue(request)))}
        )

    def min_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        return request.response(
            ext_fields={"offset": str(self._store.get_min_offset_in_queue(*_queue(request)))}
        )

    def search_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        topic, queue_id = _queue(request)
        timestamp = int(request.ext_fields.get("timestamp") or 0)
        return request.response(
            ext_fields={"offset": str(self._store.get_offset_in_queue_by_time(topic, queue_id, timestamp))}
        )

    def earliest_store_time(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        topic, queue_id = _queue(request)
        return request.response(
            ext_fields={"timestamp": str(max(0, self._store.get_earliest_message_time(topic, queue_id)))}
        )
