"""Transport errors of the remoting layer.

These are failures of the conversation itself (a frame that cannot be parsed, a peer that
cannot be reached, does not answer in time or goes away), not answers from the peer: an
answer, even an error answer, is a ``RemotingCommand`` whose ``code`` the caller reads.
"""

from __future__ import annotations

from typing import Any

from broker_core.errors import BrokerCoreError


class RemotingError(BrokerCoreError):
    """Base of every transport error raised by ``broker_core.remoting``."""


class FrameError(RemotingError):
    """Bytes that are not a valid frame (bad lengths, header or serialize type, or too large).

    After one, the byte stream cannot be resynchronised: the connection must be closed.
    ``commands`` holds the whole, valid frames that came before the bad one in the same
    read, so they are still answered.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.commands: list[Any] = []


class RemotingConnectError(RemotingError):
    """A connection to the remote address could not be opened (refused, unreachable, timed out)."""


class RemotingTimeoutError(RemotingError, TimeoutError):
    """No response arrived within the request's timeout; a late one is dropped."""


class ConnectionClosedError(RemotingError):
    """The connection closed (or was closed) before the response arrived."""
