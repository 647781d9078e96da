'use strict';
/*
 * Run by tests/v5/test_node_client.py with the official RocketMQ 5 Node.js client
 * (npm rocketmq-client-nodejs 1.0.8, installed by setup into .node-v5/ and found through
 * NODE_PATH).  It talks to the proxy and prints one JSON line per event on stdout, so the
 * test reads what the client saw.  The client logs under $HOME/logs: the test points HOME
 * at a temporary directory.
 *
 *   node client_child.cjs <mode>  < spec.json
 *
 * Every spec has `endpoints` (the proxy's host:port).
 *
 * produce  {messages: [{topic, body, tag?, keys?: [..], properties?: {..}, messageGroup?}]}
 *          sends them (a producer per topic): one line per message,
 *          {kind: "sent", index, message_id, offset} or {kind: "send_error", index, error}.
 * simple   {group, topic, filter?, count, batch?, invisible_ms?, await_ms?, deadline_ms?,
 *           leave_unacked?: [body, ..]}
 *          receives until `count` messages were acked (or the deadline passed, or the
 *          proxy gave an answer that asking again would not change): one line per
 *          received message ({kind: "message", ...what the client read}), one per ack
 *          ({kind: "acked", message_id} or {kind: "ack_error", ...}).  A message whose body
 *          is in leave_unacked is not acked at its first delivery, so it comes back once
 *          its invisible duration is over.
 * push     {group, topic, filter?, count, await_ms?, deadline_ms?, fail_first?: [body, ..]}
 *          a PushConsumer that consumes until `count` messages were consumed with SUCCESS:
 *          one line per delivery.  A body in fail_first answers FAILURE at its first
 *          delivery, so the client retries it.
 *
 * Every mode ends with {kind: "done", ...}; a failure outside a single call prints
 * {kind: "error", where, error} and exits 0, so the test reports what went wrong.
 */

const util = require('node:util');
const rmq = require('rocketmq-client-nodejs');

// Answers that will not change if the receive is asked again (a retry is for the others).
const FINAL_ERRORS = [
  rmq.UnsupportedException, rmq.BadRequestException, rmq.ForbiddenException,
  rmq.UnauthorizedException, rmq.NotFoundException,
];

function emit(line) {
  process.stdout.write(JSON.stringify(line) + '\n');
}

// The client's own log goes to its file under $HOME/logs; its warnings and errors are also
// printed as {kind: "log", level, message} lines, so a test that fails says why.
function reportingLogger() {
  const file = rmq.getDefaultLogger();
  const logger = {
    info: (...args) => file.info(...args),
    debug: (...args) => file.debug(...args),
    close: () => file.close(),
  };
  for (const level of [ 'warn', 'error' ]) {
    logger[level] = (...args) => {
      file[level](...args);
      emit({ kind: 'log', level, message: util.format(...args) });
    };
  }
  return logger;
}

function errorText(err) {
  return err && err.message ? `${err.name || 'Error'}: ${err.message}` : String(err);
}

function finish(code) {
  // The clients keep timers and channels open after shutdown; stdout is flushed first.
  process.stdout.write('', () => process.exit(code));
}

function view(message) {
  return {
    kind: 'message',
    message_id: message.messageId,
    topic: message.topic,
    body: message.body.toString('utf8'),
    tag: message.tag || null,
    keys: message.keys,
    properties: Object.fromEntries(message.properties),
    message_group: message.messageGroup || null,
    delivery_attempt: message.deliveryAttempt ?? null,
    corrupted: message.corrupted === true,  // set only when the body digest does not match
  };
}

async function readSpec() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

// Stop a client, but give up waiting after a few seconds: a PushConsumer's shutdown waits for
// its cached messages, which a message stuck in a retry loop never leaves.
async function stop(client) {
  let timer;
  const late = new Promise(resolve => { timer = setTimeout(() => resolve(true), 5000); });
  const slow = await Promise.race([ client.shutdown().then(() => false), late ]);
  clearTimeout(timer);
  if (slow) emit({ kind: 'log', level: 'warn', message: 'shutdown did not finish within 5 s' });
}

// One producer per topic: 1.0.8 starts up by querying each topic's route in turn and then
// waits for the proxy's settings answer, which it misses (and waits forever) when the answer
// comes back while a later route query is still under way.
async function produce(spec) {
  let sent = 0;
  for (const topic of new Set(spec.messages.map(m => m.topic))) {
    const producer = new rmq.Producer({
      endpoints: spec.endpoints, namespace: '', topics: [ topic ], logger: reportingLogger(),
    });
    await producer.startup();
    try {
      sent += await produceTo(producer, topic, spec.messages);
    } finally {
      await stop(producer);
    }
  }
  emit({ kind: 'done', sent });
}

