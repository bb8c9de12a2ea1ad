// Executing one workflow (the conduct job's work), idempotent and resumable:
//
//   claim -> the Conductor writes (fixed: rendered topology; llm: one call through the call
//   pipeline in this process, key `wf<id>.conductor`, reused when its row exists) -> parse ->
//   plan -> the one executor (executor.ts: dataflow over the steps, the stop rules), each step's
//   call a chat-call job `wf<id>.s<idx>` (provider workers, shared limits, cache, cost) -> step
//   rows -> the last step's answer -> verifier -> reward -> the one final write.
//
// Postgres is the truth. A re-execution after a crash reads the conductor's completion and the
// answered steps back from their chat_calls rows (never called again) and finishes the row once.
import type { Queue } from 'bullmq';
import { InputError, parseUsd, toWireError, type ChatRequest, type ChatResult, type WireError, type WorkerSpec } from '@fugu/core';
import { isProviderError } from '@fugu/providers';
import {
  conductorPool, fixedConductor, llmConductor, MAX_STEPS_LIMIT, parseConductorSpec, parseWorkflow, rewardOf, scoreWorkflow,
  type Conductor, type ConductorInput, type ConductorOutput, type ConductorPool, type ConductorSpec, type WorkflowReward,
} from '@fugu/conductor';
import {
  claimWorkflow, finishWorkflow, getChatCalls, getItems, getPoolWorkers, getWorkflows, saveWorkflowSteps,
  type Db, type StoredItem, type StoredWorker, type WorkflowFinish, type WorkflowRow, type WorkflowStepRow,
} from '@fugu/db';
import { defaultChatCallJobOptions, submitChatCalls, waitForChatCalls, type CallPipeline, type ChatCallClientOptions, type ChatCallEvents, type ChatCallResult } from '@fugu/calls';
import { verify } from '@fugu/datasets';
import type { ConductJobResult } from '@fugu/queue';
import type { FuguConfig } from '@fugu/config';
import type { Logger } from '@fugu/telemetry';
import { GIVEN_CONDUCTOR, isGivenConductor } from './given.ts';
import { validateWorkflowOptions, type WorkflowOptions } from './options.ts';
import { planWorkflow } from './plan.ts';
import { endedStepRows, endSteps, failedOutcome, finishOf, newStepsState, runSteps, stepTotals, type StepCall, type StepOutcome, type StepRunner } from './executor.ts';

/**
 * The fugu router's pick for a question (fixed:router): a pool worker's name. `workers` is the
 * whole pool (the checkpoint's); `allowed`, when given, the names it may pick among (a restricted pool).
 */
export type RouterPick = (input: { checkpoint: string; question: string; workers: readonly string[]; allowed?: readonly string[] }) => Promise<string>;

/** A writer for `policy:` specs (the embedded policy: `policyWriter`). */
export type PolicyConductorFactory = (spec: Extract<ConductorSpec, { kind: 'policy' }>, ctx: { db: Db; workers: readonly StoredWorker[] }) => Promise<Conductor>;

export type EngineDeps = {
  db: Db;
  config: Pick<FuguConfig, 'worker' | 'conductor' | 'providerQueueShards'>;
  /** the provider-call queues by name (kept open by the caller) */
  queue: (name: string) => Queue;
  /** the call pipeline of this process (llm: Conductors call through it) */
  pipeline: CallPipeline;
  log?: Logger;
  /** fixed:router; absent: such workflows end `conductor-error` */
  routerPick?: RouterPick;
  /** policy: (apps/conductor passes `policyWriter`); absent: such workflows end `conductor-error` */
  policyConductor?: PolicyConductorFactory;
  /** wakes a workflow when its steps' jobs complete (config conductor.stepEvents); absent: the Postgres poll alone */
  stepEvents?: ChatCallEvents;
  /** how long one step's call may take before the workflow gives up (default 10 min; the job is then retried) */
  stepTimeoutMs?: number;
  signal?: AbortSignal;
};

