// Prompt templates: versioned files in src/prompts/ (`worker-v1.md`, `conductor-v1.md`), in
// fugu's own words. A template is sections ("=== name ===" lines) with {{placeholders}}; the
// version string (the file's name) travels with every rendered prompt so rows can record it.

import { readdirSync, readFileSync } from 'node:fs';
import { InputError, type ChatMessage } from '@fugu/core';
import { parseWorkflow } from './text.ts';
import { DEFAULT_MAX_STEPS, resolveMaxSteps, visibleSteps, type ConductorPool, type Workflow } from './workflow.ts';

export const DEFAULT_WORKER_PROMPT = 'worker-v1';
export const DEFAULT_CONDUCTOR_PROMPT = 'conductor-v1';

export type PromptTemplate = {
  /** the version string, e.g. `worker-v1` (the file name without `.md`) */
  version: string;
  sections: ReadonlyArray<{ name: string; body: string }>;
};

/** A prompt ready to send, with the template version it came from. */
export type RenderedPrompt = { version: string; messages: ChatMessage[] };

const PROMPTS_DIR = new URL('./prompts/', import.meta.url);
const VERSION = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*-v\d+$/;
const cache = new Map<string, PromptTemplate>();

/** The versions of the templates shipped with the package (`conductor-v1`, `worker-v1`, ...). */
export function promptVersions(): string[] {
  return readdirSync(PROMPTS_DIR)
    .filter((f) => f.endsWith('.md'))
    .map((f) => f.slice(0, -3))
    .filter((v) => VERSION.test(v))
    .sort();
}

/** Loads (once) the template of a version; an unknown version is an InputError listing the known ones. */
export function loadPromptTemplate(version: string): PromptTemplate {
  const hit = cache.get(version);
  if (hit) return hit;
  if (!VERSION.test(version) || !promptVersions().includes(version)) {
    throw new InputError(`unknown prompt template ${JSON.stringify(version)}; known: ${promptVersions().join(', ')}`, { field: 'prompt' });
  }
  const template = parseTemplate(version, readFileSync(new URL(`${version}.md`, PROMPTS_DIR), 'utf8'));
  cache.set(version, template);
  return template;
}

/** Splits a template file into its sections (text before the first header is a note). */
export function parseTemplate(version: string, text: string): PromptTemplate {
  const sections: Array<{ name: string; body: string }> = [];
  let current: { name: string; lines: string[] } | undefined;
  const flush = (): void => {
    if (current) sections.push({ name: current.name, body: current.lines.join('\n').replace(/^\s*\n|\s+$/g, '').replace(/^\n+/, '') });
  };
  for (const line of text.split(/\r?\n/)) {
    const h = /^=== ([a-z][a-z0-9-]*) ===\s*$/.exec(line);
    if (h) {
      flush();
      current = { name: h[1]!, lines: [] };
    } else current?.lines.push(line);
  }
  flush();
  if (sections.length === 0) throw new InputError(`prompt template ${version} has no sections`, { field: 'prompt' });
  return { version, sections };
}

function section(t: PromptTemplate, name: string): string {
  const s = t.sections.find((x) => x.name === name);
  if (!s) throw new InputError(`prompt template ${t.version} has no "${name}" section`, { field: 'prompt' });
  return s.body;
}

/** Fills {{name}} placeholders in one pass (inserted values are never re-read); a placeholder without a value is an error. */
export function fill(version: string, body: string, values: Record<string, string | number>): string {
  return body.replace(/\{\{(\w+)\}\}/g, (_, k: string) => {
    const v = values[k];
    if (v === undefined) throw new InputError(`prompt template ${version}: no value for {{${k}}}`, { field: 'prompt' });
    return String(v);
  });
}

function joiner(sep: string): string {
  return sep === '' ? '\n\n' : `\n\n${sep}\n\n`;
}

// ---- the worker prompt -----------------------------------------------------------------------

export type WorkerPromptInput = {
  /** the overall task: the item's question */
  question: string;
  workflow: Workflow;
  /** 0-based index of the step to prompt */
  step: number;
  /** answers of earlier steps by 0-based index; every step this one sees must have one */
  answers: ReadonlyMap<number, string> | ReadonlyArray<string | undefined>;
  /** template version (default worker-v1) */
  template?: string;
};

