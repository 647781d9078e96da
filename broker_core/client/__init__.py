"""Clients of a Quiver (or RocketMQ) cluster, over the remoting protocol.

``admin.AdminClient`` is the management API the console, Celery jobs, Spark reports and
the ``quiver-admin`` CLI share; its results are the dataclasses of ``adminmodels`` and
``routes``.
"""

from __future__ import annotations

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError, AdminUnreachableError

__all__ = ["AdminClient", "AdminError", "AdminUnreachableError"]
