"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12): messages by commit-log offset and by key."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

DEFAULT_MAX_NUM = 32
MAX_QUERY_NUM = 64


class QueryProcessor:
    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def view_by_offset(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        store = self.broker.store
        assert store is not None
        try:
            phys = int(request.ext_fields.get("offset") or -1)
        except ValueError:
            return request.response(ResponseCode.SYSTEM_ERROR, "offset is not a number")
        msg = store.look_message_by_offset(phys)
        if msg is None:
            return request.response(ResponseCode.SYSTEM_ERROR, f"could not find message by offset {phys}")
        record = store.commit_log.read(phys, msg.store_size)
        return request.response(body=record or b"")

    def query_by_key(self, request: RemotingCommand, conn: Any) -> RemotingCommand:
        store = self.broker.store
        assert store is not None
        fields = request.ext_fields
        try:
            max_num = min(int(fields.get("maxNum") or DEFAULT_MAX_NUM), MAX_QUERY_NUM)
            begin = int(fields.get("beginTimestamp") or 0)
            end = int(fields.get("endTimestamp") or 0) or None
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed query header: {exc}")
        found = store.query_message(fields.get("topic", ""), fields.get("key", ""), max_num, begin, end)
        if not found:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct"
            )
        records = [store.commit_log.read(m.commit_log_offset, m.store_size) or b"" for m in found]
        return request.response(
            ext_fields={
                "indexLastUpdateTimestamp": str(store.dispatcher.last_store_timestamp),
                "indexLastUpdatePhyoffset": str(store.dispatcher.dispatched_offset),
            },
            body=b"".join(records),
        )
