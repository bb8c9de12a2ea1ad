// fugu-ultra served: one request of a conversation is one turn of this state machine.
//
//   a user message last  -> a new workflow in the conversation: the Conductor writes, the
//                           workflow is parsed, and the agents (one per step) run;
//   tool results last    -> the workflow their ids name resumes: each result goes back to the
//                           agent that made the call, whose tool loop goes on.
//
// Either way the agents advance by dataflow (a step starts when the steps it sees are done) until
// nothing is in flight. Then, if some agents wait for tool results, their calls, merged into one
// assistant message with fugu's signed ids (ids.ts), are the answer, and the state (each agent's
// private transcript, pending calls, finished steps) is saved in Postgres: any gateway replica
// takes the next request. Otherwise the final step's answer is the answer and the workflow row is
// finished. Isolation: an agent's transcript holds its own prompt, tool calls and results; from
// other agents it reads only what its access list grants (their subtasks and final answers,
// through the worker prompt), never their tool traffic. Shared memory: a later workflow's agents
// are shown the conversation's earlier tool calls and results (memory.ts).
import { createHash, randomBytes } from 'node:crypto';
import {
  formatUsd, messageText, parseUsd, toWireError,
  type ChatMessage, type ChatRequest, type ChatResult, type FinishReason, type StreamEvent, type ToolCall, type ToolChoice, type ToolDefinition, type ToolResultPart, type Usage,
} from '@fugu/core';
import { PARSE_LIMITS, parseConductorSpec } from '@fugu/conductor';
import {
  expiredUltraSessions, finishWorkflow, getChatCalls, getUltraSession, getWorkflowByKey, insertUltraSession, insertWorkflows,
  nextConversationTurn, readToolMemory, reopenWorkflow, saveTurn, reserveWorkflowId, startConversationTurn,
  type Db, type NewConversationTurn, type StoredWorker, type UltraSession, type UltraSessionStatus, type WorkflowFinish, type WorkflowFinishReason, type WorkflowRow, type WorkflowStepSpec,
} from '@fugu/db';
import { isTransientError, notInDatasetMessage } from '@fugu/providers';
import type { Logger } from '@fugu/telemetry';
import { allowedWorkers, ConductorFailure, writerPool, writeWorkflow, type WriterDeps } from '../engine/execute.ts';
import {
  endedStepRows, endSteps, failedOutcome, finishOf, newStepsState, runSteps, stepTotals, workflowOf,
  type AgentStatus, type PendingCall, type StepCall, type StepOutcome, type StepsState,
} from '../engine/executor.ts';
import { planWorkflow } from '../engine/plan.ts';
import type { WorkflowOptions } from '../engine/options.ts';
import type { Hold, WorkflowHolds } from './holds.ts';
import { parseToolCallId, signToolCallId, verifyToolCallId } from './ids.ts';
import { renderToolMemory } from './memory.ts';
import type { InteractiveOptions } from './options.ts';

/**
 * A request the turn refuses or cannot serve: the gateway answers it with this status, param and
 * code. `cost`: what the request's calls cost before it failed (picodollars; a workflow that
 * failed at its third step paid for its Conductor and its first two), charged like an answer's.
 */
export class UltraRequestError extends Error {
  readonly status: 400 | 404 | 409 | 502 | 503;
  readonly param: string | null;
  readonly code: string;
  readonly cost: bigint;
  /** when to send the request again (seconds; a 409 for a workflow another request holds) */
  readonly retryAfterS: number | undefined;
  constructor(status: UltraRequestError['status'], message: string, opts: { param?: string | null; code: string; cost?: bigint; retryAfterS?: number }) {
    super(message);
    this.name = 'UltraRequestError';
    this.status = status;
    this.param = opts.param ?? null;
    this.code = opts.code;
    this.cost = opts.cost ?? 0n;
    this.retryAfterS = opts.retryAfterS;
  }
}

export type UltraDeploymentRef = {
  /** the model name (`fugu-ultra`) */
  name: string;
  /** the Conductor spec */
  conductor: string;
  poolId: number;
  /** the pool's workers, in pool order */
  workers: readonly StoredWorker[];
  options: InteractiveOptions;
};

export type ProviderStream = { events: AsyncIterator<StreamEvent>; cost(usage: Usage): Promise<bigint> };

export type InteractiveDeps = {
  db: Db;
  /** who writes (the engine's writers: fixed, policy, llm) */
  writer: WriterDeps;
  /** signs and verifies the tool-call ids the client sees */
  secret: Buffer;
  /** one model call of an agent (the gateway's call seam: rate limits, cache, cost, a chat_calls row keyed `key`) */
  call(worker: StoredWorker, req: ChatRequest, key: string): Promise<{ result: ChatResult; cost: bigint }>;
  /** the same, streamed (the final step when the client streams) */
  stream(worker: StoredWorker, req: ChatRequest, key: string): Promise<ProviderStream>;
  /** replay pools: the dataset item a question is (its id, as the replay store keys it) */
  itemOf?(question: string): string | undefined;
  log?: Logger;
  /**
   * the holds that let one request at a time advance a workflow (holds.ts: a lease in Redis that
   * its live holder renews every third of its time; a holder that died mid-step frees it within
   * that time), and this process's copies of the states it saved
   */
  holds: WorkflowHolds;
  /** a step's call on a connection error, 429 or 5xx: tried again this many times at most, backing off from baseMs (doubling, at most 2 s; a 429's retry-after when longer), within deadlineMs of its first try (default 5, 250 ms, 30 s) */
  retry?: { attempts: number; baseMs: number; deadlineMs: number };
};

const DEFAULT_RETRY = { attempts: 5, baseMs: 250, deadlineMs: 30_000 };
/** the longest wait between two tries of a step's call */
const MAX_BACKOFF_MS = 2_000;

export type TurnInput = {
  deployment: UltraDeploymentRef;
  /** the API key's id (null: no auth) */
  keyId: string | null;
  /** the pool workers this caller may use (pool order); a subset restricts every writer */
  workers: readonly string[];
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  temperature?: number;
  maxTokens?: number;
  /** an explicit conversation id (the Responses API's chain, or `fugu.conversation`): tool results must belong to it */
  conversation?: string;
  /** the id a new conversation takes when none is named or found in the history's tool calls (a new Responses API chain's) */
  newConversation?: string;
  /**
   * the new workflow's key, when the caller names it (a batch line: `<batch id>.<line>`); default
   * `ultra.<key id>/<conversation>.<turn>` (`ultra.<conversation>.<turn>` without auth), a new workflow each turn. A turn run again under the same key
   * (its process died) runs that workflow again from its start, whatever became of it: the same
   * workflow id, so its agents' calls have the same keys (`wf<id>.s<step>.t<turn>`), and a
   * caller whose calls are idempotent by key (chat-call jobs) pays for none of them twice.
   */
  workflowKey?: string;
  /**
   * the client's Idempotency-Key: the request sent again with it returns the stored answer (or
   * continues the workflow where it stopped), as the same tool results sent again do
   */
  idempotencyKey?: string;
  /**
   * false: a step that still fails after its call's retries ends the workflow (a Batch API line,
   * whose error goes to the error file). Default: the workflow waits, and the same request sent
   * again continues from the failed step
   */
  resumable?: boolean;
  /** false: this turn's agents are not shown the conversation's earlier tool traffic */
  sharedMemory?: boolean;
  /**
   * false: every agent's tool call reaches the client as its own call. Default: calls of one
   * answer with the same name and arguments are one client-visible call, whose result goes back
   * to every agent that made it (a side-effecting tool runs once)
   */
  mergeToolCalls?: boolean;
  seed?: number;
  /** the request's other step-level parameters (stop, top_p, response_format, ...): every step's call gets them, over the fields above */
  params?: Partial<ChatRequest>;
  /** stream the final step's tokens (TurnEvent text-delta) */
  stream: boolean;
};

