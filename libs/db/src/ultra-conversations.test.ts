// fugu-ultra's conversations per API key (migration 0016_ultra_conversation_keys): rows written
// before it keep their key, turns, sessions and tool memory; after it the same id under another
// key is another conversation. The migration runs down and up again over those rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Migrator } from 'kysely/migration';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { migrations } from './migrations/index.ts';
import { savePool } from './repositories.ts';
import { insertWorkflows } from './workflows.ts';
import { appendToolMemory, getUltraSession, nextConversationTurn, readToolMemory } from './ultra-serving.ts';

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
    const down = await migrator.migrateDown();
    expect(down.results?.map((r) => [r.migrationName, r.status])).toEqual([['0016_ultra_conversation_keys', 'Success']]);
    const { poolId } = await savePool(t.db, { name: 'p', workers: [{ name: 'a', provider: 'replay', model: 'm', settings: {}, prices: { inputPerMTok: '0', outputPerMTok: '0' } }] }, 'conv-keys');
    const [w1, w2] = await insertWorkflows(t.db, ['ultra.shared.1', 'ultra.anon.1'].map((key) => ({ key, poolId, question: 'q', conductor: 'fixed:chain', seed: 0, options: {} })));
    await sql`insert into ultra_conversations (id, api_key_id, turns) values ('shared', 'key_a', 3), ('anon', null, 1)`.execute(t.db);
    await sql`insert into ultra_sessions (workflow_id, conversation_id, api_key_id, status, state) values (${w1}, 'shared', 'key_a', 'tools', '{}'), (${w2}, 'anon', null, 'done', '{}')`.execute(t.db);
    await sql`insert into ultra_tool_log (conversation_id, seq, workflow_id, step, name, arguments, result) values ('shared', 1, ${w1}, 0, 'get_weather', '{}', 'A-ONLY'), ('anon', 1, ${w2}, 0, 'get_weather', '{}', 'ANON')`.execute(t.db);

    const up = await migrator.migrateToLatest();
    expect(up.results?.map((r) => [r.migrationName, r.status])).toEqual([['0016_ultra_conversation_keys', 'Success']]);
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
});
