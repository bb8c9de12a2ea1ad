// What `fugu ultra eval` / `fugu report <conductor run>` hand to the Conductor report
// (conductor-report.ts). Gathered from Postgres by @fugu/ultra-training; rendered here.

/** One conductor spec's figures over a run (or over several seeds: mean and sd). */
export type ConductorResult = {
  /** canonical spec, or a reference row: 'best single (w)', 'oracle', 'fugu router (ckpt)' */
  name: string;
  /** 'conductor' for a spec of the run; 'reference' for a row computed from recorded data */
  kind: 'conductor' | 'reference';
  workflows: number;
  meanReward: number;
  /** fraction of workflows whose final answer is correct */
  accuracy: number;
  /** fraction of workflows whose completion did not parse */
  parseFailureRate: number;
  /** mean USD per item, conductor and workers */
  usdPerItem: { conductor: number; workers: number };
  /** mean tokens per item (in + out), conductor and workers */
  tokensPerItem: { conductor: number; workers: number };
  /** mean and p95 latency of a workflow, ms (null for reference rows) */
  latencyMs: { mean: number; p95: number } | null;
  stepsPerWorkflow: number;
  /** topology -> count (single, chain, parallel, tree, other, unparsed) */
  topologies: Record<string, number>;
  /** finish reason -> count */
  finishReasons: Record<string, number>;
  /** spread over seeds, when the result is a mean of several runs */
  seeds?: { count: number; meanRewardSd: number; accuracySd: number; usdPerItemSd: number };
};

/** A workflow shown step by step. */
export type ShownWorkflow = {
  conductor: string;
  item: string;
  task: string;
  question: string;
  reward: number | null;
  outcome: string | null;
  finishReason: string | null;
  parseError: string | null;
  topology: string | null;
  steps: Array<{ idx: number; worker: string; subtask: string; sees: number[]; answer: string | null; status: string; usd: number }>;
  finalAnswer: string | null;
};

export type ConductorReportData = {
  run: {
    id: string;
    dataset: string | null;
    pool: string;
    split: string | null;
    /** the split scheme: by unique prompt (with splitSeed) or the dataset's own; absent: by prompt */
    splitBy?: 'prompt' | 'dataset';
    splitSeed?: number;
    sample: number | null;
    seed: number;
    repeats: number;
    maxSteps: number;
    status: string;
    createdAt: string;
    finishedAt: string | null;
    /** 'replay' when every worker is a replay worker (the figures are a simulation from recorded outcomes) */
    environment: 'replay' | 'live' | 'mixed';
    /** the replay step model's parameters per worker, when replayed */
    replay?: Record<string, { keep: number; misled: number; adopt: number; fix: number; herd: number; sizeClass: string }>;
    /** where the replay parameters come from, when the run's ReplayConfig says (e.g. measured on recorded runs of other agents) */
    replaySource?: string;
    /** the config's overrides for a step reading k or more other answers, by k (every worker alike) */
    replayBySources?: Record<string, Partial<Record<'keep' | 'misled' | 'adopt' | 'fix' | 'herd', number>>>;
  };
  results: ConductorResult[];
  /** conductor spec -> task -> worker -> fraction of that task's steps given to the worker */
  workerDistribution: Record<string, Record<string, Record<string, number>>>;
  /** task -> items in the run */
  taskCounts: Record<string, number>;
  examples: ShownWorkflow[];
};