export type TurnEvent = { type: 'progress'; progress: Record<string, unknown> } | { type: 'text-delta'; text: string };

type Tally = { inputTokens: number; outputTokens: number; cost: bigint };

export type TurnStep = { step: number; worker: string; access: WorkflowStepSpec['access']; status: AgentStatus; toolTurns: number; finish: string | null };

export type TurnResult = {
  workflowId: number;
  conversationId: string;
  /** tools: the answer is tool calls the workflow waits for; done / failed: the workflow ended */
  status: 'tools' | 'done' | 'failed';
  text: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  /** the workflow's finish reason once it ended */
  workflowFinish: WorkflowFinishReason | null;
  /** the worker of the final step (done), or of the first agent waiting for tools */
  worker: string;
  /** what this request spent: the Conductor's writing (its first request only) and the agents' calls */
  usage: { conductor: Tally; workers: Tally };
  steps: TurnStep[];
  topology: string;
  conductor: string;
  /** the stored answer of the same request sent before (tool results, an Idempotency-Key): its calls were charged then */
  replayed: boolean;
};

// ---- the durable state --------------------------------------------------------------------

/** A turn's answer as stored with the state (v2): the same request sent again gets it back. */
type StoredReply = Omit<TurnResult, 'usage' | 'replayed'> & { usage: { conductor: TallyJson; workers: TallyJson } };
type TallyJson = { inputTokens: number; outputTokens: number; cost: string };

/** A served workflow's durable state: the executor's, with the conversation's fields. */
type SessionState = StepsState & {
  v: 2;
  conductor: string;
  conversationId: string;
  keyId: string | null;
  startedAt: number;
  /** the answers of the latest turns by their request's print (requestPrint), newest last (v2) */
  replies: Array<{ print: string; reply: StoredReply }>;
  /** the print of a request whose turn failed at a step: sent again, it continues from that step (v2) */
  resume: string | null;
};

/**
 * The state versions this release reads: its own and the previous one (a rolling deploy's older
 * replicas saved v1; the OpenAI Agents SDK's SUPPORTED_SCHEMA_VERSIONS habit). It writes v2.
 */
export const SUPPORTED_STATE_VERSIONS = [1, 2] as const;
const CURRENT_STATE = 2;
/** the stored answers kept per workflow */
const KEPT_REPLIES = 4;

// ---- the turn --------------------------------------------------------------------------------

/** One request of fugu-ultra: a new workflow, or the tool results of a waiting one. */
export async function runTurn(deps: InteractiveDeps, input: TurnInput, emit: (e: TurnEvent) => void = () => {}): Promise<TurnResult> {
  // the sweep of overdue workflows: at most once every few seconds per process (a request that comes late ends its own)
  if (Date.now() - lastSweep >= SWEEP_EVERY_MS) {
    lastSweep = Date.now();
    await expireSessions(deps).catch((e: unknown) => deps.log?.warn({ err: (e as Error).message }, 'fugu-ultra: could not end the workflows past their tool deadline'));
  }
  const results = trailingToolResults(input.messages);
  if (results.length > 0) return continueTurn(deps, input, results, emit);
  if (input.idempotencyKey !== undefined && input.workflowKey === undefined) return idempotentTurn(deps, input, emit);
  return startTurn(deps, input, emit);
}

const SWEEP_EVERY_MS = 5_000;
let lastSweep = 0;

/** The print of a turn's first request (a user message last): one per workflow. */
const START_PRINT = 'start';

/** What identifies a results request: its tool results (ids and contents). The same results sent again are the same request. */
function resultsPrint(results: ReadonlyArray<ToolResultPart>): string {
  const h = createHash('sha256');
  for (const r of [...results].sort((a, b) => (a.toolCallId < b.toolCallId ? -1 : a.toolCallId > b.toolCallId ? 1 : 0))) {
    h.update(`${r.toolCallId}\u0000${r.isError ? 1 : 0}\u0000${r.content}\u0000`);
  }
  return `results:${h.digest('base64url')}`;
}

/**
 * A new workflow keyed by the client's Idempotency-Key (per API key): the first request runs it;
 * the same key again gets its stored answer, waits (409 with Retry-After) while another request
 * holds it, takes it over where its holder died, or continues it from a failed step.
 */
async function idempotentTurn(deps: InteractiveDeps, input: TurnInput, emit: (e: TurnEvent) => void): Promise<TurnResult> {
  const key = `idem.${input.keyId ?? 'none'}.${createHash('sha256').update(input.idempotencyKey!).digest('base64url')}`;
  const row = await getWorkflowByKey(deps.db, key);
  const read = row && (deps.holds.cached(row.id) ?? (await getUltraSession(deps.db, row.id)));
  // never written (or its writer died before the workflow was): run it (again) from its start
  if (!read) return startTurn(deps, { ...input, workflowKey: key }, emit);
  return withHold(deps, read, (s, claim) => resumeTurn(deps, input, s, START_PRINT, emit, claim));
}

/** A request's claim on a workflow: its hold (`advanced`: it went on to advance the workflow), or how long another request still holds it. */
type Claim = { hold: Hold; advanced: boolean } | { busyMs: number };

/**
 * Runs `f` with the workflow of the session `read` held by this request (or busy), on the session
 * as it is now: `read` when it is the newest version and no holder left it unsaved, else read
 * again. A request that did not go on to advance the workflow gives it back as it found it.
 */
async function withHold<T>(deps: InteractiveDeps, read: UltraSession, f: (s: UltraSession, claim: Claim) => Promise<T>): Promise<T> {
  const taken = await takeHold(deps, read.workflowId);
  // (busy: its stored answers as they are now)
  if ('busyMs' in taken) return f((await getUltraSession(deps.db, read.workflowId)) ?? read, taken);
  const claim = { hold: taken, advanced: false };
  try {
    const current = !taken.takeover && taken.version === read.version ? read : await getUltraSession(deps.db, read.workflowId);
    return await f(current ?? read, claim);
  } finally {
    if (!claim.advanced) await taken.release({ advanced: false });
  }
}

