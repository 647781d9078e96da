"""The gRPC endpoint for RocketMQ 5 clients (RocketMQ's proxy, in cluster mode).

``python -m broker_core proxy -c rmq-proxy.json`` serves ``apache.rocketmq.v2.MessagingService``
(the protocol of apache/rocketmq-apis, vendored in ``protos/`` with its licence; the Python
stubs are generated from it at install, ``stubs``) in front of the brokers of one cluster,
which it talks to over the remoting protocol like any 4.x client.

- ``stubs``: the generated message and service modules (made on first use if missing).
- ``config``: RocketMQ's proxy config file (``rmq-proxy.json``) and its keys.
- ``service``: the RPCs: what each asks of the brokers and answers.
- ``server``: the grpc.aio server and the process around it.
"""
