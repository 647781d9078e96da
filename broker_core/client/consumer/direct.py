"""CONSUME_MESSAGE_DIRECTLY: a console has one consumer run its listener on one message.

The console's "resend to client" (RocketMQ's ``consumeMessageDirectly``) reaches the
consumer through the broker with the message record as body.  The consumer runs its
listener once on that message, outside the normal flow: nothing is sent back, no offset
moves, whatever the listener answers.  The answer is RocketMQ's
``ConsumeMessageDirectlyResult`` as JSON, so tools read it as they read a Java client's::

    {"autoCommit": true, "consumeResult": "CR_SUCCESS", "order": false,
     "remark": "...", "spentTimeMills": 3}

``remark`` is present only when there is something to say (fastjson leaves nulls out).
"""

from __future__ import annotations

import enum
import logging
import time
import traceback
from collections.abc import Callable
from typing import Any

from broker_core.model.message import MessageExt

log = logging.getLogger(__name__)


class CMResult(enum.StrEnum):
    """How the listener took the message (RocketMQ ``CMResult``)."""

    CR_SUCCESS = "CR_SUCCESS"
    CR_LATER = "CR_LATER"
    CR_ROLLBACK = "CR_ROLLBACK"
    CR_COMMIT = "CR_COMMIT"
    CR_THROW_EXCEPTION = "CR_THROW_EXCEPTION"
    CR_RETURN_NULL = "CR_RETURN_NULL"


# Keyed by the value of the listener's ConsumeStatus (push.py imports this module, so the
# enum itself cannot be imported here).  RECONSUME_LATER is also what an orderly listener
# answers for RocketMQ's SUSPEND_CURRENT_QUEUE_A_MOMENT, which Java reports as CR_LATER too.
_RESULTS = {"CONSUME_SUCCESS": CMResult.CR_SUCCESS, "RECONSUME_LATER": CMResult.CR_LATER}


def consume_directly(
    listener: Callable[[list[MessageExt]], Any], msg: MessageExt, *, orderly: bool
) -> dict[str, Any]:
    """Run ``listener`` on ``msg`` alone; RocketMQ's ConsumeMessageDirectlyResult as a dict.

    Blocking (the listener's own time): for a worker thread, never the client's loop.
    A listener that raises is reported (CR_THROW_EXCEPTION, the exception in the remark),
    not propagated; one that answers nothing is CR_RETURN_NULL.
    """
    begun = time.monotonic()
    remark: str | None = None
    try:
        status = listener([msg])
    except Exception as exc:  # reported to the console, as Java does with any Throwable
        log.warning("consume directly of %s: the listener raised", msg.msg_id, exc_info=True)
        result, remark = CMResult.CR_THROW_EXCEPTION, exception_simple_desc(exc)
    else:
        result = _RESULTS.get(getattr(status, "value", ""), CMResult.CR_RETURN_NULL)
        if status is not None and result is CMResult.CR_RETURN_NULL:
            remark = f"the listener answered {status!r}, not a ConsumeStatus"
    answer: dict[str, Any] = {
        "autoCommit": True,
        "consumeResult": result.value,
        "order": orderly,
        "spentTimeMills": int((time.monotonic() - begun) * 1000),
    }
    if remark is not None:
        answer["remark"] = remark
    return answer


def exception_simple_desc(exc: BaseException) -> str:
    """The exception and where it was raised, in one line (RocketMQ's exceptionSimpleDesc)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f", at {last.name}({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    return text
