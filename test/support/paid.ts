// What calls and keys cost, read from Postgres in picodollars (exact), for tests of charging.
import { sql } from 'kysely';
import type { Db } from '@fugu/db';

/** The summed cost of the `chat_calls` rows whose keys match these LIKE patterns (`wf12.%`: workflow 12's calls). */
export async function paidPico(db: Db, keyPatterns: readonly string[]): Promise<bigint> {
  const r = await sql<{ pico: string }>`select coalesce((sum(cost) * 1000000000000)::bigint, 0)::text as pico from chat_calls where key like any(${[...keyPatterns]}::text[])`.execute(db);
  return BigInt(r.rows[0]!.pico);
}

/** What an API key has spent, as its row says. */
export async function spentPico(db: Db, keyId: string): Promise<bigint> {
  return BigInt((await sql<{ s: string }>`select spent::text as s from api_keys where id = ${keyId}`.execute(db)).rows[0]!.s);
}

/** Workflows' call patterns: `wf<id>.%` each. */
export const workflowCalls = (ids: ReadonlyArray<number | string>): string[] => ids.map((id) => `wf${id}.%`);
