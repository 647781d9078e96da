"""Register the topics app."""

from __future__ import annotations

from django.apps import AppConfig


class TopicsConfig(AppConfig):
    name = "console.topics"
    label = "topics"
    verbose_name = "Topics"
