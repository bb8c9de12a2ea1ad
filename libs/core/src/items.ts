// One question of a routing dataset, as every part of fugu sees it.

export type MetricKind = 'exact-match' | 'numeric' | 'multiple-choice' | 'recorded' | (string & {});

export type RecordedOutcome = {
  /** the worker's recorded score on this item, in [0, 1] */
  score: number;
  tokensIn?: number;
  tokensOut?: number;
  /** the recorded answer text, when the dataset has it */
  answer?: string;
};

export type DatasetItem = {
  /** stable id within the dataset */
  id: string;
  task: string;
  prompt: string;
  groundTruth?: string;
  /** how an answer is checked: a verifier name, or the source's metric name */
  metric?: string;
  /** multiple-choice options: labels and texts */
  choices?: { labels: string[]; texts: string[] };
  /** the split the source assigned, if any (e.g. LLMRouter's train/test) */
  sourceSplit?: string;
  /** recorded per-worker outcomes (RouterBench-style offline evaluation) */
  recorded?: Record<string, RecordedOutcome>;
};
