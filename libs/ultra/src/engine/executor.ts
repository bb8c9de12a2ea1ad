// The one workflow executor (issue 27): a dataflow state machine over a planned workflow's
// steps, used by every path that runs a workflow: a conduct job (batches of `fugu ultra eval`,
// the reward service, GRPO on the cluster), in-process GRPO rollouts, and fugu-ultra served or
// batched through the gateway. Each step is an agent:
//
//   waiting -> call      the steps it sees have answered: its prompt is rendered (the worker
//                        prompt with the answers its access list grants);
//   call    -> done      its worker answered (cut at options.maxTokensPerStep: the workflow ends
//                        `budget-tokens`);
//   call    -> tools     its worker asked for the client's tools (served only): the turn stops
//                        there, and the client's results put it back to `call`;
//   call    -> error     its call failed after the runner's retries (or `call` again, where the
//                        caller can resume the workflow from that step);
//   waiting -> skipped   the workflow ended before it could run.
//
// The stop rules and finish reasons are stop-rules.ts's. What differs between paths is only the
// step runner (how a step's call is made: a chat-call job on the provider queues, the replay
// provider in this process, or the gateway's call seam with retries and streaming) and where the
// state lives between turns: a served workflow that stops for tool results saves it as its
// session row; a workflow that runs to its end in one go keeps it in memory, and its durable
// record is its step calls' rows (keyed deterministically, so a re-execution pays for none of
// them twice) and its step rows and final write.
import {
  formatUsd, parseUsd, toWireError,
  type ChatMessage, type ChatRequest, type ChatResult, type ToolChoice, type ToolDefinition, type WireError, type WorkerSpec,
} from '@fugu/core';
import { encodeReplayStepRequest, normalizeSources, REPLAY_STEP_METADATA, renderWorkerPrompt, scheduleOf, type Schedule, type Workflow } from '@fugu/conductor';
import type { StoredWorker, WorkflowFinish, WorkflowFinishReason, WorkflowStepRow, WorkflowStepSpec } from '@fugu/db';
import { workerReplayParams, type WorkflowOptions } from './options.ts';
import type { WorkflowPlan } from './plan.ts';
import { budgetPico, cutAtTokenBound, finishReasonOf, overBudget, type WorkflowEnd } from './stop-rules.ts';

export type AgentStatus = 'waiting' | 'call' | 'tools' | 'done' | 'error' | 'skipped';
/** `alias`: the client-visible call that answers this one (another agent's identical call of the same message, merged) */
export type PendingCall = { id: string; agentCallId: string; name: string; arguments: string; alias?: string };
export type AgentState = {
  status: AgentStatus;
  /** the agent's private transcript: its prompt, then its own tool calls and their results */
  messages: ChatMessage[];
  turns: number;
  toolTurns: number;
  pending: PendingCall[];
  /** text the agent wrote beside its pending tool calls */
  toolText: string;
  answer: string | null;
  finish: string | null;
  tokensIn: number;
  tokensOut: number;
  /** USD decimal */
  cost: string;
  latencyMs: number;
  /** the key of the agent's latest call (its chat_calls row; the step row's chat_call_id) */
  lastKey: string | null;
  replay: Record<string, unknown> | null;
  error: WireError | null;
  /** its step row is written */
  saved: boolean;
  /** the try of the agent's current call (a served call's key's `.a<n>` past the first) */
  attempt: number;
  /** its answer came from the response cache */
  cached?: boolean;
};

/** What the executor keeps of a workflow (a served workflow's session state holds it, with the conversation's fields). */
export type StepsState = {
  /** the agents' task: the question (served: the conversation so far and the shared memory) */
  task: string;
  /** the client's system messages, first in every agent's transcript */
  system: string;
  /** the parsed steps with their workers' names (the workflow is read back from them) */
  specs: WorkflowStepSpec[];
  workerIds: number[];
  sees: number[][];
  sources: string[][];
  /** the dataset item a replay step answers (as the replay store keys it) */
  itemId: string | null;
  seed: number;
  options: WorkflowOptions;
  agents: AgentState[];
  /** the tool calls issued so far (a signed call id's sequence number) */
  callSeq: number;
  toolTurns: number;
  /** the workflow row's final write, less what the steps add */
  base: WorkflowFinish;
};

