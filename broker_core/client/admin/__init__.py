"""AdminClient: the typed admin API over the remoting protocol (mqadmin's calls, in asyncio).

The console, Celery jobs, Spark reports and the ``quiver-admin`` CLI all manage a cluster
through this one class.  It finds brokers through the nameservers (cluster info, topic
routes; one nameserver after another until one answers) and sends admin requests to the
broker masters (brokerId 0).  Callers get dataclasses (``broker_core.client.routes``,
``broker_core.client.adminmodels``, ``MessageExt``), never frames; a refusal raises
``AdminError`` with the response code and remark, no answer at all
``AdminUnreachableError``.

The client is composed of one part per concern, each a module of this package over the
request layer of ``base`` (which sends, signs and judges answers, and holds ``requests``,
the typed requests of ``broker_core.client.requests`` the consumers use too):

- ``cluster``: brokers, topic lists and routes (what every other part starts from);
- ``topics``: create, delete, configs, stats, consumers of a topic;
- ``groups``: consume stats, connections, subscription group configs, summaries;
- ``offsets``: resetting, skipping and setting a group's offsets; offsets by time;
- ``messages``: lookup, browsing, test sends, tracking, dead-letter resend, relays;
- ``acl``: a broker's ACL accounts;
- ``maintenance``: a broker's runtime info, settings, maintenance jobs and schedule.

Requests to several brokers go out concurrently; when any of them fails the whole call
fails (after every request has finished), so a result is never silently partial.

Thread-safety: event-loop only, like the ``RemotingClient`` underneath.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from broker_core.client.admin.acl import AclCalls
from broker_core.client.admin.base import parse_namesrv_addr
from broker_core.client.admin.maintenance import MAINTENANCE_JOBS, BrokerCalls
from broker_core.client.admin.messages import (
    DEFAULT_BROWSE_LIMIT,
    DEFAULT_QUERY_MAX_NUM,
    LONG_MAX,
    MessageCalls,
    MessageTrack,
    ResendOutcome,
    TrackType,
)
from broker_core.errors import AdminError, BrokerCoreError

__all__ = [
    "DEFAULT_BROWSE_LIMIT",
    "DEFAULT_QUERY_MAX_NUM",
    "LONG_MAX",
    "MAINTENANCE_JOBS",
    "AdminClient",
    "MessageTrack",
    "ResendOutcome",
    "TrackType",
    "parse_namesrv_addr",
]

T = TypeVar("T")
P = ParamSpec("P")


class AdminClient(MessageCalls, AclCalls, BrokerCalls):
    """Manage a cluster through its nameservers: ``async with AdminClient("ns:9876") as admin``.

    The arguments are those of the request layer, ``base.AdminRequests``: the nameserver
    addresses (may be empty for calls that name their broker), ``timeout``,
    ``connect_timeout``, a shared ``remoting`` client, and an ACL account to sign with.
    """

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def _malformed_answers_are_admin_errors(method: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Turn an answer of the wrong shape (a field missing or of the wrong type, which
    surfaces as KeyError, TypeError... while reading it) into an AdminError, so callers
    (the console, Celery jobs, the CLI) handle one exception type."""

    @functools.wraps(method)
    async def checked(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(*args, **kwargs)
        except BrokerCoreError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise AdminError(f"{method.__name__}: malformed answer: {type(exc).__name__}: {exc}") from exc

    return checked


for _name in dir(AdminClient):
    _method = getattr(AdminClient, _name)
    if not _name.startswith("_") and inspect.iscoroutinefunction(_method):
        setattr(AdminClient, _name, _malformed_answers_are_admin_errors(_method))