/** The workflow's hold for this request (or how long another holds it); a 503 when the holds' store (Redis) does not answer. */
async function takeHold(deps: Pick<InteractiveDeps, 'holds' | 'log'>, workflowId: number): Promise<Hold | { busyMs: number }> {
  try {
    return await deps.holds.take(workflowId);
  } catch (e) {
    deps.log?.warn({ workflow: workflowId, err: (e as Error).message }, 'fugu-ultra: the holds (Redis) did not answer');
    throw new UltraRequestError(503, `fugu-ultra could not take workflow ${workflowId} for this request: the store of its holds (Redis) did not answer; send the request again`, {
      code: 'service_unavailable', retryAfterS: 1,
    });
  }
}

/** A 409 for a workflow another request holds: when its lease ends (its holder renews it while it lives) is when to ask again. */
function busy(workflowId: number, busyMs: number): UltraRequestError {
  const left = Math.max(1, Math.ceil(busyMs / 1000));
  return new UltraRequestError(409, `workflow ${workflowId} is being continued by another request; send this request again in ${left} s (it then gets that request's answer, or takes the workflow over if its holder has died)`, {
    code: 'workflow_busy', retryAfterS: left,
  });
}

/**
 * A request for a workflow that already has state: the stored answer when this request (its
 * print) was answered before; a 409 while another request holds it; else the workflow taken
 * (from waiting, or from a holder whose lease lapsed) and advanced: `apply` gives the agents this
 * request's tool results, unless the request resumes a turn that failed at a step.
 */
async function resumeTurn(
  deps: InteractiveDeps, input: TurnInput, s: UltraSession, print: string, emit: (e: TurnEvent) => void, claim: Claim, apply?: (state: SessionState) => MemoryEntry[],
): Promise<TurnResult> {
  const state = readState(s);
  const stored = state.replies.find((r) => r.print === print);
  if (stored) return replayOf(stored.reply);
  if ('busyMs' in claim) throw busy(s.workflowId, claim.busyMs);
  const resuming = state.resume === print || (s.status === 'running' && print === START_PRINT);
  if (!resuming && !apply) throw bad(`this Idempotency-Key's request was answered by workflow ${s.workflowId}, whose answer is no longer kept`, null, 'idempotency_key_reused');
  if (resuming && s.status !== 'tools' && s.status !== 'running') {
    throw bad(`workflow ${s.workflowId} has ended (${s.status}); send the question again`, 'messages', 'tool_call_already_answered');
  }
  claim.advanced = true;
  // a holder before this one that left it unsaved, or a first request that never saved it (status running): its completed calls are reused
  const takeover = claim.hold.takeover || s.status === 'running';
  const memory = resuming ? [] : apply!(state);
  const results = trailingToolResults(input.messages).length;
  // final_worker: the final step's (the last), whose tokens a streamed answer carries (the gateway's x-fugu-worker)
  emit({
    type: 'progress',
    progress: { event: 'workflow.resumed', workflow: s.workflowId, conversation: state.conversationId, final_worker: state.specs.at(-1)!.name, ...(results > 0 && { results }), ...(takeover && { takeover: true }) },
  });
  return advance(deps, input, { workflowId: s.workflowId, version: s.version, stored: true, hold: claim.hold }, state, { inputTokens: 0, outputTokens: 0, cost: 0n }, emit, { print, takeover, memory });
}

function replayOf(r: StoredReply): TurnResult {
  const tally = (t: TallyJson): Tally => ({ inputTokens: t.inputTokens, outputTokens: t.outputTokens, cost: parseUsd(t.cost) });
  return { ...r, usage: { conductor: tally(r.usage.conductor), workers: tally(r.usage.workers) }, replayed: true };
}

/** Keeps a turn's answer with the state (the newest KEPT_REPLIES). */
function remember(state: SessionState, print: string, t: TurnResult): void {
  const json = (x: Tally): TallyJson => ({ inputTokens: x.inputTokens, outputTokens: x.outputTokens, cost: formatUsd(x.cost) });
  const { usage, replayed: _replayed, ...rest } = t;
  state.replies = [...state.replies.filter((r) => r.print !== print), { print, reply: { ...rest, usage: { conductor: json(usage.conductor), workers: json(usage.workers) } } }].slice(-KEPT_REPLIES);
  state.resume = null;
}

/**
 * The tool results the messages end with (after the last assistant message), with their message
 * index. System messages among or after them do not end them: a client may put a system turn
 * after the results (Claude Code's mid-conversation system turns), which is no new user turn.
 */
function trailingToolResults(messages: readonly ChatMessage[]): Array<ToolResultPart & { at: number }> {
  const out: Array<ToolResultPart & { at: number }> = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role === 'system') continue;
    if (m.role !== 'tool') break;
    for (const p of m.content) out.unshift({ ...p, at: i });
  }
  return out;
}

const bad = (message: string, param: string | null, code = 'invalid_value'): UltraRequestError => new UltraRequestError(400, message, { param, code });

