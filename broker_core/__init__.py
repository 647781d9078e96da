"""Quiver's engine: a RocketMQ-style store, broker, nameserver and clients.

This package imports nothing from Django, Celery, Channels or PySpark (a test checks it):
those frameworks live at the edges (``console/``, ``nameserver/``, ``spark_reports/``)
and talk to the engine through its public API or the remoting protocol.

Layers, lowest first: the value types both sides share (``model``: the record format,
topic and group configs, job names; and the flat modules ``topics``, ``tags``,
``messagequeue``, ``routedata``), the protocol (``remoting``: frames, and in
``remoting.headers`` every request and response header), then the store and the broker
on one side and the clients (``client``) on the other.  The clients import nothing from
``store`` or ``broker`` (a test checks that too), so a process that only uses a client
never loads the storage engine.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
