// npm run bench:rows — what an evaluation call's rows cost Postgres (issue 18, figure 5): the CPU
// of writing BENCH_ROWS_CALLS calls (default 100,000) through `recordCalls` (a `calls` row and a
// `rewards` row each, the run's counters, one statement per batch) at 16, 64 and 256 calls a
// statement, with two writers at once (two provider-worker processes' CallWriters), as deployed
// and again with the four foreign keys of the two tables dropped (what those checks cost).
//
// For each: Postgres's CPU per call (this machine's postgres processes, from /proc: run it on a
// quiet machine), this process's CPU per call (building and sending the statements: a worker's
// share of writing its rows) and calls/s. The records are built before the clock starts. The rows
// are a replay answer's, as `fugu eval` writes them; the tables are emptied before each measure
// and each measure opens its own connections.
//
// Options (env): BENCH_ROWS_CALLS. Services: FUGU_TEST_DATABASE_URL (a fresh database is made and dropped).
import { sql } from 'kysely';
import { createDb, createRun, getDatasetItems, recordCalls, saveDataset, savePool, setRunStatus, type CallRecord } from '@fugu/db';
import { createTestDatabase } from '@fugu/db/testing';
import { serviceCpu } from './proc.ts';

const N = Number(process.env.BENCH_ROWS_CALLS ?? 100_000);
const BATCHES = [16, 64, 256];
const WRITERS = 2;
const log = (s: string) => process.stderr.write(`bench:rows: ${s}\n`);

const t = await createTestDatabase('fugu_bench_rows');
try {
  const ds = await saveDataset(t.db, {
    name: 'rows', source: 'bench', contentHash: 'bench-rows',
    items: Array.from({ length: 2_000 }, (_, i) => ({ id: `q${i}`, task: 'qa', prompt: `question ${i}`, groundTruth: 'A' })),
  });
  const items = await getDatasetItems(t.db, ds.id);
  const { poolId, workers } = await savePool(t.db, {
    name: 'rows', workers: Array.from({ length: 9 }, (_, i) => ({ name: `w${i}`, provider: 'replay' as const, model: `m${i}`, settings: {}, prices: { inputPerMTok: '0.2', outputPerMTok: '0.2' } })),
  }, 'bench-rows');

  let runs = 0;
  async function measure(batch: number): Promise<{ pg: number; client: number; rate: number }> {
    await sql`truncate rewards, calls`.execute(t.db);
    const runId = `rows-${++runs}`;
    await createRun(t.db, { id: runId, datasetId: ds.id, poolId, repetitions: 1_000, sampleSize: null, seed: 1, itemCount: items.length, totalCalls: N, spendCap: null, options: {} });
    await setRunStatus(t.db, runId, 'running');
    // calls in the order a run's jobs go (item by item, every worker), a replay answer's row each
    const records: CallRecord[] = Array.from({ length: N }, (_, i) => {
      const w = workers[i % workers.length]!;
      const item = items[Math.floor(i / workers.length) % items.length]!;
      return {
        runId, itemId: item.dbId, workerId: w.id, repetition: Math.floor(i / (workers.length * items.length)), requestHash: `${i.toString(16).padStart(64, '0')}`,
        status: 'ok', response: { text: `[replay:${w.name}] recorded score 0`, model: w.model, toolCalls: [], finishReason: 'stop', providerMetadata: { replay: { score: 0, itemId: String(item.dbId) } } },
        tokensIn: 362, tokensOut: 256, cost: '0.000123600000', latencyMs: 2, attempts: 1, cached: false, errorKind: null, error: null, score: 0, verifier: 'recorded',
      };
    });
    const db = createDb(t.url, { max: WRITERS });
    await sql`select 1`.execute(db);
    const pg0 = serviceCpu().postgres;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(Array.from({ length: WRITERS }, async () => {
      while (next < records.length) {
        const part = records.slice(next, next + batch);
        next += batch;
        await recordCalls(db, part);
      }
    }));
    const secs = (performance.now() - t0) / 1000;
    const c = process.cpuUsage(c0);
    const pg = serviceCpu().postgres - pg0;
    await db.destroy();
    return { pg: (pg * 1e6) / N, client: (c.user + c.system) / N, rate: N / secs };
  }

  const rows: string[][] = [['', 'calls a statement', 'postgres us/call', 'writer us/call', 'calls/s']];
  for (const variant of ['as deployed', 'without the 4 foreign keys'] as const) {
    if (variant !== 'as deployed') {
      for (const [table, fk] of [['calls', 'calls_run_id_fkey'], ['calls', 'calls_item_id_fkey'], ['calls', 'calls_worker_id_fkey'], ['rewards', 'rewards_call_id_fkey']] as const) {
        await sql`alter table ${sql.table(table)} drop constraint ${sql.id(fk)}`.execute(t.db);
      }
    }
    for (const b of BATCHES) {
      log(`${variant}, ${b} calls a statement: writing ${N} calls`);
      const m = await measure(b);
      rows.push([variant, String(b), m.pg.toFixed(1), m.client.toFixed(1), m.rate.toFixed(0)]);
    }
  }
  const widths = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
  process.stdout.write(`\n${N} evaluation calls (a calls row and a rewards row each) through recordCalls, ${WRITERS} writers at once\n`);
  for (const r of rows) process.stdout.write(`${r.map((c, j) => (j === 0 ? c.padEnd(widths[j]!) : c.padStart(widths[j]!))).join('  ')}\n`);
} finally {
  await t.drop();
}
