"""END_TRANSACTION (37): a producer commits or rolls back a half message.

The C++ client sends it as a normal request (it never sets the oneway bit on the wire),
so the broker answers; a Java broker would not, and no client waits for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from broker_core.broker.transaction import TransactionService


class EndTransactionProcessor:
    def __init__(self, service: TransactionService) -> None:
        self.service = service

    async def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand | None:
        fields = request.ext_fields
        try:
            commit_log_offset = int(fields.get("commitLogOffset") or -1)
            half_queue_offset = int(fields.get("tranStateTableOffset") or -1)
            decision = int(fields.get("commitOrRollback") or 0)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed END_TRANSACTION header: {exc}")
        from_check = (fields.get("fromTransactionCheck") or "").lower() in ("1", "true")
        problem = await self.service.end(commit_log_offset, half_queue_offset, decision, from_check)
        if problem is not None and problem.startswith("no half message"):
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        return request.response(remark=problem)
