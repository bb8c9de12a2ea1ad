// Submitting workflows: validate every row (question, conductor spec against the pool, options),
// insert them (a key already stored keeps its first row), and put a conduct job on the queue for
// every workflow not finished yet (job id `wf<id>`: BullMQ keeps one job per id). Submitting the
// same keys again inserts nothing and calls nothing new.
import type { Queue, JobsOptions } from 'bullmq';
import { InputError } from '@fugu/core';
import { checkConductorSpec, parseConductorSpec } from '@fugu/conductor';
import { getPoolWorkers, getWorkflows, insertWorkflows, type Db, type WorkflowRow } from '@fugu/db';
import { CONDUCT_JOB, conductJobId, conductJobSchema, conductQueue, enqueueStream, parseJob } from '@fugu/queue';
import { GIVEN_CONDUCTOR, isGivenConductor } from './given.ts';
import { validateWorkflowOptions, type WorkflowOptions } from './options.ts';

export type NewWorkflow = {
  /** the idempotency key (`<run>.<item>.<spec index>.<repeat>` in a batch) */
  key: string;
  runId?: string;
  /** the dataset item's db id; absent: a free question (no verifier) */
  itemId?: number;
  poolId: number;
  question: string;
  /** a conductor spec (llm:, policy:, fixed:...); stored in its canonical form */
  conductor: string;
  seed: number;
  repeat?: number;
  options: WorkflowOptions;
};

export type SubmitDeps = {
  db: Db;
  /** the conduct queue by name (kept open by the caller); absent: the rows are only stored, for the caller to execute (`fugu ultra run`: executeWorkflowIn) */
  queue?: (name: string) => Queue;
  /** names of the configured llm: endpoints (config.conductor.endpoints) */
  endpoints?: readonly string[];
  /** conduct job options (default: 3 attempts, exponential backoff from 1 s) */
  jobOptions?: Pick<JobsOptions, 'attempts' | 'backoff'>;
};

export type SubmitResult = {
  /** the workflow id of every row, in order */
  ids: number[];
  /** conduct jobs added (a job id already on the queue is not added twice) */
  enqueued: number;
  /** rows already finished (done or failed): no job */
  done: number;
};

const KEY_RE = /^[A-Za-z0-9_.:-]{1,200}$/;

