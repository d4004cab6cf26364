// kafka-node 3.0.1's ZooKeeper HighLevelConsumer as one member of a benchmark group, driven
// over stdin by tools/bench_peers.py (the same line protocol as tools/bench_member.py):
//
//   node member.js ZK GROUP TOPIC [count=N]
//
// Commands, one per line, each answered by one line of JSON on stdout:
//   prepare  the ZooKeeper-based Client made and ready (brokers discovered); {"id": ...}
//   join     the HighLevelConsumer made (it registers and rebalances by itself);
//            {"at": <epoch seconds before making it>, "id": ...}
//   stats    {"rebalances", "failed_attempts", "errors", "messages"}: rebalance attempts
//            counted by wrapping the consumer's own rebalanceAttempt (it keeps no counter)
//   leave    {"at": <epoch seconds>}, then close(): its owner and id znodes deleted
//   halt     {}: stop reacting to the group (a run's end)
//   end of input: the process exits without leaving (the session's end releases all)
//
// count=N (tools/bench throughput): joins at once, reads from the start of the topic and,
// at the N-th message, prints "COUNT <n> <first ns> <last ns>" (process.hrtime) and exits.
'use strict';

const crypto = require('crypto');
const readline = require('readline');
const kafka = require('kafka-node');

const [zk, group, topic, ...rest] = process.argv.slice(2);
const extra = Object.fromEntries(rest.map((kv) => [kv.split('=')[0], kv.slice(kv.indexOf('=') + 1)]));
const id = `${group}_${crypto.randomUUID()}`; // the id kafka-node makes itself, made here to answer prepare
const stats = { rebalances: 0, failed_attempts: 0, errors: [], messages: 0 };
let client = null;
let consumer = null;

function answer(data) {
  process.stdout.write(JSON.stringify(data) + '\n');
}

function makeClient(cb) {
  // sessionTimeout as zkconsumer's members (6 s); the Client finds the brokers in ZooKeeper.
  client = new kafka.Client(zk, `${group}-client`, { sessionTimeout: 6000, spinDelay: 100, retries: 2 });
  client.on('error', (e) => stats.errors.push(String(e)));
  client.once('ready', () => cb());
}

function makeConsumer() {
  const c = new kafka.HighLevelConsumer(client, [{ topic }], {
    id, groupId: group, autoCommit: false, fromOffset: false, fetchMaxWaitMs: 100,
    fetchMaxBytes: 1024 * 1024,
  });
  const attempt = c.rebalanceAttempt.bind(c);
  c.rebalanceAttempt = (old, cb) => attempt(old, (err) => {
    stats.rebalances += 1;
    if (err) stats.failed_attempts += 1;
    cb(err);
  });
  c.on('error', (e) => stats.errors.push(String(e && e.message ? e.message : e)));
  return c;
}

function count(target) {
  let first = -1n;
  makeClient(() => {
    consumer = makeConsumer();
    consumer.on('message', (m) => {
      const _ = m.value;
      if (first < 0n) first = process.hrtime.bigint();
      stats.messages += 1;
      if (stats.messages === target) {
        process.stdout.write(`COUNT ${target} ${first} ${process.hrtime.bigint()}\n`, () => process.exit(0));
      }
    });
  });
  process.on('SIGTERM', () => {
    process.stdout.write(`COUNT ${stats.messages} ${first} -1\n`, () => process.exit(0));
  });
}

function serve() {
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    const command = line.trim();
    if (command === 'prepare' && client === null) {
      makeClient(() => answer({ id }));
    } else if (command === 'join' && consumer === null) {
      const at = Date.now() / 1000;
      const start = () => { consumer = makeConsumer(); answer({ at, id }); };
      if (client === null) makeClient(start); else start();
    } else if (command === 'stats') {
      answer({ ...stats, errors: stats.errors.slice(-5), error_count: stats.errors.length });
    } else if (command === 'leave' && consumer !== null) {
      answer({ at: Date.now() / 1000 });
      const c = consumer;
      consumer = null;
      c.close(true, () => {});
    } else if (command === 'halt') {
      if (consumer !== null) consumer.closing = true; // its rebalance() does nothing once closing
      answer({});
    } else {
      answer({ error: `unknown or out-of-turn command ${JSON.stringify(command)}` });
    }
  });
  rl.on('close', () => process.exit(0));
}

if (extra.count) count(parseInt(extra.count, 10)); else serve();