export function newAgent(): AgentState {
  return { status: 'waiting', messages: [], turns: 0, toolTurns: 0, pending: [], toolText: '', answer: null, finish: null, tokensIn: 0, tokensOut: 0, cost: '0', latencyMs: 0, lastKey: null, replay: null, error: null, saved: false, attempt: 1 };
}

/** The executor's state of a planned workflow, every agent waiting. */
export function newStepsState(plan: Extract<WorkflowPlan, { ok: true }>, o: { task: string; system?: string; workers: readonly StoredWorker[]; itemId: string | null; seed: number; options: WorkflowOptions }): StepsState {
  const byName = new Map(o.workers.map((w) => [w.name, w]));
  return {
    task: o.task, system: o.system ?? '', specs: plan.specs, workerIds: plan.names.map((n) => byName.get(n)!.id), sees: plan.sees, sources: plan.sources,
    itemId: o.itemId, seed: o.seed, options: o.options, agents: plan.names.map(() => newAgent()), callSeq: 0, toolTurns: 0, base: plan.shape,
  };
}

/** The workflow the state's steps are (read back from their specs) and its schedule. */
export function workflowOf(state: Pick<StepsState, 'specs'>): { workflow: Workflow; schedule: Schedule } {
  const workflow: Workflow = { steps: state.specs.map(({ worker, subtask, access }) => ({ worker, subtask, access })) };
  return { workflow, schedule: scheduleOf(workflow) };
}

/** One step's call as the executor asks a runner for it. The runner sets `agent.lastKey` (and `attempt`) to the call's key. */
export type StepCall = { workflowId: number; step: number; worker: StoredWorker; request: ChatRequest; agent: AgentState; streamed: boolean };
/** `ms`: the call's own latency where the runner knows it (else the executor's measure) */
export type StepOutcome = { ok: true; result: ChatResult; cost: bigint; cached?: boolean; ms?: number } | { ok: false; error: WireError; ms?: number };
/**
 * How steps' calls are made: the calls that became ready together are given together (a job
 * runner enqueues them at once); one promise per call, in order, each settling with its own call.
 * A runner's promise rejects only for what is no step's failure (the request itself is wrong).
 */
export type StepRunner = (calls: StepCall[]) => Array<Promise<StepOutcome>>;

export type StepsContext = {
  workflowId: number;
  /** the worker of step i (its id in state.workerIds) */
  workerOf(i: number): StoredWorker;
  run: StepRunner;
  /** a served request's own parameters: every step's call gets them; `maxTokens` bounds the final step only, `stream` streams it */
  request?: {
    tools?: ToolDefinition[];
    toolChoice?: ToolChoice;
    parallelToolCalls?: boolean;
    temperature?: number;
    maxTokens?: number;
    params?: Partial<ChatRequest>;
    stream?: boolean;
  };
  /** an agent's tool turns are bounded (per agent, per workflow); past a bound its step ends with what it wrote (`budget-tool-turns`) */
  toolTurns?: { perAgent: number; perWorkflow: number };
  /** the client-visible id of an agent's tool call (served: fugu's signed ids) */
  signCall?(step: number, seq: number): string;
  /** false: a failed step is an error that ends the workflow; true: it stays `call`, to be made again by the same request sent again */
  resumable: boolean;
  emit?(progress: Record<string, unknown>): void;
};

export type StepsRun = {
  /** what ended the workflow before its steps had all run */
  ended: WorkflowEnd | undefined;
  /** the step that failed first (after its call's retries) */
  failed: { step: number; resumable: boolean } | undefined;
  /** an agent's step ended at a tool-turn bound */
  budgetHit: boolean;
  /** what this run's calls spent */
  tally: { inputTokens: number; outputTokens: number; cost: bigint };
};

/**
 * A step's token bound: the workflow's per step (options.maxTokensPerStep, whose cut ends the
 * workflow `budget-tokens`), and for the final step, whose answer is the completion, the
 * client's max_tokens too (the smaller).
 */
