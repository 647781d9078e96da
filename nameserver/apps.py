"""Register the nameserver app."""

from __future__ import annotations

from django.apps import AppConfig


class NameserverConfig(AppConfig):
    """The console's knowledge of clusters, read through the nameservers it is given."""

    name = "nameserver"
    verbose_name = "Clusters"
