// A fresh database per test file on the test Postgres server (FUGU_TEST_DATABASE_URL, default the
// machine's postgres://postgres@127.0.0.1:5432/test), migrated, dropped afterwards.
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { connectDb, migrate, type Db } from './connection.ts';

export const testServerUrl = (): string => process.env.FUGU_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export type TestDatabase = { url: string; db: Db; drop(): Promise<void> };

export async function createTestDatabase(prefix = 'fugu_t'): Promise<TestDatabase> {
  const serverUrl = testServerUrl();
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  const url = u.toString();
  const db = await connectDb(url, { max: 4 });
  await migrate(db);
  return {
    url,
    db,
    drop: async () => {
      await db.destroy().catch(() => {});
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
