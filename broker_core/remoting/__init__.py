"""RocketMQ remoting: the frame codec, connections, the server and the client.

``codes``, ``command`` and ``acl`` are pure (no asyncio, no I/O); ``connection``, ``server``
and ``client`` run on asyncio ``Protocol``s.
"""
