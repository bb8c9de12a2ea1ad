// loadChatCallJob on real Postgres: what a chat-call job reads before its call, in one query (the
// id's row when it has one, else its stored request).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { recordChatCall, saveChatRequests, savePool, type StoredWorker } from '@fugu/db';
import type { WorkerSpec } from '@fugu/core';
import { loadChatCallJob } from './chat-calls.ts';

let t: TestDatabase;
let a: StoredWorker;
let b: StoredWorker;
const spec = (name: string): WorkerSpec => ({ name, provider: 'openai', model: `${name}-model`, apiKeyEnv: 'UNUSED', settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } });
const job = (id: string, w: StoredWorker) => ({ v: 1 as const, id, workerId: w.id, provider: 'openai' as const });
const row = (key: string, status: 'ok' | 'error') => ({
  key, origin: 'chat-call', workerId: a.id, worker: a.name, provider: 'openai', model: a.model, requestHash: 'h', status,
  response: status === 'ok' ? { text: 'x' } : null, tokensIn: 1, tokensOut: 1, cost: '0', latencyMs: 1, attempts: 1, cached: false,
  error: status === 'error' ? { code: 'provider-server', message: 'down', name: 'ServerError', fields: {} } : null,
});

beforeAll(async () => {
  t = await createTestDatabase('fugu_chatcalls');
  [a, b] = (await savePool(t.db, { name: 'p', workers: [spec('a'), spec('b')] }, 'p')).workers as [StoredWorker, StoredWorker];
});
afterAll(async () => {
  await t?.drop();
});

describe('loadChatCallJob', () => {
  it('a stored request without a row: the request and its sample', async () => {
    const request = { messages: [{ role: 'user', content: 'q1' }], temperature: 0.5 };
    await saveChatRequests(t.db, [{ id: 'j1', workerId: a.id, request, sample: 3, origin: 'chat-call' }]);
    expect(await loadChatCallJob(t.db, job('j1', a))).toEqual({ request, sample: 3 });
  });

  it('an id with a row: its status, whether or not a request is stored (no call)', async () => {
    await saveChatRequests(t.db, [{ id: 'j2', workerId: a.id, request: { messages: [] }, sample: 0, origin: 'chat-call' }]);
    await recordChatCall(t.db, row('j2', 'error'));
    expect(await loadChatCallJob(t.db, job('j2', a))).toEqual({ existing: 'error' });
    await recordChatCall(t.db, row('j3', 'ok'));
    expect(await loadChatCallJob(t.db, job('j3', a))).toEqual({ existing: 'ok' });
  });

  it('no request and no row: undefined; a job naming another worker than its request: an error', async () => {
    expect(await loadChatCallJob(t.db, job('nothing', a))).toBeUndefined();
    await saveChatRequests(t.db, [{ id: 'j4', workerId: a.id, request: { messages: [] }, sample: 0, origin: 'chat-call' }]);
    await expect(loadChatCallJob(t.db, job('j4', b))).rejects.toThrow(`chat call j4: the job names worker ${b.id}, the stored request worker ${a.id}`);
  });
});
