// A coordinator process for test/fault/chat-call-faults.test.ts: stores a worker pointing at the
// test's stub, submits CHAT_N chat-call jobs, tells its parent they are in (IPC), waits for every
// result (Postgres), and reports the counts. Configuration: the usual FUGU_* service variables,
// CHAT_N, CHAT_STUB_URL, CHAT_KEY_ENV.
import { Queue } from 'bullmq';
import { loadConfig } from '@fugu/config';
import { connectDb, savePool } from '@fugu/db';
import { createRedis } from '@fugu/queue';
import { defaultChatCallJobOptions, submitChatCalls, waitForChatCalls } from '@fugu/calls';

const config = loadConfig();
const n = Number(process.env.CHAT_N ?? 2000);
const db = await connectDb(config.databaseUrl, { applicationName: 'fugu-test-coordinator' });
const redis = createRedis(config.redisUrl, 'producer');
const queues = new Map<string, Queue>();
const queue = (name: string): Queue => {
  let q = queues.get(name);
  if (!q) queues.set(name, (q = new Queue(name, { connection: redis, prefix: config.queuePrefix })));
  return q;
};
try {
  const { workers } = await savePool(db, {
    name: 'chat-fault',
    workers: [{ name: 'gpt', provider: 'openai', model: 'gpt-test', baseUrl: process.env.CHAT_STUB_URL!, apiKeyEnv: process.env.CHAT_KEY_ENV!, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } }],
  }, 'chat-fault-pool');
  const calls = Array.from({ length: n }, (_, i) => ({ id: `fault.step-${i}`, worker: workers[0]!, request: { messages: [{ role: 'user' as const, content: `Step ${i}` }] } }));
  const submitted = await submitChatCalls({ db, queue, jobOptions: defaultChatCallJobOptions(config.worker), shards: config.providerQueueShards }, calls);
  process.send?.({ type: 'ready', id: `submitted ${submitted.enqueued}` });
  const results = await waitForChatCalls(db, submitted.ids, { timeoutMs: 120_000, pollMs: 100 });
  const ok = [...results.values()].filter((r) => r.status === 'ok' && r.result.text === `answer ${r.id.slice('fault.step-'.length)}`).length;
  process.send?.({ type: 'done', answered: results.size, ok });
} finally {
  await Promise.all([...queues.values()].map((q) => q.close()));
  redis.disconnect();
  await db.destroy();
}
