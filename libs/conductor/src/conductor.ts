// One interface for whoever writes a workflow: question + pool -> completion text (the three
// lists), with the log-probability a trainer needs where the writer has it. The executor parses
// every completion the same way, whoever wrote it (a fixed topology too), so a row always holds
// the text that was executed.
//
//   llm:<worker or endpoint>  llmConductor: a chat model prompted with renderConductorPrompt
//   policy:<checkpoint>       the embedded policy (./policy), on the backbone's features
//   fixed:<topology>          fixedConductor: fixedWorkflow rendered to text

import type { ChatMessage, Usage } from '@fugu/core';
import { FIXED_SUBTASKS_VERSION, fixedWorkflow } from './fixed.ts';
import { renderConductorPrompt } from './prompts.ts';
import type { FixedConductorSpec } from './spec.ts';
import { renderWorkflow } from './text.ts';
import type { ConductorPool } from './workflow.ts';

export type ConductorInput = {
  question: string;
  pool: ConductorPool;
  /** the workflow's seed: sampling of an llm or policy writer */
  seed: number;
  /**
   * what makes this workflow's draws its own besides the seed (the dataset item's id, or the
   * question): a writer that samples combines the two, so one seed gives different workflows on
   * different items and the same workflow on the same item
   */
  sampleKey?: string;
  /** default 5 */
  maxSteps?: number;
  /** the backbone's features of the question (the policy writer needs them) */
  features?: Float32Array;
  /** pool worker names by training mean, best first (the fixed topologies need it) */
  ranking?: readonly string[];
  /** the worker the router picked (fixed:router) */
  routerChoice?: string;
  /** a sampling writer takes its most probable choice instead (the policy's argmax) */
  argmax?: boolean;
  signal?: AbortSignal;
};

export type ConductorOutput = {
  /** the completion: what the parser reads */
  text: string;
  /** log-probability of the writer's decisions or tokens, where it has one */
  logprob?: number;
  /** the prompt template version of an llm writer, or the fixed subtasks' version */
  promptVersion?: string;
  /** tokens of the writer's own call (llm writers) */
  usage?: Usage;
  /** picodollars of the writer's own call (llm writers) */
  costPico?: bigint;
  /** the writer's own record of what it decided (the policy's decisions), JSON */
  decisions?: unknown;
};

export interface Conductor {
  /** the canonical spec (rows and reports label workflows by it) */
  readonly spec: string;
  write(input: ConductorInput): Promise<ConductorOutput>;
}

/** A fixed topology as a Conductor: its workflow rendered to the three-list text. */
export function fixedConductor(spec: FixedConductorSpec): Conductor {
  return {
    spec: spec.spec,
    async write(input) {
      const workflow = fixedWorkflow(spec, {
        pool: input.pool,
        ranking: input.ranking ?? [],
        question: input.question,
        ...(input.routerChoice !== undefined && { routerChoice: input.routerChoice }),
        ...(input.maxSteps !== undefined && { maxSteps: input.maxSteps }),
      });
      return { text: renderWorkflow(workflow), promptVersion: FIXED_SUBTASKS_VERSION };
    },
  };
}

/** What an llm writer needs of a chat model: messages in, text (with usage and cost) out. */
export type CompleteFn = (req: { messages: ChatMessage[]; temperature: number; seed: number; signal?: AbortSignal }) => Promise<{ text: string; usage?: Usage; costPico?: bigint; logprob?: number }>;

/** An `llm:` Conductor: the conductor prompt (system: task, numbered workers, examples) sampled at `temperature`. */
export function llmConductor(opts: { spec: string; complete: CompleteFn; temperature?: number; template?: string }): Conductor {
  return {
    spec: opts.spec,
    async write(input) {
      const prompt = renderConductorPrompt({
        question: input.question,
        pool: input.pool,
        ...(input.maxSteps !== undefined && { maxSteps: input.maxSteps }),
        ...(opts.template !== undefined && { template: opts.template }),
      });
      const r = await opts.complete({ messages: prompt.messages, temperature: opts.temperature ?? 0.7, seed: input.seed, ...(input.signal && { signal: input.signal }) });
      return {
        text: r.text,
        promptVersion: prompt.version,
        ...(r.usage && { usage: r.usage }),
        ...(r.costPico !== undefined && { costPico: r.costPico }),
        ...(r.logprob !== undefined && { logprob: r.logprob }),
      };
    },
  };
}
