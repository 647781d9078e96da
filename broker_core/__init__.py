"""Quiver's engine: a RocketMQ-style store, broker, nameserver and clients.

This package imports nothing from Django, Celery, Channels or PySpark (a test checks it):
those frameworks live at the edges (``console/``, ``nameserver/``, ``spark_reports/``)
and talk to the engine through its public API or the remoting protocol.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