/**
 * The prompt of one step: the overall task, the subtasks and answers of the steps it sees
 * ("Agent 2 (step 1) was asked: ... It answered: ..."; agent = worker id, step = its index as in
 * the lists the Conductor wrote, from 0, so "the answer of step 1" in a subtask means the same), then
 * its own subtask, as one user message. A visible step without an answer is an InputError.
 */
export function renderWorkerPrompt(input: WorkerPromptInput): RenderedPrompt {
  const t = loadPromptTemplate(input.template ?? DEFAULT_WORKER_PROMPT);
  const step = input.workflow.steps[input.step];
  if (!step) throw new InputError(`no step ${input.step} in a workflow of ${input.workflow.steps.length}`, { field: 'step' });
  const answerOf = (j: number): string | undefined => (input.answers instanceof Map ? input.answers.get(j) : (input.answers as ReadonlyArray<string | undefined>)[j]);
  const visible = visibleSteps(input.workflow, input.step).map((j) => {
    const answer = answerOf(j);
    if (answer === undefined) throw new InputError(`step ${input.step + 1} sees step ${j + 1}, which has no answer yet`, { field: 'answers' });
    const s = input.workflow.steps[j]!;
    return fill(t.version, section(t, 'visible-step'), { agent: s.worker, step: j, subtask: s.subtask, answer });
  });
  const context = visible.length
    ? fill(t.version, section(t, 'context'), { steps: visible.join(joiner(optionalSection(t, 'step-separator'))) })
    : section(t, 'no-context');
  const user = fill(t.version, section(t, 'user'), { question: input.question, context, subtask: step.subtask, agent: step.worker, step: input.step });
  const system = optionalSection(t, 'system');
  return { version: t.version, messages: [...(system ? [{ role: 'system' as const, content: system }] : []), { role: 'user', content: user }] };
}

function optionalSection(t: PromptTemplate, name: string): string {
  return t.sections.find((x) => x.name === name)?.body ?? '';
}

// ---- the Conductor's prompt ------------------------------------------------------------------

export type ConductorPromptInput = {
  question: string;
  pool: ConductorPool;
  /** default 5 */
  maxSteps?: number;
  /** template version (default conductor-v1) */
  template?: string;
};

/** The worked examples of a template with ids of a pool of size k, each checked to parse, with its number of steps. */
export function conductorExamples(version: string, poolSize: number): Array<{ text: string; steps: number }> {
  const t = loadPromptTemplate(version);
  const ids = { a: 0, b: 1 % poolSize, c: 2 % poolSize };
  return t.sections
    .filter((s) => s.name === 'example')
    .map((s, i) => {
      const text = fill(t.version, s.body, ids);
      const parsed = parseWorkflow(text, { poolSize, maxSteps: 10 });
      if (!parsed.ok) throw new InputError(`prompt template ${version}, example ${i + 1} does not parse: ${parsed.error.message}`, { field: 'prompt' });
      return { text, steps: parsed.workflow.steps.length };
    });
}

/**
 * The system prompt of an `llm:` Conductor (the task, the three-list format, the numbered
 * workers with their descriptions, worked examples of at most maxSteps steps, the maximum
 * number of steps) and the question as the user message.
 */
export function renderConductorPrompt(input: ConductorPromptInput): RenderedPrompt {
  const maxSteps = resolveMaxSteps(input.maxSteps ?? DEFAULT_MAX_STEPS);
  const t = loadPromptTemplate(input.template ?? DEFAULT_CONDUCTOR_PROMPT);
  const k = input.pool.workers.length;
  if (k === 0) throw new InputError('the Conductor pool has no workers', { field: 'pool' });
  const workers = input.pool.workers.map((w) => fill(t.version, section(t, 'worker-line'), { id: w.id, description: w.description })).join('\n');
  const examples = conductorExamples(t.version, k)
    .filter((e) => e.steps <= maxSteps)
    .map((e) => e.text)
    .join(joiner(optionalSection(t, 'example-separator')));
  const system = fill(t.version, section(t, 'system'), { workers, lastId: k - 1, maxSteps, examples });
  const user = fill(t.version, section(t, 'user'), { question: input.question });
  return { version: t.version, messages: [{ role: 'system', content: system }, { role: 'user', content: user }] };
}
