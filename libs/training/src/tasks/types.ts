// The fitness-task contract the ES coordinator and evaluators code against (docs: ../../README.md).
import type { Db } from '@fugu/db';
import type { ExecutionProviderSetting } from '@fugu/router-model';

export type FitnessTaskSpec =
  /** fitness = mean recorded reward of the argmax worker over a seeded minibatch of `batchSize` items */
  | { kind: 'single-step'; batchSize: number }
  /** fitness = mean terminal reward over `episodes` seeded episodes of `questions` questions and `turnBudget` turns */
  | { kind: 'episodes'; episodes: number; questions: number; turnBudget: number };

export type EvalContext = { seed: number | string; generation: number; replica: number; split: 'train' | 'val' | 'test' };

/** summary: small JSON (a trajectory summary), stored with the evaluation's row */
export type CandidateResult = { fitness: number; summary: Record<string, unknown> };

export interface FitnessTask {
  readonly spec: FitnessTaskSpec;
  /** the head's worker order (from the checkpoint) */
  readonly workers: readonly string[];
  /** the checkpoint's theta (the ES starting point) */
  readonly theta0: Float32Array;
  /**
   * Every candidate of the list evaluated on the SAME seeded minibatch / episodes (common random
   * numbers), chosen by (seed, generation, replica, split). Deterministic; a candidate's result
   * does not depend on the other candidates in the list. thetas: flat theta vectors (router-model layout).
   */
  evaluate(thetas: readonly Float32Array[], ctx: EvalContext): Promise<CandidateResult[]>;
  release(): Promise<void>;
}

export type FitnessTaskOptions = {
  db: Db;
  /** FUGU_HOME (the SVD of the backbone's adapted layer is cached there) */
  home: string;
  checkpointId: string;
  spec: FitnessTaskSpec;
  /** the evaluation run whose rewards define outcomes (default: the checkpoint's training run) */
  run?: string;
  /** default: the checkpoint's split seed */
  splitSeed?: number;
  /** ONNX Runtime execution provider (default 'cpu') */
  executionProvider?: ExecutionProviderSetting;
  /** ONNX Runtime threads per session (default: one per core) */
  threads?: number;
};
