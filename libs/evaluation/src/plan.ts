// The calls of a run: items (all, or a seeded sample) x workers x repetitions, generated lazily
// page by page so that memory stays flat however large the batch. On resume, keys that already
// have a row are skipped (and BullMQ ignores a job id that is still queued).
import { sql } from 'kysely';
import { rng } from '@fugu/core';
import type { Db, StoredWorker } from '@fugu/db';
import { callJobId, providerCallQueueFor, type BulkJob, type ProviderCallJob } from '@fugu/queue';
import type { JobsOptions } from 'bullmq';

/** Seeded sample of k indices out of n (Floyd's algorithm: O(k) memory), sorted. */
export function sampleIndices(n: number, k: number, seed: number): number[] {
  if (k >= n) return Array.from({ length: n }, (_, i) => i);
  const r = rng('sample', seed);
  const chosen = new Set<number>();
  for (let j = n - k; j < n; j++) {
    const t = r.int(j + 1);
    chosen.add(chosen.has(t) ? j : t);
  }
  return [...chosen].sort((a, b) => a - b);
}

export type PlanInput = {
  db: Db;
  runId: string;
  datasetId: number;
  itemCount: number;
  sampleSize: number | null;
  seed: number;
  workers: StoredWorker[];
  repetitions: number;
  jobOptions: JobsOptions;
  /** shards of each provider's queue (config.providerQueueShards): a call goes to its job id's shard */
  shards: number;
  pageSize?: number;
  /** skip keys that already have a call row (resume) */
  skipExisting: boolean;
};

export async function* planCalls(p: PlanInput): AsyncGenerator<BulkJob<ProviderCallJob>> {
  const pageSize = p.pageSize ?? 2_000;
  const sample = p.sampleSize !== null && p.sampleSize < p.itemCount ? sampleIndices(p.itemCount, p.sampleSize, p.seed) : null;
  const pages: Array<{ from: number; to: number } | number[]> = [];
  if (sample) for (let i = 0; i < sample.length; i += pageSize) pages.push(sample.slice(i, i + pageSize));
  else for (let i = 0; i < p.itemCount; i += pageSize) pages.push({ from: i, to: i + pageSize });

  for (const page of pages) {
    let q = p.db.selectFrom('items').select(['id']).where('dataset_id', '=', p.datasetId).orderBy('idx');
    q = Array.isArray(page) ? q.where('idx', 'in', page) : q.where('idx', '>=', page.from).where('idx', '<', page.to);
    const ids = (await q.execute()).map((r) => r.id);
    if (ids.length === 0) continue;
    const done = new Set<string>();
    if (p.skipExisting) {
      const rows = await sql<{ k: string }>`
        select item_id || ':' || worker_id || ':' || repetition as k from calls where run_id = ${p.runId} and item_id = any(${ids}::bigint[])
      `.execute(p.db);
      for (const r of rows.rows) done.add(r.k);
    }
    for (const itemId of ids) {
      for (const w of p.workers) {
        for (let rep = 0; rep < p.repetitions; rep++) {
          if (done.has(`${itemId}:${w.id}:${rep}`)) continue;
          const jobId = callJobId(p.runId, itemId, w.id, rep);
          yield {
            queue: providerCallQueueFor(w.provider, jobId, p.shards),
            name: 'call',
            data: { v: 1, runId: p.runId, itemId, workerId: w.id, repetition: rep, provider: w.provider },
            opts: { ...p.jobOptions, jobId },
          };
        }
      }
    }
  }
}