async function startTurn(deps: InteractiveDeps, input: TurnInput, emit: (e: TurnEvent) => void): Promise<TurnResult> {
  const { db } = deps;
  const began = new Date();
  const d = input.deployment;
  const lastUserAt = input.messages.findLastIndex((m) => m.role === 'user');
  if (lastUserAt < 0) throw bad('a fugu-ultra conversation needs a user message (or the results of its tool calls last)', 'messages');
  const question = messageText(input.messages[lastUserAt]!).trim();
  if (question === '') throw bad('the last user message is empty', `messages[${lastUserAt}].content`);
  // the workflow row's seed is a 32-bit integer (chat completions' own seed may be any integer)
  if (input.seed !== undefined && !(Number.isInteger(input.seed) && input.seed >= -(2 ** 31) && input.seed < 2 ** 31)) {
    throw bad(`seed: ${input.seed} is out of range for fugu-ultra: a workflow's seed is a 32-bit integer (-2147483648 to 2147483647)`, 'seed');
  }

  const continued = input.conversation ?? (await conversationOfHistory(deps, input));
  const conversationId = continued ?? input.newConversation ?? `conv_${randomBytes(12).toString('base64url')}`;
  const restricted = input.workers.length < d.workers.length;
  const options: WorkflowOptions = { ...d.options.workflow, ...(restricted && { workers: [...input.workers] }) };
  const seed = input.seed ?? 0;
  // replay workers answer only the questions of their dataset: on a replay pool (itemOf; the
  // gateway has one on the LLMRouter pool, all replay workers), a question that is not one is
  // refused before any call or row (else its first step would fail, quoting its agent's prompt)
  const itemId = deps.itemOf?.(question);
  if (deps.itemOf && itemId === undefined && d.workers.filter((w) => options.workers?.includes(w.name) ?? true).every((w) => w.provider === 'replay')) {
    throw new UltraRequestError(400, notInDatasetMessage(question, "fugu-ultra's workers here are replay workers, and a replay worker"), { param: `messages[${lastUserAt}].content`, code: 'provider_bad_request' });
  }
  const fields = { poolId: d.poolId, question, conductor: d.conductor, seed, options: options as Record<string, unknown> };
  // the key's own conversation of that id (another key's of the same id is another conversation)
  let row: WrittenRow | undefined;
  let turn: number;
  // a new conversation's rows, made by its turn's end (persist), in that one statement
  let create: NewConversationTurn | undefined;
  if (input.workflowKey === undefined) {
    // the conversation's turn and its workflow, claimed, in one statement
    const start = { conversationId, keyId: input.keyId, keyPrefix: `ultra.${input.keyId === null ? '' : `${input.keyId}/`}${conversationId}.`, workflow: fields };
    if (continued === undefined) {
      // a new conversation (its id made here or by the Responses API for this response): no other
      // request can reach it before its first turn ends, which writes its rows, under a reserved id
      const id = await reserveWorkflowId(db);
      create = { ...start, id, startedAt: began };
      row = { id, question, conductor: d.conductor, seed };
      turn = 1;
    } else ({ row, turn } = await startConversationTurn(db, start));
  } else {
    // a workflow the caller names (a batch line, an Idempotency-Key): run (again) from its start
    turn = await nextConversationTurn(db, conversationId, input.keyId);
    const [id] = await insertWorkflows(db, [{ key: input.workflowKey, ...fields }]);
    row = await reopenWorkflow(db, id!);
  }
  if (!row) throw new UltraRequestError(409, `workflow ${input.workflowKey} is already running`, { code: 'workflow_busy' });
  const workflowId = row.id;

  // the conductor writes for the latest question
  const workers = d.workers;
  let pool;
  let out;
  try {
    pool = writerPool(allowedWorkers(workers, options));
    out = await writeWorkflow(deps.writer, row, options, workers, pool, undefined);
  } catch (e) {
    if (!(e instanceof ConductorFailure)) throw e;
    await failedTurn(db, workflowId, create, { status: 'failed', finishReason: 'conductor-error', outcome: 'unanswered', error: { ...e.wire, message: e.message } });
    throw new UltraRequestError(502, `the Conductor (${d.conductor}) could not write a workflow: ${e.message}`, { code: 'conductor_error' });
  }
  const conductorTally: Tally = { inputTokens: out.usage?.inputTokens ?? 0, outputTokens: out.usage?.outputTokens ?? 0, cost: out.costPico ?? 0n };
  const plan = planWorkflow(out, pool, options.maxSteps);
  if (!plan.ok) {
    await failedTurn(db, workflowId, create, { ...plan.base, status: 'failed', finishReason: 'parse-error', parseOk: false, parseError: { ...plan.error }, outcome: 'unanswered' });
    if (parseConductorSpec(d.conductor).kind !== 'llm' && out.text.length > PARSE_LIMITS.listChars) {
      // a writer that renders its workflow (fixed:, policy:) fails only at the parser's limits: it repeats the message in every subtask
      throw new UltraRequestError(
        400,
        `the message (${question.length} characters) is too long for fugu-ultra's Conductor (${d.conductor}): its workflow repeats the message in every step's subtask, ${out.text.length} characters, past the ${PARSE_LIMITS.listChars} a workflow list may have (${plan.error.message}); send a shorter message`,
        { param: `messages[${lastUserAt}].content`, code: 'context_length_exceeded', cost: conductorTally.cost },
      );
    }
    throw new UltraRequestError(502, `the Conductor (${d.conductor}) wrote no valid workflow: ${plan.error.message}`, { code: 'conductor_error', cost: conductorTally.cost });
  }
  const { schedule, specs } = plan;

  // what every agent is told: the conversation so far, and what earlier workflows' tools found
  // (a conversation's first turn has none)
  const memory = d.options.sharedMemory && input.sharedMemory !== false && turn > 1 ? await readToolMemory(db, conversationId, input.keyId, d.options.memoryMaxEntries) : undefined;
  const memoryText = memory ? renderToolMemory(memory.entries, memory.total, { maxEntries: d.options.memoryMaxEntries, maxChars: d.options.memoryMaxChars }) : '';
  const task = [conversationText(input.messages, lastUserAt), memoryText].filter((t) => t !== '').join('\n\n');
  const system = input.messages.filter((m) => m.role === 'system').map((m) => messageText(m)).join('\n\n');

  const state: SessionState = {
    ...newStepsState(plan, { task, system, workers, itemId: itemId ?? null, seed, options }),
    v: CURRENT_STATE, conductor: d.conductor, conversationId, keyId: input.keyId, startedAt: Date.now(), replies: [], resume: null,
  };
  // the state is written when the turn ends (one statement with the steps and the workflow's
  // end): until then no other request can reach this workflow, except one the caller named by
  // key (a batch line run again, an Idempotency-Key sent again), which finds its state at once
  const early = input.workflowKey !== undefined;
  let hold: Hold | undefined;
  let version = 0;
  if (early) {
    // held from before its state is written, when another request can come for it (an
    // Idempotency-Key sent again); a batch line's is run by one request at a time (reopenWorkflow)
    if (input.idempotencyKey !== undefined) {
      const taken = await takeHold(deps, workflowId);
      if ('busyMs' in taken) throw busy(workflowId, taken.busyMs);
      hold = taken;
    }
    try {
      version = await insertUltraSession(db, { workflowId, conversationId, apiKeyId: input.keyId, status: 'running', state, deadlineAt: null }, { replace: true });
    } catch (e) {
      await hold?.release({ advanced: false });
      throw e;
    }
  }
  emit({
    type: 'progress',
    progress: { event: 'workflow.written', workflow: workflowId, conversation: conversationId, conductor: d.conductor, topology: schedule.topology, steps: specs.map((s, i) => ({ step: i, worker: s.name, access: s.access })) },
  });
  return advance(deps, input, { workflowId, version, stored: early, ...(hold && { hold }), ...(create && { create }) }, state, conductorTally, emit, { print: START_PRINT, takeover: false });
}

/** A turn that ended before its agents ran (its Conductor failed): its workflow's final write, in the statement that makes its rows when they are not made yet. */
async function failedTurn(db: Db, workflowId: number, create: NewConversationTurn | undefined, finish: WorkflowFinish): Promise<void> {
  if (create) await startConversationTurn(db, create, finish);
  else await finishWorkflow(db, workflowId, finish);
}

