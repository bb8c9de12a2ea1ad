// fugu-ultra's conversations per API key (migration 0016_ultra_conversation_keys): rows written
// before it keep their key, turns, sessions and tool memory; after it the same id under another
// key is another conversation. The migration runs down and up again over those rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Migrator } from 'kysely/migration';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { migrations } from './migrations/index.ts';
import { savePool } from './repositories.ts';
import { getWorkflowByKey, getWorkflows, getWorkflowSteps, insertWorkflows, type WorkflowStepRow } from './workflows.ts';
import {
  appendToolMemory, getUltraSession, insertUltraSession, nextConversationTurn, readToolMemory, reserveWorkflowId, saveTurn, startConversationTurn,
} from './ultra-serving.ts';

let t: TestDatabase;
let migrator: Migrator;

beforeAll(async () => {
  t = await createTestDatabase();
  migrator = new Migrator({ db: t.db, provider: { getMigrations: async () => migrations }, migrationTableName: 'fugu_migrations', migrationLockTableName: 'fugu_migrations_lock' });
});
afterAll(async () => {
  await t?.drop();
});

describe('conversations per API key', () => {
  it('rows from before the migration keep their key, turns, session and memory; the same id under another key is a new conversation', async () => {
    // the schema before 0016: a conversation per id
    const down = await migrator.migrateTo('0015_ultra_durable');
    expect(down.results?.map((r) => [r.migrationName, r.status])).toContainEqual(['0016_ultra_conversation_keys', 'Success']);
    const { poolId } = await savePool(t.db, { name: 'p', workers: [{ name: 'a', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }] }, 'conv-keys');
    const [w1, w2] = await insertWorkflows(t.db, ['ultra.shared.1', 'ultra.anon.1'].map((key) => ({ key, poolId, question: 'q', conductor: 'fixed:chain', seed: 0, options: {} })));
    await sql`insert into ultra_conversations (id, api_key_id, turns) values ('shared', 'key_a', 3), ('anon', null, 1)`.execute(t.db);
    await sql`insert into ultra_sessions (workflow_id, conversation_id, api_key_id, status, state) values (${w1}, 'shared', 'key_a', 'tools', '{}'), (${w2}, 'anon', null, 'done', '{}')`.execute(t.db);
    await sql`insert into ultra_tool_log (conversation_id, seq, workflow_id, step, name, arguments, result) values ('shared', 1, ${w1}, 0, 'get_weather', '{}', 'A-ONLY'), ('anon', 1, ${w2}, 0, 'get_weather', '{}', 'ANON')`.execute(t.db);

    const up = await migrator.migrateToLatest();
    expect(up.results?.map((r) => [r.migrationName, r.status])).toContainEqual(['0016_ultra_conversation_keys', 'Success']);
    // key_a's conversation goes on where it was; its memory and session are still its own
    expect(await nextConversationTurn(t.db, 'shared', 'key_a')).toBe(4);
    expect((await readToolMemory(t.db, 'shared', 'key_a', 10)).entries.map((e) => e.result)).toEqual(['A-ONLY']);
    expect(await getUltraSession(t.db, w1!)).toMatchObject({ conversationId: 'shared', apiKeyId: 'key_a', status: 'tools' });
    expect(await nextConversationTurn(t.db, 'anon', null)).toBe(2);
    expect((await readToolMemory(t.db, 'anon', null, 10)).entries.map((e) => e.result)).toEqual(['ANON']);
    // key_b's "shared" is a conversation of its own: turn 1, no memory; its memory is kept apart
    expect(await nextConversationTurn(t.db, 'shared', 'key_b')).toBe(1);
    expect(await readToolMemory(t.db, 'shared', 'key_b', 10)).toEqual({ entries: [], total: 0 });
    await appendToolMemory(t.db, 'shared', 'key_b', [{ workflowId: w1!, step: 0, name: 'get_weather', arguments: '{}', result: 'B-ONLY' }]);
    await appendToolMemory(t.db, 'shared', 'key_a', [{ workflowId: w1!, step: 1, name: 'get_weather', arguments: '{}', result: 'A-TWO' }]);
    expect((await readToolMemory(t.db, 'shared', 'key_b', 10)).entries.map((e) => [e.seq, e.result])).toEqual([[1, 'B-ONLY']]);
    expect((await readToolMemory(t.db, 'shared', 'key_a', 10)).entries.map((e) => [e.seq, e.result])).toEqual([[1, 'A-ONLY'], [2, 'A-TWO']]);
    // a session names its key's conversation: one of another key's is refused by the foreign key
    await expect(sql`insert into ultra_sessions (workflow_id, conversation_id, api_key_id, status, state) values (${w2}, 'anon', 'key_c', 'done', '{}') on conflict (workflow_id) do update set api_key_id = 'key_c'`.execute(t.db)).rejects.toThrow(/foreign key/);
  });

  it('writers of one conversation\'s memory at once: each entry once, numbered 1..n with no gap or clash (a writer that took a number another took goes again)', async () => {
    const { poolId } = await savePool(t.db, { name: 'p2', workers: [{ name: 'a', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }] }, 'conv-race');
    const [w] = await insertWorkflows(t.db, [{ key: 'ultra.race.1', poolId, question: 'q', conductor: 'fixed:chain', seed: 0, options: {} }]);
    await sql`insert into ultra_conversations (id, api_key_id, turns) values ('race', 'key_r', 1)`.execute(t.db);
    const writers = 12;
    await Promise.all(Array.from({ length: writers }, (_, i) => appendToolMemory(t.db, 'race', 'key_r', [0, 1].map((k) => ({ workflowId: w!, step: k, name: 'f', arguments: '{}', result: `r${i}.${k}`, callId: `call_${i}_${k}` })))));
    // the same calls again (a request run again after its gateway died): nothing appended
    await appendToolMemory(t.db, 'race', 'key_r', [{ workflowId: w!, step: 0, name: 'f', arguments: '{}', result: 'r0.0', callId: 'call_0_0' }]);
    const { entries, total } = await readToolMemory(t.db, 'race', 'key_r', 100);
    expect(total).toBe(2 * writers);
    expect(entries.map((e) => e.seq)).toEqual(Array.from({ length: 2 * writers }, (_, i) => i + 1));
    expect(new Set(entries.map((e) => e.result)).size).toBe(2 * writers);
    // each writer's two entries are next to each other (one statement each)
    for (let i = 0; i < entries.length; i += 2) expect(entries[i]!.result.split('.')[0]).toBe(entries[i + 1]!.result.split('.')[0]);
  });

  it('a reserved workflow id: each once across concurrent takers, never one the sequence gives a row; the turn goes in under it', async () => {
    const { poolId } = await savePool(t.db, { name: 'p3', workers: [{ name: 'a', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }] }, 'conv-ids');
    const ids = await Promise.all(Array.from({ length: 70 }, () => reserveWorkflowId(t.db)));
    expect(new Set(ids).size).toBe(70);
    // a row inserted the usual way meanwhile takes an id none was given
    const [plain] = await insertWorkflows(t.db, [{ key: 'ultra.plain.1', poolId, question: 'q', conductor: 'fixed:chain', seed: 0, options: {} }]);
    expect(ids).not.toContain(plain);
    const workflow = { poolId, question: 'q', conductor: 'fixed:chain', seed: 0, options: {} };
    const { row, turn } = await startConversationTurn(t.db, { conversationId: 'reserved', keyId: 'key_i', keyPrefix: 'ultra.key_i/reserved.', workflow, id: ids[5]! });
    expect([row.id, row.key, row.status, turn]).toEqual([ids[5], 'ultra.key_i/reserved.1', 'running', 1]);
  });

  it("a workflow run again from its start replaces its state at the next version (a workflow's versions only grow); a save from a stale version writes nothing", async () => {
    const { poolId } = await savePool(t.db, { name: 'p4', workers: [{ name: 'a', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }] }, 'conv-take');
    const [w] = await insertWorkflows(t.db, [{ key: 'ultra.take.1', poolId, question: 'q', conductor: 'fixed:chain', seed: 0, options: {} }]);
    await sql`insert into ultra_conversations (id, api_key_id, turns) values ('take', 'key_t', 1)`.execute(t.db);
    const first = { workflowId: w!, conversationId: 'take', apiKeyId: 'key_t', status: 'running' as const, state: { v: 2, run: 1 }, deadlineAt: null };
    expect(await insertUltraSession(t.db, first)).toBe(0);
    const save = (version: number, run: number) => saveTurn(t.db, { workflowId: w!, session: { status: 'tools', state: JSON.stringify({ v: 2, run }), deadlineAt: null, version }, steps: [] });
    expect(await save(0, 1)).toBe(true);
    // run again: a new state at version 2, not back at 0 (a reader that kept version 1 of the first run does not take it for this one)
    expect(await insertUltraSession(t.db, { ...first, state: { v: 2, run: 2 } }, { replace: true })).toBe(2);
    expect(await save(1, 1)).toBe(false);
    expect(await getUltraSession(t.db, w!)).toMatchObject({ version: 2, status: 'running', state: { run: 2 } });
    expect(await save(2, 2)).toBe(true);
    expect(await getUltraSession(t.db, w!)).toMatchObject({ version: 3, status: 'tools', state: { run: 2 } });
  });
  it("a new conversation's first turn made by its end's one statement: the conversation, the workflow row (its final write in it when the turn ended), the session and the steps; none of it when the statement fails", async () => {
    const { poolId, workers } = await savePool(t.db, { name: 'p5', workers: [{ name: 'a', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }] }, 'conv-create');
    const workflow = { poolId, question: 'q', conductor: 'fixed:single:a', seed: 7, options: { maxSteps: 3 } };
    const startedAt = new Date(Date.now() - 5_000);
    const step = (workflowId: number): WorkflowStepRow => ({
      workflowId, idx: 0, workerId: workers[0]!.id, worker: 'a', subtask: 's', access: 'none', sees: [], chatCallId: `wf${workflowId}.s0.t1`, status: 'ok', answer: 'A', tokensIn: 3, tokensOut: 4, cost: '0.000001', latencyMs: 2, cached: false, replay: null, error: null,
    });
    // ended: the row is inserted finished, with the turn's start time
    const [ended, waiting, broken] = await Promise.all([0, 1, 2].map(() => reserveWorkflowId(t.db)));
    const create = (conversationId: string) => ({ conversationId, keyId: 'key_c', keyPrefix: `ultra.key_c/${conversationId}.`, workflow, startedAt });
    expect(await saveTurn(t.db, {
      workflowId: ended!, session: { status: 'done', state: { v: 2 }, deadlineAt: null, insert: { conversationId: 'c-ended', apiKeyId: 'key_c' } }, steps: [step(ended!)],
      finish: { status: 'done', finishReason: 'answered', finalAnswer: 'A', topology: 'single', nSteps: 1, workerCost: '0.000001', latencyMs: 12 }, create: create('c-ended'),
    })).toBe(true);
    const [row] = await getWorkflows(t.db, [ended!]);
    expect(row).toMatchObject({ key: 'ultra.key_c/c-ended.1', status: 'done', finishReason: 'answered', finalAnswer: 'A', topology: 'single', nSteps: 1, seed: 7, options: { maxSteps: 3 }, latencyMs: 12 });
    expect(row!.startedAt?.getTime()).toBe(startedAt.getTime());
    expect(row!.finishedAt).not.toBeNull();
    expect((await getWorkflowSteps(t.db, ended!)).map((s) => [s.idx, s.answer])).toEqual([[0, 'A']]);
    expect(await getUltraSession(t.db, ended!)).toMatchObject({ conversationId: 'c-ended', apiKeyId: 'key_c', status: 'done', version: 0 });
    expect(await nextConversationTurn(t.db, 'c-ended', 'key_c')).toBe(2);
    // waiting for tool results: the row is running, as a turn's start leaves it
    expect(await saveTurn(t.db, {
      workflowId: waiting!, session: { status: 'tools', state: { v: 2 }, deadlineAt: new Date(Date.now() + 60_000), insert: { conversationId: 'c-wait', apiKeyId: 'key_c' } }, steps: [], create: create('c-wait'),
    })).toBe(true);
    expect(await getWorkflowByKey(t.db, 'ultra.key_c/c-wait.1')).toMatchObject({ id: waiting, status: 'running', finishedAt: null });
    expect(await getUltraSession(t.db, waiting!)).toMatchObject({ status: 'tools' });
    // a statement that fails (a pool that is not there) writes none of it
    await expect(saveTurn(t.db, {
      workflowId: broken!, session: { status: 'done', state: { v: 2 }, deadlineAt: null, insert: { conversationId: 'c-broken', apiKeyId: 'key_c' } }, steps: [step(waiting!)],
      finish: { status: 'done' }, create: { ...create('c-broken'), workflow: { ...workflow, poolId: -1 } },
    })).rejects.toThrow(/foreign key/);
    expect(await getWorkflows(t.db, [broken!])).toEqual([]);
    expect(await getWorkflowSteps(t.db, waiting!)).toEqual([]);
    expect(await nextConversationTurn(t.db, 'c-broken', 'key_c')).toBe(1);
  });
});