/** A step's call key on the job path: the step's one call (a served step's turns and tries add `.t<turn>[.a<n>]`). */
const chatId = (workflowId: number, idx: number): string => `wf${workflowId}.s${idx}`;
export const conductorCallKey = (workflowId: number): string => `wf${workflowId}.conductor`;

/** A conductor that could not write: the workflow ends `conductor-error` with this message. */
export class ConductorFailure extends Error {
  readonly wire: WireError;
  constructor(message: string, wire: WireError) {
    super(message);
    this.wire = wire;
  }
}

/** Executes one workflow; returns what the conduct job reports. */
export function executeWorkflow(deps: EngineDeps, workflowId: number): Promise<ConductJobResult> {
  return executeWorkflowIn(deps, engineSteps(deps), workflowId);
}

/**
 * Executes one stored workflow under `env` (claim, write, steps, reward, the final write): the
 * conduct job's (engineSteps) or this process's (inProcessSteps, `fugu ultra run`).
 */
export async function executeWorkflowIn(deps: Pick<EngineDeps, 'db' | 'log'>, env: WorkflowEnv, workflowId: number): Promise<ConductJobResult> {
  const { db } = deps;
  const row = await claimWorkflow(db, workflowId);
  if (!row) {
    const existing = (await getWorkflows(db, [workflowId]))[0];
    if (!existing) throw new InputError(`no workflow ${workflowId}`, { field: 'workflowId' });
    return { outcome: 'existing', status: existing.status };
  }
  const finish = async (f: WorkflowFinish): Promise<ConductJobResult> => {
    const latencyMs = row.startedAt ? Math.max(0, Date.now() - row.startedAt.getTime()) : null;
    await finishWorkflow(db, row.id, { latencyMs, ...f });
    return { outcome: 'done', finishReason: f.finishReason ?? 'answered', reward: f.reward ?? null };
  };

  let options: WorkflowOptions;
  try {
    options = validateWorkflowOptions(row.options);
  } catch (e) {
    return finish({ status: 'failed', finishReason: 'conductor-error', error: toWireError(e) });
  }
  const workers = await getPoolWorkers(db, row.poolId);
  const item = row.itemId !== null ? (await getItems(db, [row.itemId]))[0] : undefined;
  if (row.itemId !== null && !item) return finish({ status: 'failed', finishReason: 'conductor-error', error: toWireError(new InputError(`item ${row.itemId} does not exist`, { field: 'itemId' })) });

  try {
    return finish(await runWorkflow(env, row, options, workers, item));
  } catch (e) {
    if (!(e instanceof ConductorFailure)) throw e;
    deps.log?.warn({ workflow: row.id, conductor: row.conductor, err: e.message }, 'the conductor could not write');
    return finish({ finishReason: 'conductor-error', outcome: 'unanswered', reward: null, error: { ...e.wire, message: e.message } });
  }
}

/**
 * What runWorkflow needs around it: who writes, how a step's call runs (the executor's step
 * runner), where the step rows go. The cluster's (engineSteps): the writers of the conductor
 * process, chat-call jobs on the provider queues waited on in Postgres, workflow_steps rows. The
 * in-process rollout path (grpo/local.ts) runs the same function with the replay provider called
 * in this process.
 */
export type WorkflowEnv = {
  write(row: WorkflowRow, options: WorkflowOptions, workers: readonly StoredWorker[], pool: ConductorPool, item: StoredItem | undefined): Promise<ConductorOutput>;
  runSteps: StepRunner;
  /** the step rows, once the workflow has ended (one write) */
  saveSteps(steps: WorkflowStepRow[]): Promise<unknown>;
};