async function continueTurn(deps: InteractiveDeps, input: TurnInput, results: Array<ToolResultPart & { at: number }>, emit: (e: TurnEvent) => void): Promise<TurnResult> {
  const { db } = deps;
  const refs = results.map((r) => ({ r, p: parseToolCallId(r.toolCallId) }));
  const foreign = refs.find((x) => !x.p);
  if (foreign) throw bad(`tool_call_id "${foreign.r.toolCallId}" answers no call that fugu-ultra made (its ids start with call_fu_)`, `messages[${foreign.r.at}].tool_call_id`, 'invalid_tool_call_id');
  const workflowId = refs[0]!.p!.workflowId;
  const other = refs.find((x) => x.p!.workflowId !== workflowId);
  if (other) throw bad(`tool_call_id "${other.r.toolCallId}" belongs to another workflow than "${refs[0]!.r.toolCallId}": send the results of one assistant message at a time`, `messages[${other.r.at}].tool_call_id`, 'invalid_tool_call_id');
  // the session as this gateway saved it last, when these results answer the calls it waits for
  // (else it is not the newest: a replica of the previous release, which does not tell Redis what
  // it saved, moved it on), else as stored; whose it is is checked before the workflow is taken
  // (a forged id takes no other key's workflow)
  const cached = deps.holds.cached(workflowId);
  const read = cached && answersPending(cached, results) ? cached : await getUltraSession(db, workflowId);
  for (const { r } of refs) {
    if (!read || read.apiKeyId !== input.keyId || !verifyToolCallId(deps.secret, input.keyId, read.conversationId, r.toolCallId)) {
      throw bad(`tool_call_id "${r.toolCallId}" was not issued to this API key (or was altered)`, `messages[${r.at}].tool_call_id`, 'invalid_tool_call_id');
    }
  }
  // an explicit conversation (the Responses API's chain, fugu.conversation) must be the workflow's own
  if (input.conversation !== undefined && input.conversation !== read!.conversationId) {
    const r = refs[0]!.r;
    throw bad(`tool_call_id "${r.toolCallId}" belongs to another conversation than "${input.conversation}"`, `messages[${r.at}].tool_call_id`, 'invalid_tool_call_id');
  }
  return withHold(deps, read!, (s, claim) => checkResults(deps, input, refs, results, s, claim, emit));
}

/** Whether `results` answer exactly the calls the session's agents wait for (as sent to the client: merged calls once). */
function answersPending(s: UltraSession, results: ReadonlyArray<ToolResultPart>): boolean {
  // (the state as stored: its agents' pending calls are the same in every version this release reads)
  const st = s.state as Partial<Pick<SessionState, 'v' | 'agents'>>;
  if (s.status !== 'tools' || !(SUPPORTED_STATE_VERSIONS as readonly number[]).includes(st.v ?? -1) || !st.agents) return false;
  const pending = new Set(st.agents.flatMap((a) => a.pending.flatMap((c) => (c.alias === undefined ? [c.id] : []))));
  return pending.size === results.length && results.every((r) => pending.has(r.toolCallId));
}

/**
 * The checks of a results request on the workflow's session, of this API key (`claim`: this
 * request's hold, or how long another request holds it), then the turn: the stored answer of the
 * same results, or the agents given the results and advanced.
 */
async function checkResults(
  deps: InteractiveDeps, input: TurnInput, refs: Array<{ r: ToolResultPart & { at: number }; p: ReturnType<typeof parseToolCallId> }>, results: Array<ToolResultPart & { at: number }>,
  s: UltraSession, claim: Claim, emit: (e: TurnEvent) => void,
): Promise<TurnResult> {
  const workflowId = refs[0]!.p!.workflowId;
  const state = readState(s);
  // a valid signature on a call the workflow never made (a step it does not have, a sequence number past the last it issued)
  const unmade = refs.find(({ p }) => p!.step >= state.agents.length || p!.seq < 1 || p!.seq > state.callSeq);
  if (unmade) {
    throw bad(`tool_call_id "${unmade.r.toolCallId}" answers no call workflow ${workflowId} made (it has made ${state.callSeq} tool call${state.callSeq === 1 ? '' : 's'})`, `messages[${unmade.r.at}].tool_call_id`, 'invalid_tool_call_id');
  }
  const print = resultsPrint(results);
  // the same results sent again (a client that gave up on the answer, an SDK's retry): the stored answer
  if (state.replies.some((r) => r.print === print) || state.resume === print) return resumeTurn(deps, input, s, print, emit, claim);
  if ('busyMs' in claim) throw busy(workflowId, claim.busyMs);
  // the calls the client was sent (a merged call answers the agents' identical ones too)
  const pending = new Map(state.agents.flatMap((a) => a.pending.flatMap((c) => (c.alias === undefined ? [[c.id, c] as const] : []))));
  const late = s.status === 'tools' && s.deadlineAt !== null && s.deadlineAt.getTime() < Date.now();
  if (late) {
    claim.advanced = true;
    await expireSession(deps, s, claim.hold);
  }
  if (late || (s.status === 'failed' && state.agents.some((a) => a.finish === 'tool-timeout'))) {
    throw bad(`the results of workflow ${workflowId}'s tool calls were due by ${s.deadlineAt?.toISOString() ?? 'its deadline'}; the workflow ended (tool-timeout): send the question again`, 'messages', 'tool_results_late');
  }
  if (s.status === 'done' || s.status === 'failed' || pending.size === 0) {
    const r = refs[0]!.r;
    throw bad(`tool_call_id "${r.toolCallId}" was already answered: workflow ${workflowId} ${s.status === 'done' || s.status === 'failed' ? 'has ended' : 'has moved on'}`, `messages[${r.at}].tool_call_id`, 'tool_call_already_answered');
  }
  const given = new Map<string, ToolResultPart & { at: number }>();
  for (const { r } of refs) {
    if (!pending.has(r.toolCallId)) throw bad(`tool_call_id "${r.toolCallId}" was already answered (workflow ${workflowId} waits for ${[...pending.keys()].join(', ')})`, `messages[${r.at}].tool_call_id`, 'tool_call_already_answered');
    if (given.has(r.toolCallId)) throw bad(`tool_call_id "${r.toolCallId}" is answered twice`, `messages[${r.at}].tool_call_id`, 'invalid_tool_call_id');
    given.set(r.toolCallId, r);
  }
  const missing = [...pending.keys()].filter((id) => !given.has(id));
  if (missing.length > 0) {
    throw bad(`workflow ${workflowId} waits for the result of every tool call of its message; missing: ${missing.join(', ')}`, 'messages', 'missing_tool_results');
  }
  // each result goes back to the agent that made the call, under that agent's own call id
  return resumeTurn(deps, input, s, print, emit, claim, (st) => {
    const memory: MemoryEntry[] = [];
    st.agents.forEach((a, i) => {
      if (a.status !== 'tools') return;
      a.messages.push({
        role: 'tool',
        content: a.pending.map((c) => {
          const r = given.get(c.alias ?? c.id)!;
          // shared memory records a merged call once
          if (c.alias === undefined) memory.push({ workflowId, step: i, name: c.name, arguments: c.arguments, result: r.content, callId: c.id });
          return { type: 'tool-result' as const, toolCallId: c.agentCallId, name: c.name, content: r.content, ...(r.isError && { isError: true }) };
        }),
      });
      a.pending = [];
      a.status = 'call';
    });
    // appended with the turn's end (idempotent by call id: a request that takes the workflow over appends nothing twice)
    return input.deployment.options.sharedMemory ? memory : [];
  });
}