function maxTokensOf(options: Pick<WorkflowOptions, 'maxTokensPerStep'>, client: number | undefined): number | undefined {
  const bounds = [options.maxTokensPerStep, client].filter((n): n is number => n !== undefined);
  return bounds.length === 0 ? undefined : Math.min(...bounds);
}

/**
 * The client's tool_choice for an agent's call: as given on its first call; once the agent has had
 * tool results, a choice that forces a tool (`required`, a named tool) is `auto` again, or the
 * agent could never answer (the OpenAI Agents SDK's reset_tool_choice, on by default there too).
 */
function toolChoiceOf(choice: ToolChoice, a: Pick<AgentState, 'toolTurns'>): ToolChoice {
  return a.toolTurns > 0 && (choice === 'required' || typeof choice === 'object') ? 'auto' : choice;
}

/** An agent's first messages: the client's system messages, then the worker prompt of its step (the answers it may see). */
function agentPrompt(state: StepsState, workflow: Workflow, i: number): ChatMessage[] {
  const answers = new Map(state.agents.flatMap((a, j) => (a.status === 'done' ? [[j, a.answer ?? ''] as const] : [])));
  const prompt = renderWorkerPrompt({ question: state.task, workflow, step: i, answers, ...(state.options.workerPrompt !== undefined && { template: state.options.workerPrompt }) });
  return [...(state.system ? [{ role: 'system' as const, content: state.system }] : []), ...prompt.messages];
}

/**
 * Runs the agents by dataflow until nothing is in flight: a step starts as soon as the steps it
 * sees are done (never waiting for a level's other steps); once the workflow has ended (a
 * budget, a failure) nothing new starts, and the steps in flight are waited for and recorded.
 * It stops with every agent done, failed, or waiting for tool results (`tools`).
 */
