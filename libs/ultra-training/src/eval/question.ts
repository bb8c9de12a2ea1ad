// `fugu ultra run "question"`: one workflow outside any batch (a free question, or a dataset item
// with `--item <dataset>:<ext id>`), run in this process as the gateway runs fugu-ultra's: the
// Conductor published for the pool (else the gateway's default Conductor, `defaultConductor`)
// writes, and each step's call goes through this process's call pipeline (shared limits, cache,
// exact cost, a chat_calls row), the replay workers answering from the dataset's recorded
// outcomes. No conduct queue, no provider-worker or conductor process: the workflow row, its step
// rows and its calls' rows are written as a conduct job writes them (executeWorkflowIn).
import { randomBytes } from 'node:crypto';
import { InputError, type WorkerPool } from '@fugu/core';
import { answerReplayRequest, parseConductorSpec, resolveMaxSteps } from '@fugu/conductor';
import { createCallPipeline } from '@fugu/calls';
import { getDatasetItems, getUltraDeployment, saveDataset, savePool, workflowDetails, type StoredItem, type WorkflowDetail } from '@fugu/db';
import { promptIndex } from '@fugu/datasets';
import { poolContentHash, resolveDataset, resolveWorkerPool, type Context } from '@fugu/evaluation';
import type { Env } from '@fugu/providers';
import {
  asFlag, checkSpecCheckpoints, checkSpecs, defaultConductor, executeWorkflowIn, inProcessSteps, policyWriter, routerPicker, submitWorkflows, trainSplitRanking,
  validateInteractiveOptions, type NewWorkflow, type WorkflowOptions,
} from '@fugu/ultra';
import type { UltraEvalOptions } from './options.ts';

export type UltraQuestionOptions = Pick<UltraEvalOptions, 'log' | 'signal'> & {
  question?: string;
  /** `<dataset>:<ext id>`: the item's prompt is the question (and its verifier scores the answer) */
  item?: string;
  pool: string;
  /** default: the Conductor published as `deployment` for the pool, else defaultConductor(pool) */
  conductor?: string;
  /** the fugu-ultra deployment whose Conductor runs by default (default `fugu-ultra`, the gateway's FUGU_ULTRA_DEPLOYMENT) */
  deployment?: string;
  /** default: the deployment's (when its Conductor runs), else 5 */
  maxSteps?: number;
  maxTokensPerStep: number | null;
  maxUsd: string | null;
  seed: number;
  /** where the live workers' API keys are read (default process.env) */
  env?: Env;
};

/**
 * A question the pool cannot answer (a replay pool answers only the questions of its dataset):
 * nothing was stored or called; the message says why and what to use instead.
 */
export class UnanswerableQuestionError extends Error {
  override readonly name = 'UnanswerableQuestionError';
}

/** The question argument: non-empty unless an item gives it (InputError naming it). */
export function checkQuestion(question: string | undefined, item: string | undefined): void {
  if (item !== undefined) return;
  if (question === undefined || question.trim() === '') throw new InputError('the question must not be empty (or give --item <dataset>:<id>)', { field: 'question' });
}

const clipQuote = (text: string, max = 200): string => JSON.stringify(text.length > max ? `${text.slice(0, max)}...` : text);
const TRY_INSTEAD = 'use --pool scripted to try any prompt (simulated workers, no keys), or --pool <pool.yaml>, a pool file of live workers (their API keys in the environment)';

/** The Conductor that runs (and the options it runs with) when none is given, as the gateway's fugu-ultra picks it; `said`: a line telling the user which and why. */
async function servedConductor(ctx: Context, pool: WorkerPool, name: string): Promise<{ spec: string; options: WorkflowOptions | undefined; said: string }> {
  const d = await getUltraDeployment(ctx.db, name);
  if (d && d.pool === pool.name) {
    let options;
    try {
      options = validateInteractiveOptions(d.options).workflow;
    } catch (e) {
      throw new InputError(`the Conductor published as "${name}" for pool "${pool.name}" has invalid options (${(e as Error).message}): publish it again (fugu ultra publish), or give --conductor <spec>`, { field: '--conductor' });
    }
    return { spec: d.conductor, options, said: `the Conductor published as "${name}" for pool "${pool.name}": ${d.conductor} (--conductor <spec> runs another)` };
  }
  const spec = defaultConductor(pool.workers);
  const elsewhere = d ? ` (it is published for pool "${d.pool}")` : '';
  return {
    spec, options: undefined,
    said: `no Conductor is published as "${name}" for pool "${pool.name}"${elsewhere}: the default Conductor ${spec} runs, as on the gateway ` +
      `(\`fugu ultra publish --conductor <spec> --pool ${pool.name}\` publishes one; --conductor <spec> runs another)`,
  };
}

