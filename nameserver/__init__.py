"""The console's view of cluster topology: the cluster list, cluster/broker/route pages and API."""