export async function runSteps(state: StepsState, ctx: StepsContext): Promise<StepsRun> {
  const { workflowId, emit = () => {} } = ctx;
  const { workflow, schedule } = workflowOf(state);
  const req = ctx.request ?? {};
  const tools = req.tools && req.tools.length > 0 ? req.tools : undefined;
  const tally = { inputTokens: 0, outputTokens: 0, cost: 0n };
  let ended: WorkflowEnd | undefined;
  let failed: StepsRun['failed'];
  // the workflow's budget (options.maxUsd): no step starts once the Conductor and the agents have spent it
  const budget = budgetPico(state.options);
  const spent = (): bigint => parseUsd(state.base.conductorCost ?? '0') + state.agents.reduce((t, a) => t + parseUsd(a.cost), 0n);
  let budgetHit = state.agents.some((a) => a.finish === 'budget-tool-turns');
  const inFlight = new Map<number, Promise<{ i: number; o: StepOutcome; ms: number }>>();

  const callOf = (i: number): StepCall => {
    const a = state.agents[i]!;
    const worker = ctx.workerOf(i);
    a.turns += 1;
    const maxTokens = maxTokensOf(state.options, i === schedule.finalStep ? req.maxTokens : undefined);
    const request: ChatRequest = {
      messages: a.messages,
      ...(tools && { tools, ...(req.toolChoice !== undefined && { toolChoice: toolChoiceOf(req.toolChoice, a) }), ...(req.parallelToolCalls !== undefined && { parallelToolCalls: req.parallelToolCalls }) }),
      ...(req.temperature !== undefined && { temperature: req.temperature }),
      ...(maxTokens !== undefined && { maxTokens }),
      ...req.params,
    };
    if (worker.provider === 'replay' && state.itemId !== null) {
      // what the step reads: the answers of the steps it sees (all answered before it runs)
      const seenTokens = state.sees[i]!.reduce((n, j) => n + state.agents[j]!.tokensOut, 0);
      request.metadata = replayStepMetadata({ itemId: state.itemId, seed: state.seed, options: state.options, worker, sources: state.sources[i]!, seenTokens });
    }
    emit({ event: a.turns === 1 ? 'step.started' : 'step.continued', workflow: workflowId, step: i, worker: worker.name, turn: a.turns });
    return { workflowId, step: i, worker, request, agent: a, streamed: req.stream === true && i === schedule.finalStep };
  };

  for (;;) {
    if (!ended) {
      const launch: number[] = [];
      for (let i = 0; i < schedule.size; i++) {
        const a = state.agents[i]!;
        if (a.status === 'waiting' && schedule.inputs[i]!.every((j) => state.agents[j]!.status === 'done')) {
          a.messages = agentPrompt(state, workflow, i);
          a.status = 'call';
        }
        if (a.status === 'call' && !inFlight.has(i)) {
          if (overBudget(budget, spent())) {
            ended = 'budget-usd';
            break;
          }
          launch.push(i);
        }
      }
      if (!ended && launch.length > 0) {
        // the steps that became ready together are given to the runner together, each waited for on its own
        const t0 = Date.now();
        const outcomes = ctx.run(launch.map(callOf));
        launch.forEach((i, k) => inFlight.set(i, outcomes[k]!.then((o) => ({ i, o, ms: o.ms ?? Date.now() - t0 }))));
      }
    }
    if (inFlight.size === 0) break;
    const { i, o, ms } = await Promise.race(inFlight.values());
    inFlight.delete(i);
    const a = state.agents[i]!;
    const worker = ctx.workerOf(i);
    a.latencyMs += ms;
    if (!o.ok) {
      a.error = o.error;
      ended = 'step-error';
      // a provider's 400 is the request's (its tools, its parameters): the same request fails again; anything else can be tried again
      const resumable = ctx.resumable && a.error.code !== 'provider-bad-request';
      failed ??= { step: i, resumable };
      if (resumable) {
        // the same request again makes this call again, under a new key; the turn it was is taken again
        a.status = 'call';
        a.turns -= 1;
        a.attempt += 1;
      } else a.status = 'error';
      emit({ event: 'step.finished', workflow: workflowId, step: i, worker: worker.name, status: 'error', error: a.error.message });
      continue;
    }
    const r = o.result;
    a.attempt = 1;
    a.error = null;
    a.cached = o.cached === true || undefined;
    a.tokensIn += r.usage.inputTokens;
    a.tokensOut += r.usage.outputTokens;
    a.cost = formatUsd(parseUsd(a.cost) + o.cost);
    tally.inputTokens += r.usage.inputTokens;
    tally.outputTokens += r.usage.outputTokens;
    tally.cost += o.cost;
    const rep = r.providerMetadata?.['replay'];
    if (rep !== null && typeof rep === 'object') a.replay = rep as Record<string, unknown>;
    if (tools && r.toolCalls.length > 0) {
      const bounds = ctx.toolTurns ?? { perAgent: Infinity, perWorkflow: Infinity };
      if (a.toolTurns >= bounds.perAgent || state.toolTurns >= bounds.perWorkflow) {
        // past a bound: the step ends with what the agent wrote, and says why
        a.status = 'done';
        a.finish = 'budget-tool-turns';
        a.answer = r.text;
        budgetHit = true;
        emit({ event: 'step.finished', workflow: workflowId, step: i, worker: worker.name, status: 'done', finish: a.finish });
        continue;
      }
      if (!ctx.signCall) throw new Error(`workflow ${workflowId}: step ${i}'s agent asked for tools, but this path has no client to run them`);
      a.toolTurns += 1;
      state.toolTurns += 1;
      a.messages.push({
        role: 'assistant',
        content: [...(r.text ? [{ type: 'text' as const, text: r.text }] : []), ...r.toolCalls.map((c) => ({ type: 'tool-call' as const, id: c.id, name: c.name, arguments: c.arguments }))],
      });
      a.pending = r.toolCalls.map((c) => ({ id: ctx.signCall!(i, ++state.callSeq), agentCallId: c.id, name: c.name, arguments: c.arguments }));
      a.toolText = r.text;
      a.status = 'tools';
      emit({ event: 'step.tool_calls', workflow: workflowId, step: i, worker: worker.name, calls: a.pending.map((c) => ({ id: c.id, name: c.name })) });
      continue;
    }
    a.messages.push({ role: 'assistant', content: r.text });
    if (cutAtTokenBound(state.options, r.finishReason)) ended ??= 'budget-tokens';
    a.status = 'done';
    a.answer = r.text;
    a.finish = r.finishReason === 'length' ? 'length' : 'stop';
    emit({ event: 'step.finished', workflow: workflowId, step: i, worker: worker.name, status: 'done', finish: a.finish });
  }
  return { ended, failed, budgetHit, tally };
}

