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


def find_cluster(name: str | None) -> ClusterRef:
    """The managed cluster called ``name`` (the first one when ``name`` is empty).

    Raises:
        LookupError: no managed cluster has that name (the message lists the known ones).
    """
    clusters = managed_clusters()
    if not name:
        return clusters[0]
    for cluster in clusters:
        if cluster.name == name:
            return cluster
    known = ", ".join(c.name for c in clusters)
    raise LookupError(f"no cluster {name!r} (clusters: {known})")
