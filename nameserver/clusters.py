"""Which clusters the platform manages: the console's cluster list, or the default one."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from nameserver.models import Cluster

DEFAULT_CLUSTER = "default"


@dataclass(frozen=True)
class ClusterRef:
    """A cluster by the name the console gives it and its nameserver list."""

    name: str
    namesrv_addr: str


def managed_clusters() -> list[ClusterRef]:
    """Every configured cluster; the platform's own nameserver when none is configured."""
    rows = [ClusterRef(c.name, c.namesrv_addr) for c in Cluster.objects.all()]
    return rows or [ClusterRef(DEFAULT_CLUSTER, settings.QUIVER["NAMESRV_ADDR"])]