async function produceTo(producer, topic, messages) {
  let sent = 0;
  for (const [index, m] of messages.entries()) {
    if (m.topic === topic) {
      try {
        const receipt = await producer.send({
          topic: m.topic,
          body: Buffer.from(m.body, 'utf8'),
          tag: m.tag,
          keys: m.keys,
          properties: m.properties ? new Map(Object.entries(m.properties)) : undefined,
          messageGroup: m.messageGroup,
        });
        sent += 1;
        emit({ kind: 'sent', index, message_id: receipt.messageId, offset: receipt.offset });
      } catch (err) {
        emit({ kind: 'send_error', index, error: errorText(err) });
      }
    }
  }
  return sent;
}

async function simple(spec) {
  const deadline = Date.now() + (spec.deadline_ms ?? 30000);
  const consumer = new rmq.SimpleConsumer({
    endpoints: spec.endpoints,
    namespace: '',
    consumerGroup: spec.group,
    logger: reportingLogger(),
    subscriptions: new Map([[spec.topic, spec.filter ?? '*']]),
    awaitDuration: spec.await_ms ?? 3000,
  });
  await consumer.startup();
  const leave = new Set(spec.leave_unacked ?? []);
  const leftOnce = new Set();
  let acked = 0;
  let received = 0;
  try {
    while (acked < spec.count && Date.now() < deadline) {
      let messages;
      try {
        messages = await consumer.receive(spec.batch ?? 16, spec.invisible_ms ?? 10000);
      } catch (err) {
        emit({ kind: 'receive_error', error: errorText(err) });
        if (FINAL_ERRORS.some(type => err instanceof type)) break;  // asking again would not help
        await new Promise(resolve => setTimeout(resolve, 200));
        continue;
      }
      for (const message of messages) {
        received += 1;
        emit(view(message));
        const body = message.body.toString('utf8');
        if (leave.has(body) && !leftOnce.has(body)) {
          leftOnce.add(body);
          continue;
        }
        try {
          await consumer.ack(message);
          acked += 1;
          emit({ kind: 'acked', message_id: message.messageId, body });
        } catch (err) {
          emit({ kind: 'ack_error', message_id: message.messageId, body, error: errorText(err) });
        }
      }
    }
  } finally {
    await stop(consumer);
  }
  emit({ kind: 'done', received, acked });
}

async function push(spec) {
  const deadline = Date.now() + (spec.deadline_ms ?? 30000);
  const failFirst = new Set(spec.fail_first ?? []);
  const failed = new Set();
  let succeeded = 0;
  let enough;
  const allConsumed = new Promise(resolve => { enough = resolve; });
  const consumer = new rmq.PushConsumer({
    endpoints: spec.endpoints,
    namespace: '',
    consumerGroup: spec.group,
    logger: reportingLogger(),
    subscriptions: new Map([[spec.topic, spec.filter ?? '*']]),
    longPollingTimeout: spec.await_ms ?? 3000,
    messageListener: {
      async consume(message) {
        const line = view(message);
        const body = line.body;
        if (failFirst.has(body) && !failed.has(body)) {
          failed.add(body);
          emit({ ...line, result: 'FAILURE' });
          return rmq.ConsumeResult.FAILURE;
        }
        emit({ ...line, result: 'SUCCESS' });
        succeeded += 1;
        if (succeeded >= spec.count) enough();
        return rmq.ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  let timer;
  const timeUp = new Promise(resolve => { timer = setTimeout(resolve, Math.max(0, deadline - Date.now())); });
  try {
    await Promise.race([ allConsumed, timeUp ]);
  } finally {
    clearTimeout(timer);
    await stop(consumer);
  }
  emit({ kind: 'done', succeeded });
}

const MODES = { produce, simple, push };

async function main() {
  const mode = process.argv[2];
  const run = MODES[mode];
  if (!run) {
    emit({ kind: 'error', where: 'arguments', error: `unknown mode ${JSON.stringify(mode)}` });
    return finish(2);
  }
  try {
    await run(await readSpec());
  } catch (err) {
    emit({ kind: 'error', where: mode, error: errorText(err) });
  }
  return finish(0);
}

main();