/** `memory`: the shared-memory entries of the tool results this request gave, appended when its turn ends */
type Advance = { print: string; takeover: boolean; memory?: MemoryEntry[] };
type MemoryEntry = { workflowId: number; step: number; name: string; arguments: string; result: string; callId: string };
/**
 * The workflow a request advances: its state's version as this request has it; `stored`: the
 * state has a row (else the turn's end inserts it: no other request can reach it before); `hold`:
 * this request's hold on it (a batch line's has none: reopenWorkflow lets one request run it);
 * `create`: its conversation's turn and its workflow's row are not made yet either (a new
 * conversation's first turn: the turn's end makes them). `released`: the turn's end gave the hold back.
 */
type At = { workflowId: number; version: number; stored: boolean; hold?: Hold; create?: NewConversationTurn; released?: boolean };
/** What the Conductor reads of a workflow's row */
type WrittenRow = Pick<WorkflowRow, 'id' | 'question' | 'conductor' | 'seed'>;

/**
 * Runs the agents until nothing is in flight; saves the state; answers with tool calls or the
 * final answer. While it runs, the request renews its lease on the workflow (a heartbeat every
 * third of the lease); a request that took the workflow over from a dead holder (`takeover`)
 * reuses each call the holder had completed (its row, by its deterministic key).
 */
async function advance(deps: InteractiveDeps, input: TurnInput, at: At, state: SessionState, conductor: Tally, emit: (e: TurnEvent) => void, opts: Advance): Promise<TurnResult> {
  // a state not yet written (a new workflow's first turn) has no hold to renew: no other request can reach it; nor has a batch line's
  const hold = at.hold;
  if (!hold) return runAgents(deps, input, at, state, conductor, emit, opts);
  const beat = setInterval(() => {
    hold.renew().then(
      (held) => held || deps.log?.warn({ workflow: at.workflowId }, 'fugu-ultra: the lease of a workflow lapsed (another request may take it over)'),
      (e: unknown) => deps.log?.warn({ workflow: at.workflowId, err: (e as Error).message }, 'fugu-ultra: could not renew the lease of a workflow'),
    );
  }, Math.max(100, Math.floor(deps.holds.leaseMs / 3)));
  beat.unref();
  try {
    return await runAgents(deps, input, at, state, conductor, emit, opts);
  } finally {
    clearInterval(beat);
    // a turn that ended before it saved (an error): its calls are reused by the next request, which takes it over at once
    if (!at.released) await hold.release({ advanced: true });
  }
}

/**
 * The calls the client is sent: the agents' pending calls, each of those with the name and
 * arguments (compared as JSON, keys in any order) of an earlier one answered by it (`alias`).
 */
function clientCalls(pending: PendingCall[], merge: boolean): ToolCall[] {
  const first = new Map<string, string>();
  const out: ToolCall[] = [];
  for (const c of pending) {
    const same = `${c.name}\u0000${canonicalJson(c.arguments)}`;
    const alias = merge ? first.get(same) : undefined;
    if (alias !== undefined) {
      c.alias = alias;
      continue;
    }
    delete c.alias;
    first.set(same, c.id);
    out.push({ id: c.id, name: c.name, arguments: c.arguments });
  }
  return out;
}

/** A JSON text with its objects' keys sorted (the text itself when it is not JSON). */
function canonicalJson(text: string): string {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sorted) : v !== null && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])])) : v;
  try {
    return JSON.stringify(sorted(JSON.parse(text)));
  } catch {
    return text;
  }
}

/** The key of an agent's call: deterministic from the state, so a request that takes the workflow over finds the calls its holder made. */
const callKey = (workflowId: number, step: number, turn: number, attempt: number): string => `wf${workflowId}.s${step}.t${turn}${attempt > 1 ? `.a${attempt}` : ''}`;

