// Resolving what a user names on the command line: a dataset (`llmrouter`, `llmrouter:<dir>`
// or a fugu JSONL file) and a worker pool (`llmrouter[:<dir>]` or a YAML/JSON file), checked
// against each other before anything is enqueued.
import { createHash } from 'node:crypto';
import { InputError, type WorkerPool } from '@fugu/core';
import { loadDataset, loadLlmRouter, resolvePool, validateDatasetFile, type Dataset } from '@fugu/datasets';
import { createChatModel } from '@fugu/providers';

export async function resolveDataset(spec: string, defaultLlmRouterDir: string): Promise<Dataset> {
  if (spec === 'llmrouter' || spec.startsWith('llmrouter:')) {
    return loadLlmRouter(spec === 'llmrouter' ? defaultLlmRouterDir : spec.slice('llmrouter:'.length));
  }
  // validate the whole file first: a malformed line stops everything before anything is stored
  await validateDatasetFile(spec);
  return loadDataset(spec);
}

export async function resolveWorkerPool(spec: string, defaultLlmRouterDir: string): Promise<WorkerPool> {
  return resolvePool(spec === 'llmrouter' ? `llmrouter:${defaultLlmRouterDir}` : spec);
}

/** Keeps the named workers (in pool order); an unknown name is an error that lists the pool. */
export function selectWorkers(pool: WorkerPool, names: string[] | undefined): WorkerPool {
  if (!names || names.length === 0) return pool;
  const known = new Set(pool.workers.map((w) => w.name));
  for (const n of names) {
    if (!known.has(n)) throw new InputError(`unknown worker "${n}" (pool "${pool.name}" has: ${[...known].join(', ')})`, { field: '--workers' });
  }
  const keep = new Set(names);
  return { ...pool, workers: pool.workers.filter((w) => keep.has(w.name)) };
}

/** Replay workers need recorded outcomes in the dataset; hosted ones need their API key. */
export function checkPoolAgainstDataset(pool: WorkerPool, dataset: Dataset, env: Record<string, string | undefined> | null): void {
  const recorded = new Set(dataset.workers);
  for (const w of pool.workers) {
    if (w.provider === 'replay' && !recorded.has(w.name)) {
      throw new InputError(
        `unknown worker "${w.name}": a replay worker needs recorded scores, and dataset "${dataset.name}" has none for it (it has: ${dataset.workers.join(', ') || 'no recorded scores'})`,
        { field: 'workers' },
      );
    }
    // throws a ConfigError naming the variable to set when the key is missing
    if (env && w.provider !== 'replay') createChatModel(w, env);
  }
}

export function poolContentHash(pool: WorkerPool): string {
  return createHash('sha256').update(JSON.stringify(pool)).digest('hex');
}