/** Validates every row before anything is stored; an InputError names the row and field (`rows[2].question`). */
export async function submitWorkflows(deps: SubmitDeps, rows: readonly NewWorkflow[]): Promise<SubmitResult> {
  const pools = new Map<number, string[]>();
  const seen = new Set<string>();
  const prepared = [];
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    const at = (f: string): string => `rows[${i}].${f}`;
    if (typeof r.key !== 'string' || !KEY_RE.test(r.key)) throw new InputError(`workflow key ${JSON.stringify(r.key)}: 1 to 200 letters, digits, _ . : -`, { field: at('key') });
    if (seen.has(r.key)) throw new InputError(`workflow key ${r.key} is given twice`, { field: at('key') });
    seen.add(r.key);
    if (typeof r.question !== 'string' || r.question.trim() === '') throw new InputError('the question is empty', { field: at('question') });
    if (!Number.isInteger(r.seed)) throw new InputError(`seed must be an integer, got ${String(r.seed)}`, { field: at('seed') });
    if (r.repeat !== undefined && !(Number.isInteger(r.repeat) && r.repeat >= 0)) throw new InputError(`repeat must be an integer >= 0, got ${String(r.repeat)}`, { field: at('repeat') });
    const options = validateWorkflowOptions(r.options, at('options'));
    let workers = pools.get(r.poolId);
    if (!workers) {
      workers = (await getPoolWorkers(deps.db, r.poolId)).map((w) => w.name);
      if (workers.length === 0) throw new InputError(`no worker pool ${r.poolId} (or it has no workers)`, { field: at('poolId') });
      pools.set(r.poolId, workers);
    }
    let spec: { spec: string };
    if (isGivenConductor(r.conductor)) {
      // the completion is handed in: nothing writes, the executor parses options.completion
      if (options.completion === undefined) throw new InputError(`conductor ${GIVEN_CONDUCTOR} needs the completion in options.completion`, { field: at('options.completion') });
      spec = { spec: GIVEN_CONDUCTOR };
    } else {
      try {
        spec = parseConductorSpec(r.conductor);
        checkConductorSpec(spec as ReturnType<typeof parseConductorSpec>, { workers, maxSteps: options.maxSteps, endpoints: deps.endpoints ?? [] });
      } catch (e) {
        if (!(e instanceof InputError)) throw e;
        throw new InputError(e.message.replace(/^field conductor: /, ''), { field: at('conductor') });
      }
      if (options.completion !== undefined) throw new InputError(`only the conductor ${GIVEN_CONDUCTOR} takes a completion (this row's is ${spec.spec})`, { field: at('options.completion') });
    }
    if (options.ranking) {
      const unknown = options.ranking.find((n) => !workers.includes(n));
      if (unknown !== undefined) throw new InputError(`ranking names ${JSON.stringify(unknown)}, which is not in the pool (the pool has ${workers.join(', ')})`, { field: at('options.ranking') });
    }
    prepared.push({
      key: r.key, runId: r.runId ?? null, itemId: r.itemId ?? null, poolId: r.poolId, question: r.question, conductor: spec.spec, seed: r.seed,
      repeat: r.repeat ?? 0, options: options as unknown as Record<string, unknown>,
    });
  }
  const ids = await insertWorkflows(deps.db, prepared);
  const rowsNow = await getWorkflows(deps.db, ids);
  const open = rowsNow.filter((w) => w.status === 'pending' || w.status === 'running');
  if (!deps.queue) return { ids, enqueued: 0, done: rowsNow.length - open.length };
  const jobOpts = deps.jobOptions ?? { attempts: 3, backoff: { type: 'exponential', delay: 1_000 } };
  const enqueued = await enqueueStream(
    deps.queue,
    open.map((w) => ({
      queue: conductQueue,
      name: CONDUCT_JOB,
      data: parseJob(conductJobSchema, { v: 1, workflowId: w.id }, conductQueue),
      opts: { jobId: conductJobId(w.id), ...jobOpts, removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600, count: 10_000 } } satisfies JobsOptions,
    })),
  );
  return { ids, enqueued, done: rowsNow.length - open.length };
}

export type WaitForWorkflowsOptions = {
  timeoutMs?: number;
  /** how often Postgres is asked (default 200 ms) */
  pollMs?: number;
  signal?: AbortSignal;
  /** called as workflows finish */
  onProgress?: (finished: WorkflowRow[], done: number, total: number) => void;
};

/** Waits until every workflow is done or failed (polling Postgres); resolves with the rows in the order of `ids`. */
export async function waitForWorkflows(db: Db, ids: readonly number[], opts: WaitForWorkflowsOptions = {}): Promise<WorkflowRow[]> {
  const out = new Map<number, WorkflowRow>();
  let open = [...new Set(ids)];
  const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
  const pollMs = opts.pollMs ?? 200;
  for (;;) {
    const got = (await getWorkflows(db, open)).filter((w) => w.status === 'done' || w.status === 'failed');
    if (got.length > 0) {
      for (const w of got) out.set(w.id, w);
      open = open.filter((id) => !out.has(id));
      opts.onProgress?.(got, out.size, out.size + open.length);
    }
    if (open.length === 0) return ids.map((id) => out.get(id)!);
    if (opts.signal?.aborted) throw new Error(`waiting for workflows aborted with ${open.length} of ${ids.length} open`);
    if (Date.now() + pollMs > deadline) throw new Error(`timed out waiting for workflows: ${open.length} of ${ids.length} open (first: ${open[0]})`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
