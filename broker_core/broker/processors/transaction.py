"""END_TRANSACTION (37): a producer commits or rolls back a half message.

The C++ client sends it as a normal request (it never sets the oneway bit on the wire),
so the broker answers; a Java broker would not, and no client waits for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import EndTransactionRequestHeader

if TYPE_CHECKING:
    from broker_core.broker.transaction import TransactionService


class EndTransactionProcessor:
    def __init__(self, service: TransactionService) -> None:
        self.service = service

    async def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand | None:
        try:
            header = EndTransactionRequestHeader.from_fields(request.ext_fields)
        except ValueError as exc:
            return request.response(ResponseCode.SYSTEM_ERROR, f"malformed END_TRANSACTION header: {exc}")
        problem = await self.service.end(
            header.commit_log_offset,
            header.tran_state_table_offset,
            header.commit_or_rollback,
            header.from_transaction_check,
        )
        if problem is not None and problem.startswith("no half message"):
            return request.response(ResponseCode.SYSTEM_ERROR, problem)
        return request.response(remark=problem)
