// The wire format of POST /v1/rewards, read into one shape (pure: no I/O). Two request shapes:
//
// - OpenRLHF's remote reward model protocol, unchanged (`--remote_rm_url`, newer releases
//   `--reward.remote_url`). Its client, OpenRLHF/OpenRLHF openrlhf/utils/remote_rm_utils.py at
//   9b8641c181296428ec764a8626ddccd750a780b0, POSTs `{"query": [...], "prompts": [...],
//   "labels": [...]}` with only `Content-Type: application/json` (timeout 180 s, 5 tries one
//   second apart on any error, a non-2xx status included) and reads `rewards` from the answer.
//   openrlhf/trainer/ppo_utils/experience_maker.py at 89308a0b768dec168dff240ae746710fc967a49b
//   builds them: query[i] = tokenizer.batch_decode(remove_pad_token(sequences, attention_mask),
//   skip_special_tokens=False) (the prompt's tokens and the response's, special tokens kept),
//   prompts[i] = the prompt text the policy was given (so a prefix of query[i], or a substring
//   after pad tokens in releases that decode without removing them), labels[i] = the dataset's
//   `--label_key` value; `update_samples_with_rewards` reads `rewards`, and `scores` and
//   `extra_logs` (a dict of per-sample lists) when present, as openrlhf/cli/serve_rm.py at
//   58ec6ffd957e617b7dbb14596a22de99d9a75617 answers them.
//   Here: the completion is what follows the first occurrence of prompts[i] in query[i], less
//   trailing special tokens (`<|...|>`, `</s>`, `<eos>`, `<pad>`, `<end_of_turn>`); labels[i]
//   names the question: a question id of the reward dataset (a string), or an object (or the
//   JSON text of one) with `question_id`, or with `question`, `ground_truth` and optionally
//   `metric` (a verifier: exact-match, numeric, multiple-choice, f1) and `choices`; any object
//   may carry `seed`.
// - fugu's own: `{"completions": [{"completion": "...", "question_id": "..." | "question": ...,
//   "ground_truth": ..., "metric"?, "choices"?, "seed"?}], "seed"?, "deadline_s"?, "max_steps"?,
//   "unscored"?}`.
//
// Options of either shape in the URL's query string (OpenRLHF sends no others): `seed`,
// `deadline_s`, `max_steps`, `unscored` (`null`: unscored completions come back as null rewards
// with their indices in `unscored`; `error`: a 503 instead, which OpenRLHF's client retries).
// Every error is an InputError naming the field and index (`labels[3]`, `query[7]`, ...).
import { InputError } from '@fugu/core';
import { MAX_STEPS_LIMIT } from '@fugu/conductor';

export const REWARD_LIMITS = {
  /** the most completions in one request (256, an OpenRLHF rollout batch, must work) */
  maxCompletions: 1024,
  /** the most characters of one completion (after it is cut from its query) */
  maxCompletionChars: 100_000,
  /** the most characters of one inline question or ground truth */
  maxQuestionChars: 100_000,
  /** the request body limit (FUGU_REWARDS_BODY_LIMIT_BYTES overrides it) */
  bodyLimitBytes: 32 * 1024 * 1024,
  /** how long a request waits for its workflows by default, in seconds (OpenRLHF's client gives up at 180) */
  defaultDeadlineS: 120,
  maxDeadlineS: 600,
} as const;

/** The verifiers an inline question may name (`recorded` needs a dataset's recorded outcomes). */
export const INLINE_METRICS = ['exact-match', 'numeric', 'multiple-choice', 'f1'] as const;
export type InlineMetric = (typeof INLINE_METRICS)[number];

export type RewardTarget =
  | { kind: 'id'; id: string }
  | { kind: 'inline'; question: string; groundTruth: string; metric: InlineMetric; choices?: { labels: string[]; texts: string[] } };

export type RewardEntry = {
  /** the completion's index in the request */
  index: number;
  /** what errors about this entry's question name (`labels[3]`, `completions[3].question_id`) */
  field: string;
  completion: string;
  target: RewardTarget;
  seed: number;
};

