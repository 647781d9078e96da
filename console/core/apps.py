"""Register the console's core app."""

from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The core app: pages and commands that belong to no feature area."""

    name = "console.core"
    label = "core"
    verbose_name = "Quiver console"
