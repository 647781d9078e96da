"""Master/slave replication of the commit log (RocketMQ 4.x HA).

A broker set shares a ``brokerName``: ``brokerId = 0`` is its master, any other id a slave.
Every master listens on its HA port (``haListenPort``, by default ``listenPort + 1``); a slave
connects there, says which commit-log offset it holds, and the master streams the log from
that offset.  The slave writes the same bytes at the same offsets (``store.replica``) and
reports its offset back after every frame and on a heartbeat.

- ``protocol``: the two frames of the HA link (RocketMQ's own layout).
- ``master``: the master's side: the listener, one link per slave, and the waits of a
  ``SYNC_MASTER`` send until a slave holds it.
- ``slave``: the slave's side: one link to its master, reconnected as long as it runs.
What each side reports about its links is ``broker_core.model.hastatus`` (clients read it).

Both sides run on their own threads with blocking sockets, beside the store's threads: a
link moves bytes between a socket and the mapped commit log and never needs the broker's
event loop, which it would otherwise compete with for every chunk.
"""
