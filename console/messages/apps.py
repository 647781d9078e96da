"""Register the messages app."""

from __future__ import annotations

from django.apps import AppConfig


class MessagesConfig(AppConfig):
    name = "console.messages"
    label = "quiver_messages"
    verbose_name = "Messages"