export async function runUltraQuestion(ctx: Context, o: UltraQuestionOptions): Promise<WorkflowDetail> {
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  checkQuestion(o.question, o.item);
  if (o.maxSteps !== undefined) asFlag('--max-steps', () => resolveMaxSteps(o.maxSteps!));
  if (o.maxTokensPerStep !== null && o.maxTokensPerStep < 1) throw new InputError(`must be at least 1, got ${o.maxTokensPerStep}`, { field: '--max-tokens-per-step' });
  if (o.conductor?.includes(',')) throw new InputError('`ultra run` takes one conductor spec', { field: '--conductor' });
  const pool = await resolveWorkerPool(o.pool, ctx.config.llmrouterDir);
  const names = pool.workers.map((w) => w.name);

  const served = o.conductor === undefined ? await servedConductor(ctx, pool, o.deployment ?? 'fugu-ultra') : undefined;
  const base: Partial<WorkflowOptions> = served?.options ?? {};
  const maxSteps = o.maxSteps ?? base.maxSteps ?? 5;
  const [spec] = checkSpecs(o.conductor ?? served!.spec, names, maxSteps, ctx.config.conductor.endpoints.map((e) => e.name));
  if (!spec) throw new InputError('give one conductor spec', { field: '--conductor' });
  await checkSpecCheckpoints(ctx.db, [spec], names);
  const parsed = parseConductorSpec(spec.spec);
  if (parsed.kind === 'llm' && pool.workers.some((w) => w.name === parsed.model && w.provider === 'replay')) {
    throw new InputError(
      `conductor spec "${spec.spec}": ${parsed.model} is a replay worker (it answers with recorded scores) and cannot write a workflow; ` +
        'give a fixed:... or policy:... spec, or llm:<a live worker or a configured endpoint>',
      { field: '--conductor' },
    );
  }

  // the question as a dataset item: given (--item), or, on a replay pool, found by its prompt as
  // the replay workers and the gateway find it (promptIndex: the exact text, else case, spacing
  // and trailing punctuation forgiven; the first item of a prompt)
  let question = o.question?.trim() ?? '';
  let item: StoredItem | undefined;
  let stored: StoredItem[] = [];
  let datasetSpec: string | undefined;
  if (o.item !== undefined) {
    const at = o.item.lastIndexOf(':');
    if (at <= 0 || at === o.item.length - 1) throw new InputError(`expected <dataset>:<item id>, got "${o.item}"`, { field: '--item' });
    datasetSpec = o.item.slice(0, at);
  }
  const replay = pool.workers.some((w) => w.provider === 'replay');
  if (datasetSpec === undefined && replay) {
    if (o.pool !== 'llmrouter' && !o.pool.startsWith('llmrouter:')) {
      throw new UnanswerableQuestionError(
        `pool "${pool.name}" has replay workers, which answer only the questions of a dataset from its recorded outcomes: give the question as --item <dataset>:<id>, or ${TRY_INSTEAD}`,
      );
    }
    datasetSpec = o.pool;
  }
  if (datasetSpec !== undefined) {
    const dataset = await resolveDataset(datasetSpec, ctx.config.llmrouterDir);
    if (o.item !== undefined) {
      const ext = o.item.slice(o.item.lastIndexOf(':') + 1);
      if (!dataset.items.some((x) => x.id === ext)) throw new InputError(`dataset "${dataset.name}" has no item "${ext}"`, { field: '--item' });
    } else if (!promptIndex(dataset.items)(question)) {
      // before anything is stored or called
      throw new UnanswerableQuestionError(
        `pool "${pool.name}" is the replay pool of ${dataset.name}: its workers answer only from the recorded outcomes of that dataset, and ${clipQuote(question)} is not a question of its dataset. ` +
          `Give one of its questions as it is written there (or --item ${datasetSpec}:<id>); ${TRY_INSTEAD}`,
      );
    }
    const ds = await saveDataset(ctx.db, { name: dataset.name, source: dataset.source, contentHash: dataset.contentHash, items: dataset.items });
    stored = await getDatasetItems(ctx.db, ds.id);
    const ext = o.item?.slice(o.item.lastIndexOf(':') + 1);
    item = ext !== undefined ? stored.find((x) => x.id === ext) : promptIndex(stored)(question);
    if (!item) throw new Error(`the dataset ${dataset.name} as stored has lost its item`);
    if (question === '') question = item.prompt;
  }
  const saved = await savePool(ctx.db, pool, poolContentHash(pool));

  const options: WorkflowOptions = {
    ...base,
    maxSteps,
    // the deployment's ranking; else, for a dataset item, the workers by mean recorded score on the train split
    ...(base.ranking === undefined && item && { ranking: trainSplitRanking(names, stored, 0) }),
    ...(o.maxTokensPerStep !== null && { maxTokensPerStep: o.maxTokensPerStep }),
    ...(o.maxUsd !== null && { maxUsd: o.maxUsd }),
  };
  if (served) log(`fugu ultra run: ${served.said}`);
  const key = `q_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(4).toString('hex')}`;
  const row: NewWorkflow = { key, ...(item && { itemId: item.dbId }), poolId: saved.poolId, question, conductor: spec.spec, seed: o.seed, options };
  const { ids } = await submitWorkflows({ db: ctx.db, endpoints: ctx.config.conductor.endpoints.map((e) => e.name) }, [row]);
  const id = ids[0]!;

  // the workflow's calls, made here: replay workers answer the item's recorded outcomes (by db id, as a provider worker does)
  const items = new Map(item ? [[item.dbId, item]] : []);
  const pipeline = createCallPipeline({
    db: ctx.db, ...(ctx.redis && { redis: ctx.redis }), config: ctx.config, env: o.env ?? process.env,
    replayStore: (worker) => ({
      lookup: (prompt, itemId, metadata) => {
        const it = itemId !== undefined ? items.get(Number(itemId)) : undefined;
        const a = it && answerReplayRequest(worker, it, prompt, metadata);
        return a && { itemId: String(it.dbId), ...a };
      },
    }),
  });
  const routerPick = routerPicker(ctx.db, ctx.config.home);
  const policyConductor = policyWriter(ctx.db, ctx.config.home);
  try {
    const writer = { db: ctx.db, config: ctx.config, pipeline, routerPick, policyConductor };
    await executeWorkflowIn({ db: ctx.db }, inProcessSteps(writer, { ...(o.signal && { signal: o.signal }) }), id);
    await pipeline.flush();
    const [detail] = await workflowDetails(ctx.db, [id]);
    if (!detail) throw new Error(`workflow ${key} has no row`);
    return detail;
  } finally {
    await Promise.all([routerPick.release(), policyConductor.release()]);
  }
}
