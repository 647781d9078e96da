"""Value types the broker and the clients share, below both.

The record format (``message``) and Java's string hash (``hashcode``), topic and
subscription-group configs with their permission bits (``topicconfig``, ``groupconfig``),
the typed reading of their JSON fields (``jsonfields``) and the maintenance job names
(``maintenance``).  Modules here import only the standard library, ``broker_core.errors``,
``broker_core.topics`` and the optional C speedups: a process that only uses a client
never loads the storage engine or the broker (``tests/unit/test_layering.py``).
"""