export type UnscoredMode = 'null' | 'error';

export type RewardsRequest = {
  shape: 'openrlhf' | 'fugu';
  entries: RewardEntry[];
  deadlineMs: number;
  maxSteps: number;
  unscored: UnscoredMode;
};

type Query = Record<string, unknown>;

const bad = (field: string, message: string): InputError => new InputError(message, { field });

/** Trailing special tokens a decode with skip_special_tokens=False leaves after a response. */
const TRAILING_SPECIAL = /(?:\s*(?:<\|[^<>|\s]{1,64}\|>|<\/s>|<eos>|<pad>|<end_of_turn>))+\s*$/;

/** The completion of an OpenRLHF query: what follows the prompt, less trailing special tokens. */
export function completionOfQuery(query: string, prompt: string): string | undefined {
  const at = query.indexOf(prompt);
  if (at < 0) return undefined;
  return query.slice(at + prompt.length).replace(TRAILING_SPECIAL, '');
}

function intOption(v: unknown, field: string, min: number, max: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) throw bad(field, `${field} must be a whole number in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return n;
}

function numberOption(v: unknown, field: string, min: number, max: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max) throw bad(field, `${field} must be a number of seconds in [${min}, ${max}], got ${JSON.stringify(v)}`);
  return n;
}

/** A request option from the body (fugu's shape) or the query string; both given and different is an error. */
function option(body: Record<string, unknown>, query: Query, name: string): unknown {
  const q = Array.isArray(query[name]) ? (query[name] as unknown[]).at(-1) : query[name];
  const b = body[name];
  if (b !== undefined && q !== undefined && String(b) !== String(q)) throw bad(name, `${name} is given in the body (${JSON.stringify(b)}) and the URL (${JSON.stringify(q)}); give it once`);
  return b ?? q;
}

const SEED_MAX = 2 ** 31 - 1;

/** Reads a request body and the URL's query string; throws an InputError naming the field. */
export function parseRewardsRequest(raw: unknown, query: Query = {}, limits: Pick<typeof REWARD_LIMITS, 'maxCompletions'> = REWARD_LIMITS): RewardsRequest {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw bad('body', 'the body must be a JSON object: {"query", "prompts", "labels"} (OpenRLHF) or {"completions": [...]}');
  const body = raw as Record<string, unknown>;
  const openrlhf = body.query !== undefined;
  if (openrlhf && body.completions !== undefined) throw bad('completions', 'give either query/prompts/labels (OpenRLHF) or completions, not both');
  if (!openrlhf && body.completions === undefined) throw bad('query', 'missing query (OpenRLHF: {"query": [...], "prompts": [...], "labels": [...]}) or completions');
  const known = openrlhf ? ['query', 'prompts', 'labels', 'seed', 'deadline_s', 'max_steps', 'unscored'] : ['completions', 'seed', 'deadline_s', 'max_steps', 'unscored'];
  for (const k of Object.keys(body)) if (!known.includes(k)) throw bad(k, `unknown field "${k}" (known: ${known.join(', ')})`);
  for (const k of Object.keys(query)) if (!['seed', 'deadline_s', 'max_steps', 'unscored'].includes(k)) throw bad(k, `unknown URL parameter "${k}" (known: seed, deadline_s, max_steps, unscored)`);

  const seedRaw = option(body, query, 'seed');
  const seed = seedRaw === undefined ? 0 : intOption(seedRaw, 'seed', 0, SEED_MAX);
  const deadlineRaw = option(body, query, 'deadline_s');
  const deadlineS = deadlineRaw === undefined ? REWARD_LIMITS.defaultDeadlineS : numberOption(deadlineRaw, 'deadline_s', 0.001, REWARD_LIMITS.maxDeadlineS);
  const stepsRaw = option(body, query, 'max_steps');
  const maxSteps = stepsRaw === undefined ? 5 : intOption(stepsRaw, 'max_steps', 1, MAX_STEPS_LIMIT);
  const unscoredRaw = option(body, query, 'unscored');
  if (unscoredRaw !== undefined && unscoredRaw !== 'null' && unscoredRaw !== 'error') throw bad('unscored', `unscored must be null or error, got ${JSON.stringify(unscoredRaw)}`);
  const unscored: UnscoredMode = unscoredRaw === 'error' ? 'error' : 'null';

  const entries = openrlhf ? openrlhfEntries(body, seed, limits.maxCompletions) : fuguEntries(body, seed, limits.maxCompletions);
  return { shape: openrlhf ? 'openrlhf' : 'fugu', entries, deadlineMs: Math.round(deadlineS * 1000), maxSteps, unscored };
}

function checkList(v: unknown, field: string, max: number): unknown[] {
  if (!Array.isArray(v)) throw bad(field, `${field} must be a list`);
  if (v.length === 0) throw bad(field, `${field} is empty: give one or more completions`);
  if (v.length > max) throw bad(field, `${field} has ${v.length} completions, at most ${max} in one request (send several requests)`);
  return v;
}

function checkCompletion(text: string, field: string): string {
  if (text.length > REWARD_LIMITS.maxCompletionChars) throw bad(field, `${field}: the completion is ${text.length} characters, at most ${REWARD_LIMITS.maxCompletionChars}`);
  return text;
}

function openrlhfEntries(body: Record<string, unknown>, seed: number, max: number): RewardEntry[] {
  const query = checkList(body.query, 'query', max);
  if (body.prompts === undefined) throw bad('prompts', 'missing prompts: the completion is what follows prompts[i] in query[i] (OpenRLHF sends them since it passes prompts and labels)');
  if (body.labels === undefined) throw bad('labels', 'missing labels: labels[i] names the question of query[i] (a question id, or {"question", "ground_truth"}); set --label_key');
  const prompts = body.prompts;
  const labels = body.labels;
  if (!Array.isArray(prompts)) throw bad('prompts', 'prompts must be a list');
  if (!Array.isArray(labels)) throw bad('labels', 'labels must be a list');
  if (prompts.length !== query.length) throw bad('prompts', `prompts has ${prompts.length} entries, query has ${query.length}: one prompt per query`);
  if (labels.length !== query.length) throw bad('labels', `labels has ${labels.length} entries, query has ${query.length}: one label per query`);
  return query.map((q, i) => {
    const p = prompts[i];
    if (typeof q !== 'string') throw bad(`query[${i}]`, `query[${i}] must be a string`);
    if (typeof p !== 'string' || p === '') throw bad(`prompts[${i}]`, `prompts[${i}] must be a non-empty string (the prompt of query[${i}])`);
    const completion = completionOfQuery(q, p);
    if (completion === undefined) throw bad(`query[${i}]`, `query[${i}] does not contain prompts[${i}]: the completion is what follows the prompt in its query`);
    const { target, seed: own } = readLabel(labels[i], `labels[${i}]`);
    return { index: i, field: `labels[${i}]`, completion: checkCompletion(completion, `query[${i}]`), target, seed: own ?? seed };
  });
}

function fuguEntries(body: Record<string, unknown>, seed: number, max: number): RewardEntry[] {
  const list = checkList(body.completions, 'completions', max);
  return list.map((c, i) => {
    const at = `completions[${i}]`;
    if (c === null || typeof c !== 'object' || Array.isArray(c)) throw bad(at, `${at} must be an object {"completion", "question_id"} or {"completion", "question", "ground_truth"}`);
    const o = c as Record<string, unknown>;
    if (typeof o.completion !== 'string') throw bad(`${at}.completion`, `${at}.completion must be a string (the Conductor's completion)`);
    const { completion, ...label } = o;
    const { target, seed: own } = readLabelObject(label, at);
    return { index: i, field: at, completion: checkCompletion(completion as string, `${at}.completion`), target, seed: own ?? seed };
  });
}