function engineSteps(deps: EngineDeps): WorkflowEnv {
  const client: ChatCallClientOptions = { db: deps.db, queue: deps.queue, jobOptions: defaultChatCallJobOptions(deps.config.worker), shards: deps.config.providerQueueShards, origin: 'conductor' };
  return {
    write: (r, options, workers, pool, item) => writeWorkflow(deps, r, options, workers, pool, item),
    runSteps: (steps) => {
      // one waiter for the calls submitted together; each call's promise settles as its own
      // result comes in, so a step waits only for the steps it reads
      const calls = steps.map((c) => {
        c.agent.lastKey = chatId(c.workflowId, c.step);
        return { id: c.agent.lastKey, worker: c.worker, request: c.request };
      });
      const settle = new Map<string, { resolve: (r: StepOutcome) => void; reject: (e: unknown) => void }>();
      const answered = calls.map((c) => new Promise<StepOutcome>((resolve, reject) => settle.set(c.id, { resolve, reject })));
      void (async () => {
        await submitChatCalls(client, calls);
        await waitForChatCalls(deps.db, calls.map((c) => c.id), {
          // with the queue events the poll is only a backstop
          pollMs: deps.stepEvents ? Math.max(1000, deps.config.conductor.pollMs) : deps.config.conductor.pollMs,
          ...(deps.stepEvents && { events: deps.stepEvents }),
          timeoutMs: deps.stepTimeoutMs ?? 600_000,
          reconcile: { client },
          ...(deps.signal && { signal: deps.signal }),
          onResults: (results) => results.forEach((r) => settle.get(r.id)?.resolve(stepOutcome(r))),
        });
      })().catch((e: unknown) => settle.forEach((s) => s.reject(e)));
      return answered;
    },
    saveSteps: (steps) => saveWorkflowSteps(deps.db, steps),
  };
}

/**
 * The workflow env of one process (`fugu ultra run`): the writers of `deps` (as a conductor
 * process's or the gateway's), each step's call made here through `deps.pipeline` (shared limits,
 * cache, exact cost, its chat_calls row under the job path's key `wf<id>.s<idx>`), tried again on
 * a transient error (a connection error, 429, 5xx: `retry.attempts` tries, backing off from
 * `retry.baseMs`, doubling); a call that still fails is the step's error. `signal` aborts the calls.
 */
export function inProcessSteps(deps: WriterDeps, o: { retry?: { attempts: number; baseMs: number }; signal?: AbortSignal } = {}): WorkflowEnv {
  const retry = o.retry ?? { attempts: 3, baseMs: 250 };
  const call = async (c: StepCall): Promise<StepOutcome> => {
    const key = chatId(c.workflowId, c.step);
    c.agent.lastKey = key;
    const request: ChatRequest = { ...c.request, ...(o.signal && { signal: o.signal }) };
    const t0 = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        const r = await deps.pipeline.call({
          worker: c.worker, request, key, origin: 'conductor', attempt, maxWaitMs: 30_000,
          recordError: (e) => !isTransient(e) || attempt >= retry.attempts,
        });
        return { ok: true, result: r.result, cost: r.cost, cached: r.cached, ms: r.latencyMs };
      } catch (e) {
        if (isTransient(e) && attempt < retry.attempts && !o.signal?.aborted) {
          const wait = Math.max(retry.baseMs * 2 ** (attempt - 1), (e as { retryAfterMs?: number }).retryAfterMs ?? 0);
          await new Promise((r) => setTimeout(r, Math.min(wait, 5_000)));
          continue;
        }
        return failedOutcome(e, Date.now() - t0);
      }
    }
  };
  return {
    write: (r, options, workers, pool, item) => writeWorkflow(deps, r, options, workers, pool, item),
    runSteps: (steps) => steps.map(call),
    saveSteps: (steps) => saveWorkflowSteps(deps.db, steps),
  };
}

/** A chat-call job's result as the executor's step outcome. */
export function stepOutcome(r: ChatCallResult): StepOutcome {
  return r.status === 'ok' ? { ok: true, result: r.result, cost: parseUsd(r.cost), cached: r.cached, ms: r.latencyMs } : { ok: false, error: r.error, ms: r.latencyMs };
}

