"""HEART_BEAT (34) and UNREGISTER_CLIENT (35).

For now the broker checks the heartbeat body and acknowledges it; the client tables
(producers and consumers per group, channel expiry, NOTIFY_CONSUMER_IDS_CHANGED) build on
these handlers.
"""

from __future__ import annotations

from typing import Any

import orjson

from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand


def heartbeat(request: RemotingCommand, conn: Any) -> RemotingCommand:
    try:
        body = orjson.loads(request.body) if request.body else {}
    except orjson.JSONDecodeError as exc:
        return request.response(ResponseCode.SYSTEM_ERROR, f"the heartbeat body is not JSON: {exc}")
    if not isinstance(body, dict) or not body.get("clientID"):
        return request.response(ResponseCode.SYSTEM_ERROR, "the heartbeat body lacks clientID")
    return request.response()


def unregister_client(request: RemotingCommand, conn: Any) -> RemotingCommand:
    return request.response()
