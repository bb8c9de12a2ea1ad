// The policy's prompt for an external RL engine: the `llm:` Conductor's prompt
// (`renderConductorPrompt`, libs/conductor: the task, the numbered workers with their
// descriptions, worked examples, the maximum of steps) for each question, over the pool as a
// workflow sees it (the same ids and descriptions the executor maps the completion's worker ids
// back with). `fugu ultra prompt` writes them as JSONL, one question a line, in a form OpenRLHF
// (`--input_key prompt --label_key label --apply_chat_template`), TRL (`prompt` conversational,
// `question_id` handed to the reward function) and verl (`data_source`, `prompt`,
// `reward_model.ground_truth`, `extra_info`; to parquet) all read. Pure but for reading the
// dataset and pool files.
import { InputError, type ChatMessage, type DatasetItem, type WorkerSpec } from '@fugu/core';
import type { SplitScheme } from '@fugu/datasets';
import { renderConductorPrompt, resolveMaxSteps, type ConductorPool } from '@fugu/conductor';
import { writerPool, ULTRA_SPLITS, type UltraSplit } from '@fugu/ultra';
import { runItems } from '../run-items.ts';
import { resolveDataset, resolveWorkerPool } from '@fugu/evaluation';

/** One line of the exported prompt dataset. */
export type RewardPromptLine = {
  /** the chat messages (system: the Conductor's instructions and workers; user: the question) */
  prompt: ChatMessage[];
  /** the question id: what POST /v1/rewards takes as OpenRLHF's label */
  label: string;
  question_id: string;
  /** verl's fields */
  data_source: 'fugu';
  reward_model: { style: 'rule'; ground_truth: string };
  extra_info: { question_id: string; prompt_version: string };
};

/** The pool a workflow's Conductor sees (executor's runWorkflow): ordinal ids, descriptions, `workers` only when given. */
export function promptPool(workers: ReadonlyArray<Pick<WorkerSpec, 'name' | 'model' | 'provider' | 'description'>>, only?: readonly string[]): ConductorPool {
  const chosen = only === undefined ? workers : workers.filter((w) => only.includes(w.name));
  return writerPool(chosen);
}

/** The prompt line of one question. */
export function rewardPromptLine(item: Pick<DatasetItem, 'id' | 'prompt'>, pool: ConductorPool, maxSteps: number, template?: string): RewardPromptLine {
  const p = renderConductorPrompt({ question: item.prompt, pool, maxSteps, ...(template !== undefined && { template }) });
  return {
    prompt: p.messages, label: item.id, question_id: item.id, data_source: 'fugu', reward_model: { style: 'rule', ground_truth: item.id },
    extra_info: { question_id: item.id, prompt_version: p.version },
  };
}

export type RewardPromptOptions = {
  pool: string;
  dataset: string;
  split: UltraSplit;
  splitSeed: number;
  /** by unique prompt (default) or the dataset's own split */
  splitBy?: SplitScheme;
  sample: number | null;
  seed: number;
  maxSteps: number;
  /** a restricted pool (what a key restricted to these workers is scored on) */
  workers?: string[];
  template?: string;
};

/** The prompts of a dataset's split (the router's split, by unique prompt or the dataset's own, then a seeded sample, as `fugu ultra eval` picks items). */
export async function rewardPrompts(o: RewardPromptOptions, llmrouterDir: string): Promise<RewardPromptLine[]> {
  const maxSteps = resolveMaxSteps(o.maxSteps);
  if (!(ULTRA_SPLITS as readonly string[]).includes(o.split)) throw new InputError(`must be ${ULTRA_SPLITS.join(', ')}, got "${o.split}"`, { field: '--split' });
  const pool = await resolveWorkerPool(o.pool, llmrouterDir);
  const names = pool.workers.map((w) => w.name);
  const unknown = o.workers?.find((w) => !names.includes(w));
  if (unknown !== undefined) throw new InputError(`worker ${JSON.stringify(unknown)} is not in the pool (it has ${names.join(', ')})`, { field: '--workers' });
  if (o.workers !== undefined && o.workers.length === 0) throw new InputError('name one or more of the pool\'s workers', { field: '--workers' });
  const cp = promptPool(pool.workers, o.workers);
  const dataset = await resolveDataset(o.dataset, llmrouterDir);
  const items = runItems(dataset.items, o);
  return items.map((it) => rewardPromptLine(it, cp, maxSteps, o.template));
}