async function runAgents(deps: InteractiveDeps, input: TurnInput, at: At, state: SessionState, conductor: Tally, emit: (e: TurnEvent) => void, opts: Advance): Promise<TurnResult> {
  const { db } = deps;
  const d = input.deployment;
  const { workflowId } = at;
  const { schedule } = workflowOf(state);
  const byId = new Map(d.workers.map((w) => [w.id, w]));
  const workerOf = (i: number): StoredWorker => {
    const w = byId.get(state.workerIds[i]!);
    if (!w) throw new UltraRequestError(503, `workflow ${workflowId}'s step ${i} runs on worker ${state.specs[i]!.name}, which this gateway's pool no longer has`, { code: 'worker_unavailable' });
    return w;
  };
  const retry = deps.retry ?? DEFAULT_RETRY;

  /** The served step runner: an agent's call through the gateway's seam; the holder's completed call when taking over; tried again on a transient error. */
  const callAgent = async ({ step: i, worker, request: req, agent: a, streamed }: StepCall): Promise<StepOutcome> => {
    if (opts.takeover) {
      // the calls its holder made of this turn (the next tries' keys too: a holder may have tried again)
      const tries = [0, 1, 2, 3].map((k) => a.attempt + k);
      const rows = new Map((await getChatCalls(db, tries.map((n) => callKey(workflowId, i, a.turns, n)))).map((r) => [r.key, r]));
      const done = tries.find((n) => rows.get(callKey(workflowId, i, a.turns, n))?.status === 'ok');
      if (done !== undefined) {
        const prior = rows.get(callKey(workflowId, i, a.turns, done))!;
        a.attempt = done;
        a.lastKey = prior.key;
        const result = prior.response as unknown as ChatResult;
        if (streamed && result.text) emit({ type: 'text-delta', text: result.text });
        return { ok: true, result, cost: parseUsd(prior.cost) };
      }
      // failed, or in flight when its holder died (no row): one more call, under its own key (both rows kept)
      a.attempt = Math.max(a.attempt, ...tries.filter((n) => rows.has(callKey(workflowId, i, a.turns, n)))) + 1;
    }
    const t0 = Date.now();
    for (let n = 1; ; n++) {
      const key = callKey(workflowId, i, a.turns, a.attempt);
      a.lastKey = key;
      let emitted = false;
      try {
        const o = await (streamed
          ? streamCall(deps, worker, req, key, (text) => {
            emitted = true;
            emit({ type: 'text-delta', text });
          })
          : deps.call(worker, req, key));
        return { ok: true, result: o.result, cost: o.cost };
      } catch (e) {
        const wait = Math.max(Math.min(MAX_BACKOFF_MS, retry.baseMs * 2 ** (n - 1)), (e as { retryAfterMs?: number }).retryAfterMs ?? 0);
        if (!isTransientError(e) || emitted || n > retry.attempts || Date.now() - t0 + wait > retry.deadlineMs) return failedOutcome(e);
        emit({ type: 'progress', progress: { event: 'step.retry', workflow: workflowId, step: i, worker: worker.name, attempt: a.attempt + 1, error: toWireError(e).message } });
        a.attempt += 1;
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  };

  const { ended, failed, budgetHit, tally: workers } = await runSteps(state, {
    workflowId, workerOf, run: (calls) => calls.map(callAgent), resumable: input.resumable !== false,
    request: {
      ...(input.tools && { tools: input.tools }),
      ...(input.toolChoice !== undefined && { toolChoice: input.toolChoice }),
      ...(input.parallelToolCalls !== undefined && { parallelToolCalls: input.parallelToolCalls }),
      ...(input.temperature !== undefined && { temperature: input.temperature }),
      ...(input.maxTokens !== undefined && { maxTokens: input.maxTokens }),
      ...(input.params && { params: input.params }),
      stream: input.stream,
    },
    toolTurns: { perAgent: d.options.maxToolTurnsPerAgent, perWorkflow: d.options.maxToolTurnsPerWorkflow },
    signCall: (step, seq) => signToolCallId(deps.secret, state.keyId, state.conversationId, { workflowId, step, seq }),
    emit: (progress) => emit({ type: 'progress', progress }),
  });

  const waiting = state.agents.flatMap((a, i) => (a.status === 'tools' ? [i] : []));
  const steps = (): TurnStep[] => state.agents.map((a, i) => ({ step: i, worker: state.specs[i]!.name, access: state.specs[i]!.access, status: a.status, toolTurns: a.toolTurns, finish: a.finish }));
  const common = { workflowId, conversationId: state.conversationId, usage: { conductor, workers }, topology: state.base.topology ?? 'single', conductor: state.conductor, replayed: false };
  const lost = (): UltraRequestError => new UltraRequestError(409, `workflow ${workflowId} was taken by another request while this one ran`, { code: 'workflow_busy', retryAfterS: 1 });
  // what this turn's calls cost (the steps that answered, the Conductor's on a first turn) is the request's
  const cost = conductor.cost + workers.cost;

  if (failed?.resumable && ended === 'step-error') {
    // the workflow waits to be continued: the same request sent again makes the failed call again
    // (the steps that answered are not paid again), until the tool-result deadline
    state.resume = opts.print;
    if (!(await persist(deps, at, state, { memory: opts.memory, status: 'tools', deadlineAt: new Date(Date.now() + d.options.toolResultTimeoutMs) }))) throw lost();
    const a = state.agents[failed.step]!;
    throw new UltraRequestError(
      502,
      `workflow ${workflowId}: step ${failed.step} (${state.specs[failed.step]!.name}) failed: ${a.error?.message ?? 'no answer'}; send the same request again to continue from this step (the steps that answered are not paid again)`,
      { code: 'provider_error', cost },
    );
  }

  if (waiting.length > 0 && !ended) {
    // every agent that waits: one assistant message with all their calls, identical ones merged
    const calls = clientCalls(waiting.flatMap((i) => state.agents[i]!.pending), input.mergeToolCalls !== false);
    const finalWaits = waiting.includes(schedule.finalStep);
    const result: TurnResult = {
      ...common, status: 'tools', text: finalWaits ? state.agents[schedule.finalStep]!.toolText : '', toolCalls: calls, finishReason: 'tool-calls', workflowFinish: null,
      worker: state.specs[finalWaits ? schedule.finalStep : waiting[0]!]!.name, steps: steps(),
    };
    remember(state, opts.print, result);
    if (!(await persist(deps, at, state, { memory: opts.memory, status: 'tools', deadlineAt: new Date(Date.now() + d.options.toolResultTimeoutMs) }))) throw lost();
    return result;
  }

  // the workflow has ended: agents that could not run (a failed step) are skipped
  endSteps(state, ended);
  const last = state.agents[schedule.finalStep]!;
  // a budget that ends the workflow before its final step: an answer with no text, cut (finish_reason length)
  const answered = last.status === 'done' || ended === 'budget-usd' || ended === 'budget-tokens';
  const finishReason: WorkflowFinishReason = finishOf(state, { ended, budgetHit });
  const result: TurnResult | undefined = answered
    ? {
      ...common, status: 'done', text: last.answer ?? '', toolCalls: [], finishReason: last.finish === 'length' || last.status !== 'done' ? 'length' : 'stop', workflowFinish: finishReason,
      worker: state.specs[schedule.finalStep]!.name, steps: steps(),
    }
    : undefined;
  if (result) remember(state, opts.print, result);
  const finish: WorkflowFinish = {
    ...state.base, status: answered ? 'done' : 'failed', finishReason, finalAnswer: answered ? last.answer : null, outcome: last.status === 'done' ? null : 'unanswered', reward: null, score: null,
    ...stepTotals(state), latencyMs: Date.now() - state.startedAt,
  };
  if (!(await persist(deps, at, state, { memory: opts.memory, status: answered ? 'done' : 'failed', deadlineAt: null, finish }))) throw lost();
  emit({ type: 'progress', progress: { event: 'workflow.finished', workflow: workflowId, finish_reason: finishReason } });
  if (!result) {
    // the step that failed, numbered as in the fugu object (from 0), and its worker
    const step = failed?.step ?? state.agents.findIndex((a) => a.status === 'error');
    const where = `workflow ${workflowId}: step ${step} (${state.specs[step]?.name ?? '?'})`;
    const f = state.agents[step];
    if (f?.error?.code === 'provider-bad-request') throw new UltraRequestError(400, `${where}: the worker's provider refused the request: ${f.error.message}`, { code: 'provider_bad_request', cost });
    throw new UltraRequestError(502, `${where} failed: ${f?.error?.message ?? 'no answer'}`, { code: 'provider_error', cost });
  }
  return result;
}

/** The final step's call, streamed: its text deltas go out as they come; the whole result is assembled. */
async function streamCall(deps: InteractiveDeps, worker: StoredWorker, req: ChatRequest, key: string, onText: (t: string) => void): Promise<{ result: ChatResult; cost: bigint }> {
  const s = await deps.stream(worker, req, key);
  let text = '';
  const toolCalls: ToolCall[] = [];
  let finish: Extract<StreamEvent, { type: 'finish' }> | undefined;
  for (let ev = await s.events.next(); !ev.done; ev = await s.events.next()) {
    const e = ev.value;
    if (e.type === 'text-delta') {
      text += e.text;
      onText(e.text);
    } else if (e.type === 'tool-call') toolCalls.push(e.toolCall);
    else finish = e;
  }
  const usage = finish?.usage ?? { inputTokens: 0, outputTokens: 0 };
  const result: ChatResult = {
    text, toolCalls, usage, finishReason: finish?.finishReason ?? 'stop', model: finish?.model ?? worker.model,
    content: [...(text ? [{ type: 'text' as const, text }] : []), ...toolCalls.map((c) => ({ type: 'tool-call' as const, ...c }))],
  };
  return { result, cost: await s.cost(usage) };
}

/** The conversation as the agents read it: earlier user and assistant text (no tool traffic), then the latest message. */
function conversationText(messages: readonly ChatMessage[], lastUserAt: number): string {
  const latest = messageText(messages[lastUserAt]!).trim();
  const earlier = messages.slice(0, lastUserAt).flatMap((m) => {
    if (m.role !== 'user' && m.role !== 'assistant') return [];
    const t = typeof m.content === 'string' ? m.content : m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
    return t.trim() === '' ? [] : [`${m.role === 'user' ? 'User' : 'Assistant'}: ${t.trim()}`];
  });
  return earlier.length === 0 ? latest : `The conversation so far:\n${earlier.join('\n')}\n\nThe user's latest message:\n${latest}`;
}

/** The conversation of the newest fugu-ultra tool call in the history (verified for this key), if any. */
async function conversationOfHistory(deps: InteractiveDeps, input: TurnInput): Promise<string | undefined> {
  for (let i = input.messages.length - 1; i >= 0; i--) {
    const m = input.messages[i]!;
    if (m.role !== 'assistant' || typeof m.content === 'string') continue;
    for (const p of m.content) {
      if (p.type !== 'tool-call') continue;
      const ref = parseToolCallId(p.id);
      if (!ref) continue;
      const s = await getUltraSession(deps.db, ref.workflowId);
      if (!s || s.apiKeyId !== input.keyId || !verifyToolCallId(deps.secret, input.keyId, s.conversationId, p.id)) {
        throw bad(`tool call id "${p.id}" in the history was not issued to this API key (or was altered)`, `messages[${i}].tool_calls`, 'invalid_tool_call_id');
      }
      return s.conversationId;
    }
  }
  return undefined;
}

/** The state of a session, of this version or the previous (read as this one); a 409 naming both for any other. */
function readState(s: UltraSession): SessionState {
  const st = s.state as unknown as Omit<SessionState, 'v'> & { v: number };
  if (!(SUPPORTED_STATE_VERSIONS as readonly number[]).includes(st?.v)) {
    throw new UltraRequestError(409, `workflow ${s.workflowId} was saved by another version of fugu (state v${String(st?.v)}; this one reads v${SUPPORTED_STATE_VERSIONS.join(' and v')})`, { code: 'workflow_state_version' });
  }
  // v1: no call attempts (its keys ended .v<version>, which no v2 key does), no stored answers
  return {
    ...st, v: CURRENT_STATE, replies: st.replies ?? [], resume: st.resume ?? null,
    agents: st.agents.map((a) => ({ ...a, attempt: a.attempt ?? 1 })),
  };
}

/**
 * A turn's end in one statement (one round trip, one commit; saveTurn): its state (inserted when
 * the turn began without a row, else saved from the version this request holds), the rows of the
 * steps that ended, the workflow's final write when it ended, the shared memory's entries of
 * the tool results this request gave, and a new conversation's first turn's own rows (its
 * conversation and its workflow, made here). False, with nothing written, when another request took the
 * workflow over meanwhile.
 */
async function persist(deps: Pick<InteractiveDeps, 'db' | 'holds' | 'log'>, at: At, state: SessionState, s: { status: UltraSessionStatus; deadlineAt: Date | null; finish?: WorkflowFinish; memory?: readonly MemoryEntry[] }): Promise<boolean> {
  const json = JSON.stringify(state);
  const ok = await saveTurn(deps.db, {
    workflowId: at.workflowId,
    session: {
      status: s.status, state: json, deadlineAt: s.deadlineAt,
      ...(at.stored ? { version: at.version } : { insert: { conversationId: state.conversationId, apiKeyId: state.keyId } }),
    },
    steps: endedStepRows(at.workflowId, state),
    ...(s.finish && { finish: s.finish }),
    ...(s.memory && s.memory.length > 0 && { memory: { conversationId: state.conversationId, keyId: state.keyId, entries: s.memory } }),
    ...(at.create && { create: at.create }),
  });
  // the workflow given back (before the answer: the client's next request finds it free), with the
  // version saved and this process's copy of it; a turn's end that lost it leaves it to its holder
  const saved = { workflowId: at.workflowId, conversationId: state.conversationId, apiKeyId: state.keyId, status: s.status, version: at.stored ? at.version + 1 : 0, stateJson: json, deadlineAt: s.deadlineAt };
  if (at.hold) {
    at.released = true;
    await at.hold.release(ok ? { saved } : { advanced: true });
  } else if (ok && !at.stored) {
    deps.holds.saved(saved).catch((e: unknown) => deps.log?.warn({ workflow: at.workflowId, err: (e as Error).message }, 'fugu-ultra: could not note a saved workflow in Redis'));
  }
  return ok;
}

/** Ends the workflows whose tool results are overdue: their waiting steps fail `tool-timeout`. */
export async function expireSessions(deps: Pick<InteractiveDeps, 'db' | 'holds' | 'log'>): Promise<number> {
  let n = 0;
  for (const s of await expiredUltraSessions(deps.db)) if (await expireSession(deps, s)) n += 1;
  return n;
}

/** Ends a workflow whose tool results are overdue (`held`: this request's hold on it, else taken here; one another request holds is left). */
async function expireSession(deps: Pick<InteractiveDeps, 'db' | 'holds' | 'log'>, s: UltraSession, held?: Hold): Promise<boolean> {
  const taken = held ?? (await takeHold(deps, s.workflowId));
  if ('busyMs' in taken) return false;
  let state: SessionState;
  try {
    state = readState(s);
  } catch (e) {
    // (a state of a version this release does not read: left as it is, and given back)
    await taken.release({ advanced: false });
    throw e;
  }
  for (const a of state.agents) {
    if (a.status === 'tools') {
      a.status = 'error';
      a.finish = 'tool-timeout';
      a.error = { code: 'tool-timeout', message: `no tool results by ${s.deadlineAt?.toISOString() ?? 'the deadline'}` };
    } else if (a.status === 'waiting' || a.status === 'call') a.status = 'skipped';
  }
  return persist(deps, { workflowId: s.workflowId, version: s.version, stored: true, hold: taken }, state, {
    status: 'failed', deadlineAt: s.deadlineAt, finish: { ...state.base, status: 'failed', finishReason: 'tool-timeout', outcome: 'unanswered', latencyMs: Date.now() - state.startedAt },
  });
}
