// `fugu ultra run "question"`: one workflow outside any batch (a free question, or a dataset item
// with `--item <dataset>:<ext id>`), submitted to the conduct queue and waited for.
import { randomBytes } from 'node:crypto';
import { InputError } from '@fugu/core';
import { resolveMaxSteps } from '@fugu/conductor';
import { getDatasetItems, saveDataset, savePool, workflowDetails, type WorkflowDetail } from '@fugu/db';
import { poolContentHash, resolveDataset, resolveWorkerPool, type Context } from '@fugu/evaluation';
import { submitWorkflows, waitForWorkflows, type NewWorkflow, asFlag, checkSpecCheckpoints, checkSpecs, trainSplitRanking } from '@fugu/ultra';
import { startLocals } from '../locals.ts';
import type { UltraEvalOptions } from './options.ts';

export type UltraQuestionOptions = Pick<UltraEvalOptions, 'localConductors' | 'localWorkers' | 'startLocalConductors' | 'startLocalWorkers' | 'log' | 'signal'> & {
  question?: string;
  /** `<dataset>:<ext id>`: the item's prompt is the question (and its verifier scores the answer) */
  item?: string;
  pool: string;
  /** default: `llm:<the pool's first worker>` */
  conductor?: string;
  maxSteps: number;
  maxTokensPerStep: number | null;
  maxUsd: string | null;
  seed: number;
  timeoutMs?: number;
};

/** The question argument: non-empty unless an item gives it (InputError naming it). */
export function checkQuestion(question: string | undefined, item: string | undefined): void {
  if (item !== undefined) return;
  if (question === undefined || question.trim() === '') throw new InputError('the question must not be empty (or give --item <dataset>:<id>)', { field: 'question' });
}

export async function runUltraQuestion(ctx: Context, o: UltraQuestionOptions): Promise<WorkflowDetail> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  checkQuestion(o.question, o.item);
  asFlag('--max-steps', () => resolveMaxSteps(o.maxSteps));
  if (o.maxTokensPerStep !== null && o.maxTokensPerStep < 1) throw new InputError(`must be at least 1, got ${o.maxTokensPerStep}`, { field: '--max-tokens-per-step' });
  const pool = await resolveWorkerPool(o.pool, ctx.config.llmrouterDir);
  const names = pool.workers.map((w) => w.name);
  const [spec] = checkSpecs(o.conductor ?? `llm:${names[0] ?? ''}`, names, o.maxSteps, ctx.config.conductor.endpoints.map((e) => e.name));
  if (!spec) throw new InputError('give one conductor spec', { field: '--conductor' });
  if (o.conductor?.includes(',')) throw new InputError('`ultra run` takes one conductor spec', { field: '--conductor' });
  await checkSpecCheckpoints(ctx.db, [spec], names);
  const saved = await savePool(ctx.db, pool, poolContentHash(pool));

  let question = o.question?.trim() ?? '';
  let itemId: number | undefined;
  let ranking = names;
  if (o.item !== undefined) {
    const at = o.item.lastIndexOf(':');
    if (at <= 0 || at === o.item.length - 1) throw new InputError(`expected <dataset>:<item id>, got "${o.item}"`, { field: '--item' });
    const dataset = await resolveDataset(o.item.slice(0, at), ctx.config.llmrouterDir);
    const ds = await saveDataset(ctx.db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
    const stored = await getDatasetItems(ctx.db, ds.id);
    const ext = o.item.slice(at + 1);
    const it = stored.find((x) => x.id === ext);
    if (!it) throw new InputError(`dataset "${dataset.name}" has no item "${ext}"`, { field: '--item' });
    itemId = it.dbId;
    if (question === '') question = it.prompt;
    ranking = trainSplitRanking(names, stored, 0);
  }

  const key = `q_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(4).toString('hex')}`;
  const row: NewWorkflow = {
    key, ...(itemId !== undefined && { itemId }), poolId: saved.poolId, question, conductor: spec.spec, seed: o.seed,
    options: {
      maxSteps: o.maxSteps, ranking,
      ...(o.maxTokensPerStep !== null && { maxTokensPerStep: o.maxTokensPerStep }),
      ...(o.maxUsd !== null && { maxUsd: o.maxUsd }),
    },
  };
  const locals = await startLocals(ctx, { ...o, providers: [...new Set(saved.workers.map((w) => w.provider))], log });
  try {
    const { ids } = await submitWorkflows({ db: ctx.db, queue: (n) => ctx.queue(n), endpoints: ctx.config.conductor.endpoints.map((e) => e.name) }, [row]);
    await waitForWorkflows(ctx.db, ids, { timeoutMs: o.timeoutMs ?? 300_000, ...(o.signal && { signal: o.signal }) });
    const [detail] = await workflowDetails(ctx.db, ids);
    if (!detail) throw new Error(`workflow ${key} has no row`);
    return detail;
  } finally {
    for (const l of locals.reverse()) await l.stop();
  }
}