/**
 * A workflow from the writer to the reward, every step as soon as the steps it reads have answered, under `env`;
 * returns the workflow's final write (a ConductorFailure when the writer could not write).
 */
export async function runWorkflow(env: WorkflowEnv, row: WorkflowRow, options: WorkflowOptions, workers: readonly StoredWorker[], item: StoredItem | undefined): Promise<WorkflowFinish> {
  // the pool the writer sees and the text's ids refer to: the workflow's workers (options.workers), in pool order
  const pool = writerPool(allowedWorkers(workers, options));
  // ---- the conductor writes
  const out = await env.write(row, options, workers, pool, item);

  // ---- parse and plan
  const plan = planWorkflow(out, pool, options.maxSteps);
  const { base, conductorCost } = plan;
  if (!plan.ok) {
    const longer = options.maxSteps < MAX_STEPS_LIMIT ? parseWorkflow(out.text, { poolSize: pool.workers.length, maxSteps: MAX_STEPS_LIMIT }) : undefined;
    const tooLong = longer?.ok === true;
    const r = rewardOf({ parsed: false, costPico: conductorCost }, options.reward);
    return {
      ...base, finishReason: tooLong ? 'budget-steps' : 'parse-error', parseOk: false, parseError: { ...plan.error },
      reward: r.reward, outcome: r.outcome, ...(tooLong && { nSteps: longer.workflow.steps.length }),
    };
  }
  // ---- the steps, by the one executor
  const state = newStepsState(plan, { task: row.question, workers, itemId: item ? String(item.dbId) : null, seed: row.seed, options });
  const byId = new Map(workers.map((w) => [w.id, w]));
  const run = await runSteps(state, { workflowId: row.id, workerOf: (i) => byId.get(state.workerIds[i]!)!, run: env.runSteps, resumable: false });
  endSteps(state, run.ended);
  await env.saveSteps(endedStepRows(row.id, state));

  // ---- the final answer and the reward
  const last = state.agents[plan.schedule.finalStep]!;
  const totals: WorkflowFinish = { ...plan.shape, ...stepTotals(state) };
  const finishReason = finishOf(state, run);
  const costPico = conductorCost + run.tally.cost;
  if (last.status !== 'done') {
    const r = item ? rewardOf({ parsed: true, costPico }, options.reward) : undefined;
    return { ...totals, finishReason, finalAnswer: null, outcome: 'unanswered', reward: r?.reward ?? null };
  }
  const text = last.answer ?? '';
  if (!item) return { ...totals, finishReason, finalAnswer: text, outcome: null, reward: null, score: null };
  let reward: WorkflowReward;
  try {
    reward = await scoreWorkflow({ parsed: true, finalAnswer: text, verify: (a) => verify(item, a, last.replay === null ? undefined : { replay: last.replay }), costPico }, options.reward);
  } catch (e) {
    if (!(e instanceof InputError)) throw e;
    // an answer nothing here can check (e.g. code from a live model): no reward, with the reason
    return { ...totals, finishReason, finalAnswer: text, outcome: null, reward: null, error: toWireError(e) };
  }
  return { ...totals, finishReason, finalAnswer: text, score: reward.score ?? null, outcome: reward.outcome, reward: reward.reward };
}

// ---- the writers ---------------------------------------------------------------------------

/** The pool as a writer sees it: the workers numbered in order, each with its description (else model and provider). */
export function writerPool(workers: ReadonlyArray<Pick<WorkerSpec, 'name' | 'model' | 'provider' | 'description'>>): ConductorPool {
  return conductorPool(workers.map((w) => ({ name: w.name, description: w.description ?? `${w.model} (${w.provider})` })));
}

/**
 * The pool workers a workflow may use, in pool order: `options.workers` (each must be in the
 * pool: a ConductorFailure naming `options.workers[i]`), else all of them.
 */