/** An OpenRLHF label: a question id, or an object (or its JSON text). */
function readLabel(v: unknown, field: string): { target: RewardTarget; seed?: number } {
  if (typeof v === 'string') {
    const t = v.trim();
    if (t.startsWith('{')) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(t);
      } catch (e) {
        throw bad(field, `${field} starts with "{" but is not JSON (${(e as Error).message})`);
      }
      return readLabelObject(parsed, field);
    }
    if (t === '') throw bad(field, `${field} is empty: give the question id, or {"question", "ground_truth"} (missing ground truth)`);
    return { target: { kind: 'id', id: t } };
  }
  return readLabelObject(v, field);
}

const LABEL_KEYS = ['question_id', 'question', 'ground_truth', 'metric', 'choices', 'seed'];

function readLabelObject(v: unknown, field: string): { target: RewardTarget; seed?: number } {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw bad(field, `${field} must be a question id or an object {"question_id"} / {"question", "ground_truth"}`);
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!LABEL_KEYS.includes(k)) throw bad(`${field}.${k}`, `${field}: unknown key "${k}" (known: ${LABEL_KEYS.join(', ')})`);
  const seed = o.seed === undefined ? undefined : intOption(o.seed, `${field}.seed`, 0, SEED_MAX);
  if (o.question_id !== undefined) {
    if (o.question !== undefined || o.ground_truth !== undefined) throw bad(`${field}.question_id`, `${field}: give question_id or question and ground_truth, not both`);
    if (typeof o.question_id !== 'string' || o.question_id.trim() === '') throw bad(`${field}.question_id`, `${field}.question_id must be a non-empty string`);
    return { target: { kind: 'id', id: o.question_id.trim() }, ...(seed !== undefined && { seed }) };
  }
  if (typeof o.question !== 'string' || o.question.trim() === '') throw bad(`${field}.question`, `${field}: give question_id, or question (a non-empty string) with its ground_truth`);
  if (o.question.length > REWARD_LIMITS.maxQuestionChars) throw bad(`${field}.question`, `${field}.question is ${o.question.length} characters, at most ${REWARD_LIMITS.maxQuestionChars}`);
  if (o.ground_truth === undefined || o.ground_truth === null || o.ground_truth === '') throw bad(`${field}.ground_truth`, `${field}: missing ground truth for the question (ground_truth)`);
  if (typeof o.ground_truth !== 'string' && typeof o.ground_truth !== 'number') throw bad(`${field}.ground_truth`, `${field}.ground_truth must be a string or a number`);
  const groundTruth = String(o.ground_truth);
  if (groundTruth.length > REWARD_LIMITS.maxQuestionChars) throw bad(`${field}.ground_truth`, `${field}.ground_truth is too long (at most ${REWARD_LIMITS.maxQuestionChars} characters)`);
  const metric = o.metric === undefined ? 'exact-match' : o.metric;
  if (typeof metric !== 'string' || !(INLINE_METRICS as readonly string[]).includes(metric)) throw bad(`${field}.metric`, `${field}.metric must be one of ${INLINE_METRICS.join(', ')}, got ${JSON.stringify(o.metric)}`);
  let choices: { labels: string[]; texts: string[] } | undefined;
  if (o.choices !== undefined) {
    const c = o.choices as Record<string, unknown> | null;
    const strings = (x: unknown): x is string[] => Array.isArray(x) && x.every((s) => typeof s === 'string');
    if (c === null || typeof c !== 'object' || !strings(c.labels) || !strings(c.texts) || c.labels.length !== c.texts.length) {
      throw bad(`${field}.choices`, `${field}.choices must be {"labels": [...], "texts": [...]} of the same length`);
    }
    choices = { labels: [...c.labels], texts: [...c.texts] };
  }
  return {
    target: { kind: 'inline', question: o.question, groundTruth, metric: metric as InlineMetric, ...(choices && { choices }) },
    ...(seed !== undefined && { seed }),
  };
}
