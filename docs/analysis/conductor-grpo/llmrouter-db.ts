// What the conductor-grpo analysis scripts read first: the LLMRouter dataset and pool as `fugu
// eval` / `fugu train grpo` stored them in FUGU_DATABASE_URL, and the items of one split of the
// router's split by unique prompt (split seed 0).
import { loadConfig } from '../../../libs/config/src/index.ts';
import { connectDb, getDatasetItems, getPoolWorkers } from '../../../libs/db/src/index.ts';
import { splitItems } from '../../../libs/ultra/src/index.ts';

export async function openLlmrouter(split: string) {
  const config = loadConfig();
  const db = await connectDb(config.databaseUrl);
  const ds = (await db.selectFrom('datasets').select(['id', 'name']).execute()).find((d) => d.name === 'llmrouter');
  const pool = (await db.selectFrom('worker_pools').select(['id', 'name']).execute()).find((p) => p.name === 'llmrouter');
  if (!ds || !pool) throw new Error(`no llmrouter dataset or pool in ${config.databaseUrl}: run fugu eval --dataset llmrouter --pool llmrouter first`);
  const workers = await getPoolWorkers(db, pool.id);
  const stored = await getDatasetItems(db, ds.id);
  const items = splitItems(stored, split as 'test', 0).map((i) => stored[i]!);
  return { config, db, workers, names: workers.map((w) => w.name), stored, items };
}
