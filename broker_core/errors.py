"""One error tree for the engine.

Expected outcomes (no new message, offset moved, flush timeout...) are *values*: result
dataclasses with a status enum (``broker_core.store.results``).  Exceptions are for misuse,
broken invariants, corruption and transport failures.  Every error that can cross the wire
declares the RocketMQ response ``code`` it maps to and whether a retry may help, so the
remoting layer maps errors to responses in one place (``ResponseError.for_code``).
"""

from __future__ import annotations

from typing import ClassVar


class BrokerCoreError(Exception):
    """Base of every error raised by ``broker_core``."""


class ConfigError(BrokerCoreError, ValueError):
    """A configuration value is missing, malformed or out of range."""


class StoreError(BrokerCoreError):
    """The store cannot do what was asked (its files, not the caller's input)."""


class CorruptFileError(StoreError):
    """A store file fails its own checks (bad magic, size or checksum) where it must not."""


class StoreClosedError(StoreError):
    """The store was shut down; nothing more can be read or written."""


class ResponseError(BrokerCoreError):
    """An error that maps to a RocketMQ response code.

    Subclasses set ``code`` (the ResponseCode) and ``retriable``; ``for_code`` finds the
    most specific subclass for a code received from a peer.
    """

    # SYSTEM_ERROR; a subclass sets its own, and an instance made ``for_code`` carries the
    # code it was received with (an instance attribute, hence no ClassVar).
    code: int = 1
    retriable: ClassVar[bool] = False
    _registry: ClassVar[dict[int, type[ResponseError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        ResponseError._registry.setdefault(cls.code, cls)

    def __init__(self, remark: str = "", *, code: int | None = None) -> None:
        super().__init__(remark)
        self.remark = remark
        if code is not None:
            self.code = code

    @classmethod
    def for_code(cls, code: int, remark: str = "") -> ResponseError:
        """Return an instance of the registered subclass for ``code`` (or a generic one)."""
        klass = cls._registry.get(code, ResponseError)
        return klass(remark, code=code)


class SystemError_(ResponseError):
    code = 1


class SystemBusyError(ResponseError):
    code = 2
    retriable = True


class RequestCodeNotSupportedError(ResponseError):
    code = 3


class FlushDiskTimeoutError(ResponseError):
    code = 10
    retriable = True


class MessageIllegalError(ResponseError, ValueError):
    """The message breaks a format or size rule (body, topic, properties)."""

    code = 13


class ServiceNotAvailableError(ResponseError):
    """The store or broker refuses writes for now (disk full, shutting down, read-only)."""

    code = 14
    retriable = True


class NoPermissionError(ResponseError):
    code = 16


class TopicNotExistError(ResponseError):
    code = 17


class TopicExistAlreadyError(ResponseError):
    code = 18


class QueryNotFoundError(ResponseError):
    code = 22


class AdminError(BrokerCoreError):
    """An admin request (console, CLI, jobs) failed.

    ``code`` is the ResponseCode the nameserver or broker answered with and ``remark`` its
    explanation; ``addr`` is who answered.  ``code`` is None when the failure is ours or
    the network's (see ``AdminUnreachableError``) rather than a refusal by the remote.
    """

    def __init__(
        self, message: str, *, code: int | None = None, remark: str = "", addr: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.remark = remark
        self.addr = addr


class AdminUnreachableError(AdminError):
    """No answer: every nameserver, or the broker asked, was down, refused or timed out."""


class ClientError(BrokerCoreError):
    """A producer or consumer could not do what was asked (``broker_core.client``)."""


class NoRouteError(ClientError):
    """No nameserver knows a route for the topic (or every one is unreachable)."""


class SendTimeoutError(ClientError, TimeoutError):
    """No broker answered the send within its timeout (retries included)."""


class MessageTooLargeError(ClientError, ValueError):
    """A message (or batch) is larger than the producer's ``max_message_size``."""


class BrokerRefusedError(ClientError):
    """A broker answered a request with an error code.

    ``code`` and ``remark`` are the broker's own; ``addr`` is the broker that answered.
    """

    def __init__(self, message: str, *, code: int, remark: str = "", addr: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.remark = remark
        self.addr = addr
