// SHIM until the engine (libs/ultra/src/engine/, branch `engine`) is merged: the engine API the
// batch driver codes against, re-declared (types only), and the two functions it calls, looked up
// at run time in ../engine/index.ts. The lead replaces this file by imports from '../engine/...'.
import type { Queue } from 'bullmq';
import type { ReplayConfig, RewardConfig } from '@fugu/conductor';
import type { Db } from '@fugu/db';

export type WorkflowOptions = {
  maxSteps: number; maxTokensPerStep?: number; maxUsd?: string; reward?: Partial<RewardConfig>;
  ranking?: string[]; temperature?: number; replay?: ReplayConfig; workerPrompt?: string; conductorPrompt?: string;
};

export type NewWorkflow = {
  key: string; runId?: string; itemId?: number; poolId: number; question: string; conductor: string;
  seed: number; repeat?: number; options: WorkflowOptions;
};

/** The fields of a workflow row the driver reads (the engine's WorkflowRow has more). */
export type WorkflowRowLike = { id: number; key: string; status: string };

export type WaitOptions = { timeoutMs?: number; pollMs?: number; signal?: AbortSignal; onProgress?: (p: unknown) => void };

type EngineModule = {
  submitWorkflows(deps: { db: Db; queue: Queue }, rows: NewWorkflow[]): Promise<{ ids: number[]; enqueued: number; done: number }>;
  waitForWorkflows(db: Db, ids: number[], opts?: WaitOptions): Promise<WorkflowRowLike[]>;
};

const ENGINE_MODULE = '../engine/index.ts';

async function engine(): Promise<EngineModule> {
  const m = (await import(/* @vite-ignore */ ENGINE_MODULE).catch(() => undefined)) as Partial<EngineModule> | undefined;
  if (!m || typeof m.submitWorkflows !== 'function' || typeof m.waitForWorkflows !== 'function') {
    throw new Error('the conductor engine (libs/ultra/src/engine) is not part of this build: workflows cannot be submitted');
  }
  return m as EngineModule;
}

/** Creates (idempotently by key) the workflow rows and enqueues the conduct jobs of those not finished. */
export async function submitWorkflows(deps: { db: Db; queue: Queue }, rows: NewWorkflow[]): Promise<{ ids: number[]; enqueued: number; done: number }> {
  return (await engine()).submitWorkflows(deps, rows);
}

/** Resolves once every workflow is done or failed. */
export async function waitForWorkflows(db: Db, ids: number[], opts?: WaitOptions): Promise<WorkflowRowLike[]> {
  return (await engine()).waitForWorkflows(db, ids, opts);
}
