import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { InputError } from '@fugu/core';
import { createTestDatabase, type TestDatabase } from './testing.ts';
import { addApiKeySpend, API_KEY_PREFIX, createApiKey, findApiKey, hashApiKey, listApiKeys, revokeApiKey } from './api-keys.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

describe('API keys', () => {
  it('stores only the hash and a display prefix, and finds the key by its value', async () => {
    const { key, record } = await createApiKey(t.db, { name: 'ci', allowedWorkers: ['a', 'b'], spendLimit: 5_000_000_000_000n });
    expect(key.startsWith(API_KEY_PREFIX)).toBe(true);
    expect(Buffer.from(key.slice(API_KEY_PREFIX.length), 'base64url')).toHaveLength(32);
    const row = await sql<Record<string, unknown>>`select * from api_keys where id = ${record.id}`.execute(t.db);
    expect(JSON.stringify(row.rows[0])).not.toContain(key);
    expect(JSON.stringify(row.rows[0])).not.toContain(key.slice(API_KEY_PREFIX.length + 4));
    expect(row.rows[0]!.key_hash).toBe(hashApiKey(key));
    const found = await findApiKey(t.db, key);
    expect(found).toMatchObject({ name: 'ci', allowedWorkers: ['a', 'b'], spendLimit: 5_000_000_000_000n, spent: 0n, revokedAt: null });
    expect(await findApiKey(t.db, `${key}x`)).toBeUndefined();
  });

  it('adds spend exactly, beyond 2^53 picodollars, and concurrently', async () => {
    const { record } = await createApiKey(t.db, { name: 'big' });
    const big = 2n ** 60n;
    await addApiKeySpend(t.db, record.id, big);
    await Promise.all(Array.from({ length: 20 }, () => addApiKeySpend(t.db, record.id, 3n)));
    const k = (await listApiKeys(t.db)).find((x) => x.id === record.id)!;
    expect(k.spent).toBe(big + 60n);
  });

  it('revokes by name or id, keeping the first revocation time', async () => {
    const { record } = await createApiKey(t.db, { name: 'old' });
    const a = await revokeApiKey(t.db, 'old');
    const b = await revokeApiKey(t.db, record.id);
    expect(a!.revokedAt).toBeInstanceOf(Date);
    expect(b!.revokedAt!.getTime()).toBe(a!.revokedAt!.getTime());
    expect(await revokeApiKey(t.db, 'nope')).toBeUndefined();
  });

  it('refuses a duplicate or malformed name and an empty worker list, naming the field', async () => {
    await createApiKey(t.db, { name: 'dup' });
    await expect(createApiKey(t.db, { name: 'dup' })).rejects.toThrow(/field name: a key named "dup" already exists/);
    await expect(createApiKey(t.db, { name: 'has space' })).rejects.toBeInstanceOf(InputError);
    await expect(createApiKey(t.db, { name: 'w', allowedWorkers: [] })).rejects.toThrow(/field workers/);
  });
});
