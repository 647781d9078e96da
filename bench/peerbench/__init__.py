"""Peers benchmark: one workload through Quiver, Redis Streams, NATS JetStream and RabbitMQ, in one run.

    python bench/peers.py [--quick] [--count N] [--only quiver,redis,nats,rabbitmq,echo]
                          [--scenarios sync,sync8,batch,catchup,latency] [--quiver-flush ASYNC_FLUSH]

Why: the platform's notes compare Quiver with the brokers people would otherwise run.
Figures measured on other machines, other days, with other clients say little, so this
runs the same four scenarios through each system on this machine, one after the other,
each with its usual Python client, and prints the ratios of Quiver's figures to theirs.

Systems (every one on 127.0.0.1; a peer that refuses the connection is *skipped*, with the
reason, never failed):

* **quiver**: our nameserver and broker started here as ``python -m broker_core``
  processes on free ports (bench/servers.py, as bench/broker.py does), a store in a temp
  dir, each scenario's topic with 8 queues; our client (``broker_core.client``);
* **redis**: Redis Streams at :6379 through redis-py (with hiredis when installed);
* **nats**: NATS JetStream at :4222 through nats-py, a file-storage stream;
* **rabbitmq**: RabbitMQ at :5672 (guest/guest) through pika, a durable classic queue,
  persistent messages, publisher confirms;
* **echo**: not a broker but the ceiling of the ``sync`` scenario (the only one it runs):
  a do-nothing uvloop server, started for the scenario, answers each 1 KiB send frame with
  a send response; a blocking socket writes one and reads its answer, one at a time.  It
  is the most one Python thread can get from one-at-a-time requests on this machine.

Each system's durability settings are printed: they differ, and they explain much of the
spread (a server that answers before anything reaches the disk does less per message).

Scenarios (1 KiB bodies), each run for every system before the next scenario starts:

* ``sync``: one thread sends one message at a time and waits for its acknowledgement
  (Quiver ``Producer.send``, ``XADD``, ``js.publish`` awaiting the PubAck, ``basic_publish``
  on a confirming channel); msgs/s over a fixed window after a warm-up;
* ``sync8``: ``sync`` from 8 senders at once, each waiting for its own acknowledgements:
  threads sharing Quiver's one ``Producer`` (as Java applications share theirs), threads
  with a redis-py connection each and a pika connection and confirming channel each, 8
  coroutines awaiting ``js.publish`` on nats-py's one loop.  With ``--quiver-flush
  SYNC_FLUSH`` it sets Quiver's group commit against RabbitMQ's confirmed publishes;
* ``batch``: the same with many messages per round trip: Quiver ``send_batch`` of 32 and
  ``send_async`` with 256 outstanding (both shown, the better one is the scenario's
  figure), a redis pipeline of 32 ``XADD``, ``js.publish_async`` with 256 PubAcks
  outstanding, pika's asynchronous confirms with 256 unconfirmed messages;
* ``catchup``: ``--count`` messages (200,000; ``--quick`` 10,000) are stored first
  (untimed, and the server is left to settle), then one consumer reads them all with
  acknowledgements, timed from creating the consumer until the last is acknowledged:
  Quiver PushConsumer (a new group from the first offset, listener batches of up to 32,
  the offsets committed at its shutdown, which is timed; also a PullConsumer polling
  500 at a time), ``XREADGROUP COUNT 500`` + one ``XACK`` per batch, a durable pull
  consumer fetching 500 with the AckAll policy (acking a batch's last message acks the
  batch), ``basic_consume`` with prefetch 1,000 and ``multiple=True`` acks every 500;
* ``latency``: a producer sends 2,000 msgs/s for 5 s (``--quick``: 1.5 s) after a
  0.5 s warm-up, one synchronous send at a time paced by a clock, each body starting
  with ``time.perf_counter_ns()``; a consumer in the same process records receive time
  minus send time: p50/p99/max in ms and how many of the sent messages arrived; beside
  them each send's own round trip (to its acknowledgement), and the send rate reached (a
  producer whose synchronous sends take over 0.5 ms falls behind: its messages go out
  later, their stamps taken as they go, so the latencies stay true).  Consumers: Quiver
  PushConsumer, ``XREADGROUP BLOCK`` on its own connection and thread, a pull consumer
  fetching on the same event loop, ``basic_consume`` on its own connection and thread.

Every system gets a fresh, uniquely named topic/stream/queue per scenario, deleted
afterwards (and once more at the end, in case a child died).  Each system runs each
scenario in a child process (``bench/peers.py --role peer SPEC``) with a hard timeout, so
clients never share a process.  Before each child the server is left to settle (its CPU
use drops).  The table ends with ratios (``quiver/redis 0.3x``: Quiver's figure over the
peer's; for latencies lower is better), and the last line of output is one JSON object of
every figure (null where a system was skipped or a scenario failed), with issue 19's
targets (``report.TARGETS``) as ``target_*`` booleans.

The package, one module per part: ``workload`` (sizes, settings, the peers' addresses),
``measure`` (the send window, paced latency, catch-up figures: the same for every
system), ``system`` (the ``System`` protocol every adapter keeps) and one adapter per
system in ``systems/`` (``quiver``, ``redis_streams``, ``nats_jetstream``, ``rabbitmq``,
``echo``),
``child`` (a system's part in a child process), ``runner`` (the parent: servers, order
of runs), ``report`` (progress lines, table, JSON line) and ``cli`` (the command line).
``bench/peers.py`` is the command and the children's entry point.
"""
