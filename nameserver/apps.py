"""Register the nameserver app."""

from __future__ import annotations

from django.apps import AppConfig


class NameserverConfig(AppConfig):
    """The cluster list and topology reads the console stands on (app label ``nameserver``)."""

    name = "nameserver"
    verbose_name = "Clusters"