/** The workflow has ended: agents that could not run are skipped, agents that waited for tool results failed. */
export function endSteps(state: StepsState, ended: WorkflowEnd | undefined): void {
  for (const a of state.agents) {
    if (a.status === 'waiting' || a.status === 'call') a.status = 'skipped';
    if (a.status === 'tools') {
      a.status = 'error';
      a.error = { code: 'abandoned', message: ended === 'step-error' ? 'another step failed while this step waited for tool results' : `the workflow ended (${ended}) while this step waited for tool results` };
    }
  }
}

/** The workflow's finish reason once its steps have ended: what ended it; a final step that did not answer is `step-error`. */
export function finishOf(state: StepsState, run: Pick<StepsRun, 'ended' | 'budgetHit'>): WorkflowFinishReason {
  const { schedule } = workflowOf(state);
  return finishReasonOf(run.ended ?? (state.agents[schedule.finalStep]!.status === 'done' ? undefined : 'step-error'), run.budgetHit);
}

/** The steps' totals, as the workflow row's final write has them. */
export function stepTotals(state: StepsState): Pick<WorkflowFinish, 'workerTokensIn' | 'workerTokensOut' | 'workerCost'> {
  const t = state.agents.reduce((s, a) => ({ tin: s.tin + a.tokensIn, tout: s.tout + a.tokensOut, cost: s.cost + parseUsd(a.cost) }), { tin: 0, tout: 0, cost: 0n });
  return { workerTokensIn: t.tin, workerTokensOut: t.tout, workerCost: formatUsd(t.cost) };
}

/** The rows of the steps that have ended and were not written yet (marked written). */
export function endedStepRows(workflowId: number, state: StepsState): WorkflowStepRow[] {
  return state.agents.flatMap((a, i) => {
    if (a.saved || !(a.status === 'done' || a.status === 'error' || a.status === 'skipped')) return [];
    a.saved = true;
    const spec = state.specs[i]!;
    return [{
      workflowId, idx: i, workerId: state.workerIds[i]!, worker: spec.name, subtask: spec.subtask, access: spec.access, sees: state.sees[i]!,
      chatCallId: a.lastKey ?? `wf${workflowId}.s${i}`, status: a.status === 'done' ? 'ok' as const : a.status, answer: a.status === 'done' ? a.answer : null,
      tokensIn: a.tokensIn, tokensOut: a.tokensOut, cost: a.cost, latencyMs: a.latencyMs, cached: a.cached === true, replay: a.replay, error: a.error,
    }];
  });
}

/** A runner's failure as a step outcome (the error's wire form). */
export const failedOutcome = (e: unknown, ms?: number): StepOutcome => ({ ok: false, error: toWireError(e), ...(ms !== undefined && { ms }) });

/**
 * A replay worker's step request metadata: the item (`itemId`, as the replay store keys it) and
 * the replay step model's inputs (sources, the answers' tokens it reads, the worker's parameters).
 */
export function replayStepMetadata(o: {
  itemId: string; seed: number; options: Pick<WorkflowOptions, 'replay'>; worker: Pick<WorkerSpec, 'name' | 'model' | 'description' | 'size'>; sources: string[]; seenTokens: number;
}): Record<string, string> {
  const { sizeClass: _sizeClass, ...params } = workerReplayParams(o.options.replay, o.worker, normalizeSources(o.worker.name, o.sources).length);
  return { itemId: o.itemId, [REPLAY_STEP_METADATA]: encodeReplayStepRequest({ seed: o.seed, sources: o.sources, seenTokens: o.seenTokens, params }) };
}