export function allowedWorkers(workers: readonly StoredWorker[], options: Pick<WorkflowOptions, 'workers'>): readonly StoredWorker[] {
  if (options.workers === undefined) return workers;
  const names = new Set(workers.map((w) => w.name));
  options.workers.forEach((n, i) => {
    if (!names.has(n)) {
      const e = new InputError(`options.workers[${i}]: worker ${JSON.stringify(n)} is not in the pool (it has ${workers.map((w) => w.name).join(', ')})`, { field: `options.workers[${i}]` });
      throw new ConductorFailure(e.message, toWireError(e));
    }
  });
  const allowed = new Set(options.workers);
  return workers.filter((w) => allowed.has(w.name));
}

/**
 * What a writer is given for a workflow row. A sampling writer's draws are the seed, the item
 * (its dataset id, stable across databases) or the question, and `options.sample`.
 */
export function conductorInput(row: Pick<WorkflowRow, 'question' | 'seed'>, options: WorkflowOptions, workers: readonly StoredWorker[], pool: ConductorPool, item: StoredItem | undefined): ConductorInput {
  const sampleKey = `${item ? `item:${item.id}` : `question:${row.question}`}${options.sample !== undefined ? `/sample:${options.sample}` : ''}`;
  return {
    question: row.question, pool, seed: row.seed, sampleKey, maxSteps: options.maxSteps,
    // the ranking of the workflow's own workers (a restricted pool ranks only them)
    ranking: (options.ranking ?? workers.map((w) => w.name)).filter((n) => pool.workers.some((w) => w.name === n)),
    ...(options.argmax && { argmax: true }),
  };
}

/** What a writer needs of the engine: the database, the call pipeline (llm:), the router (fixed:router) and the policy writer (policy:). */
export type WriterDeps = Pick<EngineDeps, 'db' | 'config' | 'pipeline' | 'log' | 'routerPick' | 'policyConductor'> & {
  /** told an llm: Conductor's call key before the call (a Batch API line pays for it even when stopped) */
  made?: (key: string) => void;
};

/**
 * The Conductor writes the workflow of a row: a fixed topology, the embedded policy, or an llm:
 * Conductor called through the pipeline (key `wf<id>.conductor`, reused when its row exists).
 * A writer that cannot write throws a ConductorFailure (isConductorFailure).
 */
