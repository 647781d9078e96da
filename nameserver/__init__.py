"""The console's knowledge of clusters; the nameserver process itself is ``broker_core/namesrv``.

The layer every console app stands on, importing only Django and ``broker_core``:

- ``models``: the cluster list (nameserver addresses, the console's only cluster state),
- ``clusters``: which clusters the platform manages and finding one by name (``ClusterRef``),
- ``topology``: what the nameservers say a cluster is made of (broker sets, roles, figures).

Pages, the REST API and the live socket of clusters and brokers live in ``console.clusters``.
"""
