// API keys of the gateway. A key is `fugu-sk-` + 256 random bits (base64url); only its sha256
// is stored (a plain hash is enough for a random 256-bit secret), with a short display prefix.
// The key itself is returned once, by createApiKey, and never stored or logged.
// Money is bigint picodollars; int8 columns are read as text so they stay exact beyond 2^53.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { InputError } from '@fugu/core';
import type { Db } from './connection.ts';

export const API_KEY_PREFIX = 'fugu-sk-';

export type ApiKeyRecord = {
  id: string;
  name: string;
  /** display prefix, e.g. "fugu-sk-AbCd" */
  prefix: string;
  /** null: every worker of the gateway's pool */
  allowedWorkers: string[] | null;
  /** picodollars; null: no limit */
  spendLimit: bigint | null;
  /** picodollars */
  spent: bigint;
  createdAt: Date;
  revokedAt: Date | null;
};

export function generateApiKey(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

const columns = [
  'id',
  'name',
  'prefix',
  'allowed_workers',
  sql<string | null>`spend_limit::text`.as('spend_limit'),
  sql<string>`spent::text`.as('spent'),
  'created_at',
  'revoked_at',
] as const;

type Row = {
  id: string;
  name: string;
  prefix: string;
  allowed_workers: string[] | null;
  spend_limit: string | null;
  spent: string;
  created_at: Date;
  revoked_at: Date | null;
};

function toRecord(r: Row): ApiKeyRecord {
  return {
    id: r.id,
    name: r.name,
    prefix: r.prefix,
    allowedWorkers: r.allowed_workers,
    spendLimit: r.spend_limit === null ? null : BigInt(r.spend_limit),
    spent: BigInt(r.spent),
    createdAt: r.created_at,
    revokedAt: r.revoked_at,
  };
}

/** Creates a key; returns its record and the key itself (shown once, stored only as a hash). */
export async function createApiKey(
  db: Db,
  opts: { name: string; allowedWorkers?: string[] | null; spendLimit?: bigint | null },
): Promise<{ key: string; record: ApiKeyRecord }> {
  if (!NAME.test(opts.name)) {
    throw new InputError(`must be 1 to 64 letters, digits, '_', '.' or '-' (starting with a letter or digit), got ${JSON.stringify(opts.name)}`, { field: 'name' });
  }
  if (opts.allowedWorkers && opts.allowedWorkers.length === 0) throw new InputError('an empty worker list allows nothing; leave it out to allow every worker', { field: 'workers' });
  if (opts.spendLimit !== undefined && opts.spendLimit !== null && opts.spendLimit < 0n) throw new InputError('must be >= 0', { field: 'spend limit' });
  const existing = await db.selectFrom('api_keys').select('id').where('name', '=', opts.name).executeTakeFirst();
  if (existing) throw new InputError(`a key named "${opts.name}" already exists (names are unique, revoked keys included)`, { field: 'name' });
  const key = generateApiKey();
  const row = await db
    .insertInto('api_keys')
    .values({
      id: `key_${randomUUID().replace(/-/g, '').slice(0, 16)}`,
      name: opts.name,
      prefix: key.slice(0, API_KEY_PREFIX.length + 4),
      key_hash: hashApiKey(key),
      allowed_workers: opts.allowedWorkers ? JSON.stringify(opts.allowedWorkers) : null,
      spend_limit: opts.spendLimit === undefined || opts.spendLimit === null ? null : opts.spendLimit.toString(),
    })
    .returning(columns)
    .executeTakeFirstOrThrow();
  return { key, record: toRecord(row as Row) };
}

/** The key's record (revoked ones included: the caller tells them apart), or undefined. */
export async function findApiKey(db: Db, key: string): Promise<ApiKeyRecord | undefined> {
  const row = await db.selectFrom('api_keys').select(columns).where('key_hash', '=', hashApiKey(key)).executeTakeFirst();
  return row ? toRecord(row as Row) : undefined;
}

/** A key's record by its id (revoked ones included), or undefined: what a running batch of it checks. */
export async function getApiKey(db: Db, id: string): Promise<ApiKeyRecord | undefined> {
  const row = await db.selectFrom('api_keys').select(columns).where('id', '=', id).executeTakeFirst();
  return row ? toRecord(row as Row) : undefined;
}

export async function listApiKeys(db: Db): Promise<ApiKeyRecord[]> {
  const rows = await db.selectFrom('api_keys').select(columns).orderBy('created_at').orderBy('name').execute();
  return rows.map((r) => toRecord(r as Row));
}

/** Revokes a key by name or id; false when there is no such key. Revoking twice keeps the first time. */
export async function revokeApiKey(db: Db, nameOrId: string): Promise<ApiKeyRecord | undefined> {
  const row = await db
    .updateTable('api_keys')
    .set({ revoked_at: sql`coalesce(revoked_at, now())` })
    .where((eb) => eb.or([eb('name', '=', nameOrId), eb('id', '=', nameOrId)]))
    .returning(columns)
    .executeTakeFirst();
  return row ? toRecord(row as Row) : undefined;
}

/** Adds a call's cost (picodollars) to the key's spend in one statement; returns the new total. */
export async function addApiKeySpend(db: Db, id: string, cost: bigint): Promise<bigint> {
  const r = await sql<{ spent: string }>`update api_keys set spent = spent + ${cost.toString()}::bigint where id = ${id} returning spent::text as spent`.execute(db);
  const row = r.rows[0];
  if (!row) throw new Error(`no API key with id ${id}`);
  return BigInt(row.spent);
}
