"""Broker benchmark: one broker process measured side by side with its ceilings, in one run.

    python bench/broker.py [--quick] [--only PHASE[,PHASE]] [--broker-prefix CMD] [--keep]

A nameserver and a broker (ASYNC_FLUSH, default 1 GiB segments) run as their own
processes, started with ``python -m broker_core``; so do the echo server and every load
generator.  Figures (1 KiB bodies, a tag and a UNIQ_KEY on every message, as the official
client sends):

* the store alone, first (median of 3): bench/store.py's append loop in this process,
  one at a time and in batches of 32: what the broker could do without the network;
* ingest, raw frames: a load-generator process pipelines SEND_MESSAGE frames (code 10,
  JSON headers with the C++ client's field names, all values strings) over 4
  connections with a fixed window of requests outstanding on each: msgs/s and send
  latency (request written to response read) p50/p99, one message per request and
  batches of 32 (code 10 with batch=1, the body made by ``encode_batch``); also one
  request at a time on one connection.  Beside each: the same load against an echo
  server on the same remoting layer (answers at once with a response of the broker's
  shape, stores nothing);
* ingest, official client: ``rocketmq==0.4.4``, 16 threads calling ``send_sync`` (and
  ``send_batch`` of 32) in a child process, against the broker and against the echo
  server (which also answers route queries, so the client can use it as a broker);
* ingest, our client (``broker_core.client``), in a child process of its own like the
  official client's: one ``Producer``, 1 KiB messages with a tag, 0.5 s warm-up and 2 s
  measured per mode — ``send`` from one thread and from 16 threads, ``send_async`` with
  256 futures outstanding, ``send_batch`` of 32 from 16 threads — against the echo
  server (its own nameserver) and against the broker; beside the official client's
  figures (with one thread too, measured alongside ours);
* consume catch-up: pull (PULL_MESSAGE, 32 per pull, one pull in flight per queue) 400,000
  stored messages (what the ingest phases stored, topped up with batches if they did not
  run); the echo answers the same pulls;
* consume catch-up, clients: our PushConsumer (a new group from the first offset,
  default settings, counting what reaches the listener), our PullConsumer (one thread
  per queue calling ``pull``) and the official PushConsumer, each over the first 8,000
  messages of every queue of the topic the ingest phases filled, from ``start()`` until
  all are in;
* end-to-end at a fixed rate: single sends paced at 5,000 msgs/s while a consumer
  long-polls every queue: send latency p50/p99 (the 5 ms target) and send-to-receive
  latency (from a send timestamp in the body); store-to-receive comes from the records'
  STORETIMESTAMP (ms resolution).

Before each phase the broker is left to settle (its CPU use drops: next segment warmed,
dispatch done).  Load is measured after a warm-up, over a fixed window; every loop is
bounded in count and time, and all traffic stays on 127.0.0.1.  The last line of output
is one JSON object of the figures.

The package, one module per part: ``frames`` (the workload's frames and constants),
``measure`` (the window every load counts in, a catch-up's arrivals), one module per
load and server a child process runs, behind the ``roles.Role`` contract (``rawframes``:
the raw-frame load generator, ``--role loadgen SPEC``; ``echo``: the echo server,
``--role echo``; ``official``: the official client, ``--role official SPEC``; ``ours``:
our client, ``--role ours SPEC``), ``phases`` (the parent: settings, servers, phases in
order), ``report`` (the printed lines, the targets, the JSON line) and ``cli`` (the
command line).  ``bench/broker.py`` is the command and the children's entry point.
Starting the servers and running children: bench/servers.py (shared with bench/peers.py).
"""
