// What a run's report shows, as collectRunSummary gathers it: the input of @fugu/report's
// renderEvalReport (declared there too; the CLI hands one to the other, so tsc checks they agree).
export type EvalReportData = {
  run: {
    id: string;
    dataset: string;
    pool: string;
    repetitions: number;
    seed: number;
    sampleSize: number | null;
    status: string;
    createdAt: string;
    finishedAt: string | null;
    durationS: number | null;
    calls: { total: number; ok: number; failed: number };
    callsPerS: number | null;
    /** exact decimal string */
    spendUsd: string;
    spendCapUsd: string | null;
  };
  workers: Array<{
    name: string;
    provider: string;
    model: string;
    inputPerMTok: string;
    outputPerMTok: string;
    mean: number;
    calls: number;
    failed: number;
    tokensIn: number;
    tokensOut: number;
    costUsd: string;
    latencyP50Ms: number | null;
    latencyP95Ms: number | null;
    /** fraction of items where this worker is among the best */
    oracleShare: number;
  }>;
  tasks: string[];
  /** task -> worker -> mean reward */
  perTask: Record<string, Record<string, number>>;
  taskCounts: Record<string, number>;
  reference: {
    n: number;
    bestSingle: { worker: string; mean: number };
    bestPerTask: { mean: number; choice: Record<string, string> };
    oracle: number;
  };
  bySplit: Record<string, { n: number; bestSingle: { worker: string; mean: number }; bestPerTask: { mean: number }; oracle: number }>;
  labels?: { tau: number; meanEntropy: number; argmaxCounts: Record<string, number> };
};
