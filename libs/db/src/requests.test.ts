import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { createApiKey, listApiKeys } from './api-keys.ts';
import { getChatCalls, type ChatCallRecord } from './chat-calls.ts';
import { getRequest, insertGatewayRecords, insertRequest, insertRequests, listRequests, type NewRequestRow } from './requests.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const row = (over: Partial<NewRequestRow> = {}): NewRequestRow => ({
  requestId: 'client-1',
  apiKeyId: null,
  route: '/v1/chat/completions',
  model: 'fugu',
  worker: 'alpha',
  stream: false,
  topProbs: [{ worker: 'alpha', prob: 0.7 }, { worker: 'beta', prob: 0.2 }],
  fallbacks: [],
  tokensIn: 12,
  tokensOut: 34,
  cost: 123_456_789n,
  routingMs: 1.5,
  providerMs: 20.25,
  totalMs: 23,
  status: 200,
  errorCode: null,
  ...over,
});

describe('requests', () => {
  it('stores a row exactly (cost beyond 2^53 picodollars) and finds it by id or x-request-id', async () => {
    const big = 2n ** 60n + 7n;
    const id = await insertRequest(t.db, row({ requestId: 'exact-1', cost: big, fallbacks: ['flaky'] }));
    const r = await getRequest(t.db, id);
    expect(r).toMatchObject({ id, requestId: 'exact-1', cost: big, fallbacks: ['flaky'], topProbs: [{ worker: 'alpha', prob: 0.7 }, { worker: 'beta', prob: 0.2 }], tokensIn: 12, tokensOut: 34, status: 200 });
    expect((await getRequest(t.db, 'exact-1'))?.id).toBe(id);
    expect(await getRequest(t.db, 'nope')).toBeUndefined();
  });

  it('keeps the end user a request named (null when none)', async () => {
    const named = await insertRequest(t.db, row({ requestId: 'end-user-1', route: '/v1/messages', endUser: '{"device_id":"d1","session_id":"s1"}' }));
    const none = await insertRequest(t.db, row({ requestId: 'end-user-2' }));
    expect((await getRequest(t.db, named))?.endUser).toBe('{"device_id":"d1","session_id":"s1"}');
    expect((await getRequest(t.db, none))?.endUser).toBeNull();
  });

  it('keeps the hints and metadata a request sent, as sent (null when none)', async () => {
    const hints = { client_metadata: { turn_id: 't1', session_id: 's1' }, prompt_cache_key: 'k1', metadata: { team: 'a' } };
    const sent = await insertRequest(t.db, row({ requestId: 'hints-1', route: '/v1/responses', hints }));
    const none = await insertRequest(t.db, row({ requestId: 'hints-2' }));
    expect((await getRequest(t.db, sent))?.hints).toEqual(hints);
    expect((await getRequest(t.db, none))?.hints).toBeNull();
  });

  it("keeps the client session and the answer's tool calls; a session's rows listed oldest first", async () => {
    const t0 = Date.parse('2026-12-06T10:00:00Z');
    const at = (s: number) => new Date(t0 + s * 1000);
    await insertRequests(t.db, [
      row({ requestId: 'sess-2', session: 'ses_a', worker: 'b', toolCalls: null, createdAt: at(2) }),
      row({ requestId: 'sess-1', session: 'ses_a', worker: 'a', toolCalls: ['Read', 'Edit'], createdAt: at(1) }),
      row({ requestId: 'sess-x', session: 'ses_b', createdAt: at(1) }),
      row({ requestId: 'sess-none', createdAt: at(3) }),
    ]);
    const turns = await listRequests(t.db, { session: 'ses_a', order: 'asc' });
    expect(turns.map((r) => [r.requestId, r.session, r.worker, r.toolCalls])).toEqual([
      ['sess-1', 'ses_a', 'a', ['Read', 'Edit']],
      ['sess-2', 'ses_a', 'b', null],
    ]);
    expect((await listRequests(t.db, { session: 'ses_a' })).map((r) => r.requestId)).toEqual(['sess-2', 'sess-1']);
    expect((await getRequest(t.db, 'sess-none'))).toMatchObject({ session: null, toolCalls: null });
  });

  it('writes a batch in one statement', async () => {
    const ids = await insertRequests(t.db, [row({ requestId: 'batch-a', topProbs: null }), row({ requestId: 'batch-b', cost: 1n, routingMs: null, providerMs: null })]);
    expect(ids).toHaveLength(2);
    expect(await getRequest(t.db, ids[0]!)).toMatchObject({ requestId: 'batch-a', topProbs: null });
    expect(await getRequest(t.db, ids[1]!)).toMatchObject({ requestId: 'batch-b', cost: 1n, routingMs: null, providerMs: null });
  });

  it('lists newest first, by key id or name, since a time, with a limit', async () => {
    const { record } = await createApiKey(t.db, { name: 'req-lister' });
    const old = new Date(Date.now() - 3_600_000);
    await insertRequest(t.db, row({ apiKeyId: record.id, requestId: 'k-old', createdAt: old }));
    await insertRequest(t.db, row({ apiKeyId: record.id, requestId: 'k-new', status: 400, errorCode: 'invalid_value', worker: null, tokensIn: 0, tokensOut: 0, cost: 0n }));
    const byName = await listRequests(t.db, { key: 'req-lister' });
    expect(byName.map((r) => r.requestId)).toEqual(['k-new', 'k-old']);
    expect((await listRequests(t.db, { key: record.id })).length).toBe(2);
    expect((await listRequests(t.db, { key: record.id, since: new Date(Date.now() - 60_000) })).map((r) => r.requestId)).toEqual(['k-new']);
    expect((await listRequests(t.db, { key: record.id, limit: 1 })).map((r) => r.requestId)).toEqual(['k-new']);
    expect(byName[0]).toMatchObject({ status: 400, errorCode: 'invalid_value', worker: null, cost: 0n });
  });

  it('writes the gateway\'s request rows, call rows and keys\' spend (the inserted rows\' costs) in one statement; a batch written again charges nothing twice', async () => {
    const a = (await createApiKey(t.db, { name: 'spend-a' })).record;
    const b = (await createApiKey(t.db, { name: 'spend-b' })).record;
    const spent = async (id: string) => (await listApiKeys(t.db)).find((k) => k.id === id)!.spent;
    const call = (key: string): ChatCallRecord => ({
      key, origin: 'gateway', workerId: null, worker: 'alpha', provider: 'openai-compatible', model: 'alpha-model', requestHash: 'h', status: 'ok',
      response: { text: 'hi' }, tokensIn: 3, tokensOut: 4, cost: '0.000000000005', latencyMs: 2, attempts: 1, cached: false, error: null,
    });
    // picodollars up to numeric(24, 12)'s range, summed per key across rows
    const big = 2n ** 60n + 3n;
    const batch = {
      requests: [row({ id: 'r_spend1', requestId: 'spend-1', apiKeyId: a.id, cost: big }), row({ id: 'r_spend2', requestId: 'spend-2', apiKeyId: b.id, cost: 5n }), row({ id: 'r_spend3', requestId: 'spend-3', apiKeyId: a.id, cost: 7n })],
      calls: [call('gw-c1'), call('gw-c2')],
    };
    const ids = await insertGatewayRecords(t.db, batch);
    expect(ids).toEqual(['r_spend1', 'r_spend2', 'r_spend3']);
    expect(await getRequest(t.db, 'r_spend2')).toMatchObject({ requestId: 'spend-2', apiKeyId: b.id, cost: 5n });
    expect([await spent(a.id), await spent(b.id)]).toEqual([big + 7n, 5n]);
    expect((await getChatCalls(t.db, ['gw-c1', 'gw-c2'])).map((c) => [c.key, c.status, c.tokensOut])).toEqual([['gw-c1', 'ok', 4], ['gw-c2', 'ok', 4]]);
    // the same batch again (a replayed journal), and one that repeats a row among new ones: only the new rows are written and charged
    await insertGatewayRecords(t.db, batch);
    await insertGatewayRecords(t.db, { requests: [row({ id: 'r_spend2', requestId: 'changed', apiKeyId: b.id, cost: 100n }), row({ id: 'r_spend4', requestId: 'spend-4', apiKeyId: b.id, cost: 11n })], calls: [{ ...call('gw-c1'), tokensOut: 99 }, call('gw-c3')] });
    expect([await spent(a.id), await spent(b.id)]).toEqual([big + 7n, 16n]);
    expect((await getRequest(t.db, 'r_spend2'))?.requestId).toBe('spend-2');
    expect((await getChatCalls(t.db, ['gw-c1', 'gw-c3'])).map((c) => [c.key, c.tokensOut]).sort()).toEqual([['gw-c1', 4], ['gw-c3', 4]]);
    // each part alone
    const [only] = await insertGatewayRecords(t.db, { requests: [row({ requestId: 'spend-5' })] });
    expect((await getRequest(t.db, only!))?.requestId).toBe('spend-5');
    await insertGatewayRecords(t.db, { calls: [call('gw-c5')] });
    expect((await getChatCalls(t.db, ['gw-c5'])).length).toBe(1);
    // a row that cannot be written (a status that is not an integer) takes the rest of its statement with it
    await expect(insertGatewayRecords(t.db, { requests: [row({ requestId: 'bad', apiKeyId: b.id, status: 1.5 })], calls: [call('gw-c4')] })).rejects.toThrow();
    expect(await spent(b.id)).toBe(16n);
    expect(await getChatCalls(t.db, ['gw-c4'])).toEqual([]);
  });
});
