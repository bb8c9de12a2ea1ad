// What `fugu router eval` (and `fugu router train`) hand to the router report.

export type MethodResult = {
  /** 'router', 'router (head only)', 'best single', 'best per task', 'kNN (k=10)', 'random', 'oracle' */
  name: string;
  meanReward: number;
  /** mean USD per call */
  meanCost: number;
  /** short note, e.g. the single worker chosen */
  note?: string;
};

export type RouterReportData = {
  checkpoint: { id: string; stage: string; backboneId: string; parentId: string | null; tau: number | null; createdAt: string };
  /** splitBy: the split scheme (by unique prompt, or the dataset's own; evaluations before it existed: by prompt) */
  data: { run: string; split: string; splitBy?: 'prompt' | 'dataset'; splitSeed: number; items: number; trainItems: number };
  workers: Array<{ name: string; inputPerMTok: string; outputPerMTok: string }>;
  methods: MethodResult[];
  /** (router - best single) / (oracle - best single) */
  gapClosed: number;
  strongWeak: { strong: string; weak: string; apgr: number; cpt50: number; cpt80: number; curve: { calls: number[]; pgr: number[] } };
  aiq: number;
  /** cost-quality points of the router's lambda sweep, and their non-decreasing convex hull */
  sweep: { points: Array<{ lambda: number; cost: number; reward: number }>; hull: Array<{ cost: number; reward: number }> };
  /** task -> worker -> fraction of the task's items routed to the worker (the router's) */
  routing: Record<string, Record<string, number>>;
  /** task -> item count in the evaluated split */
  taskCounts: Record<string, number>;
  /** SFT history of the checkpoint, when known */
  training?: Array<{ epoch: number; trainLoss: number; valLoss: number }>;
  /** mean over several split seeds, when `--seeds` was given: method -> mean and sd */
  seeds?: { count: number; methods: Array<{ name: string; mean: number; sd: number }> };
};