export async function writeWorkflow(deps: WriterDeps, row: Pick<WorkflowRow, 'id' | 'question' | 'conductor' | 'seed'>, options: WorkflowOptions, workers: readonly StoredWorker[], pool: ConductorPool, item: StoredItem | undefined): Promise<ConductorOutput> {
  const failure = (message: string, e: unknown): ConductorFailure => new ConductorFailure(message, toWireError(e));
  if (isGivenConductor(row.conductor)) {
    // the completion came with the workflow (the reward service): parsed like any writer's
    if (options.completion === undefined) throw failure(`${GIVEN_CONDUCTOR}: the workflow has no completion in its options`, new InputError('no completion', { field: 'options.completion' }));
    return { text: options.completion };
  }
  const spec = parseConductorSpec(row.conductor);
  const input = conductorInput(row, options, workers, pool, item);
  if (spec.kind === 'fixed') {
    let routerChoice: string | undefined;
    if (spec.topology === 'router') {
      if (!deps.routerPick) throw failure(`${spec.spec}: no router is available in this conductor process`, new Error('no router'));
      try {
        routerChoice = await deps.routerPick({
          checkpoint: spec.checkpoint, question: row.question, workers: workers.map((w) => w.name),
          ...(pool.workers.length < workers.length && { allowed: pool.workers.map((w) => w.name) }),
        });
      } catch (e) {
        throw failure(`${spec.spec}: the router could not pick a worker: ${(e as Error).message}`, e);
      }
    }
    try {
      return await fixedConductor(spec).write({ ...input, ...(routerChoice !== undefined && { routerChoice }) });
    } catch (e) {
      if (!(e instanceof InputError)) throw e;
      throw failure(`${spec.spec}: ${e.message}`, e);
    }
  }
  if (spec.kind === 'policy') {
    if (!deps.policyConductor) throw failure(`${spec.spec}: no policy writer in this process`, new Error('no policy writer'));
    let c: Conductor;
    try {
      c = await deps.policyConductor(spec, { db: deps.db, workers });
    } catch (e) {
      throw failure(`${spec.spec}: ${(e as Error).message}`, e);
    }
    return c.write(input);
  }
  // llm: a pool worker or a configured endpoint, called in this process
  const worker: (WorkerSpec & { id?: number }) | undefined = workers.find((w) => w.name === spec.model) ?? endpointWorker(deps.config.conductor.endpoints, spec.model);
  if (!worker) throw failure(`${spec.spec}: unknown worker or endpoint ${JSON.stringify(spec.model)}`, new InputError('unknown worker or endpoint', { field: 'conductor' }));
  const where = `${worker.name} (${worker.provider}${worker.baseUrl ? ` at ${worker.baseUrl}` : ''})`;
  const key = conductorCallKey(row.id);
  deps.made?.(key);
  const conductor = llmConductor({
    spec: spec.spec,
    temperature: options.temperature ?? deps.config.conductor.temperature,
    ...(options.conductorPrompt !== undefined && { template: options.conductorPrompt }),
    complete: async (req) => {
      const prior = (await getChatCalls(deps.db, [key]))[0];
      if (prior?.status === 'ok') {
        const r = prior.response as unknown as ChatResult;
        return { text: r.text, usage: r.usage, costPico: parseUsd(prior.cost) };
      }
      if (prior) throw new ConductorFailure(`${spec.spec}: the conductor ${where} failed: ${prior.error?.message ?? 'unknown error'}`, prior.error ?? { code: 'internal', message: 'unknown error' });
      const request: ChatRequest = { messages: req.messages, temperature: req.temperature, seed: req.seed, ...(req.signal && { signal: req.signal }) };
      const attempts = 3;
      for (let attempt = 1; ; attempt++) {
        try {
          const o = await deps.pipeline.call({
            worker, request, key, origin: 'conductor', attempt, maxWaitMs: 30_000,
            recordError: (e) => !isTransient(e) || attempt >= attempts,
          });
          return { text: o.result.text, usage: o.result.usage, costPico: o.cost };
        } catch (e) {
          if (isTransient(e) && attempt < attempts) {
            await new Promise((r) => setTimeout(r, 100 * 2 ** attempt));
            continue;
          }
          throw failure(`${spec.spec}: the conductor ${where} could not be called: ${describe(e, worker.baseUrl)}`, e);
        }
      }
    },
  });
  return conductor.write(input);
}

function endpointWorker(endpoints: FuguConfig['conductor']['endpoints'], name: string): WorkerSpec | undefined {
  const e = endpoints.find((x) => x.name === name);
  return e && { name: e.name, provider: 'openai-compatible', model: e.model, baseUrl: e.baseUrl, ...(e.apiKeyEnv !== undefined && { apiKeyEnv: e.apiKeyEnv }), settings: {}, prices: e.prices };
}

function isTransient(e: unknown): boolean {
  return isProviderError(e) && e.transient;
}

/** An error's message, with "connection refused at <url>" when that is what happened. */
function describe(e: unknown, baseUrl: string | undefined): string {
  const msg = (e as Error).message ?? String(e);
  let c: unknown = e;
  for (let i = 0; i < 6 && c; i++) {
    const code = (c as { code?: unknown }).code;
    if (code === 'ECONNREFUSED') return `connection refused at ${baseUrl ?? 'the endpoint'} (${msg})`;
    if (code === 'ENOTFOUND') return `host not found: ${baseUrl ?? 'the endpoint'} (${msg})`;
    c = (c as { cause?: unknown }).cause;
  }
  if (/ECONNREFUSED|connection refused|connect/i.test(msg) && baseUrl) return `${msg} (connection refused at ${baseUrl}?)`.replace('?)', ')');
  return msg;
}
