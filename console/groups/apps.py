"""Register the groups app."""

from __future__ import annotations

from django.apps import AppConfig


class GroupsConfig(AppConfig):
    name = "console.groups"
    label = "groups"
    verbose_name = "Consumer groups"
