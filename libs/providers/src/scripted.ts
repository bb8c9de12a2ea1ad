// A scripted worker: answers any prompt, deterministically per seed, with the latency, length,
// price, failures and tool behaviour its pool file declares. It is a simulation for trying fugu
// without provider keys, for load tests and for CI; it knows nothing, and it is not a replay of
// recorded outcomes (the `replay` provider is). Its answers say so: providerMetadata.scripted,
// which the gateway shows in the `fugu` object. The anchors are LiteLLM's `mock_response` and the
// OpenAI-wire stub servers of test suites; this goes beyond them with tools and failure rates.
//
// When tools are offered (tool_choice not "none"), an agent that has not yet had a tool result
// since the user's last message calls one: the tool tool_choice names, else the script's `tools`
// name, else the tool whose name and description share the most words with the prompt (and
// whose results the prompt does not already quote, as another agent's answer does); its
// arguments are drawn from the prompt by the tool's JSON Schema (a city or place: the prompt's
// capitalised words; a query or text: the message; numbers: the first number). Given tool
// results, it answers from them.
//
// A script's `toolRules` come first (the pool file's `tool_rules`): the first rule whose tool is
// offered, whose `when` matches the last user message and whose `after` lists the tools this agent
// has called since that message calls its tool with its templated arguments (`$1`, `{{cwd}}`), so
// a pool file can drive a client's own tools step by step (a coding harness: Read, then Edit).
// After the results of the tools it called it answers, quoting them (a file's content); an agent
// whose prompt quotes other agents' tool results (a fugu-ultra aggregator) calls nothing by rule
// and quotes those.

import { setTimeout as delay } from 'node:timers/promises';
import { estimateTokens, InputError, messageText, rng, type ScriptSpec, type ScriptToolRule, type ToolDefinition } from '@fugu/core';
import type { ChatModel, ChatRequest, ChatResult, StreamEvent, ToolCall } from '@fugu/core';
import { AbortedError, RateLimitError, ServerError, TimeoutError } from './errors.ts';
import { cut } from './replay.ts';
import { buildResult, promptText } from './shared.ts';
import { supportsAll, type ParamSupport } from './param-support.ts';

/** A script's values where its pool file entry leaves them out. */
export const SCRIPT_DEFAULTS: ScriptSpec = {
  seed: 0, latencyMs: 0, outputTokens: 48, style: 'concise', failures: { rateLimit: 0, serverError: 0, timeout: 0 }, tools: 'auto',
};

/** What the failure draws wait before a timeout fails, when the request sets no time limit (ms). */
const SIMULATED_TIMEOUT_MS = 2_000;

const STOPWORDS = new Set('a an and are as at be by can do does for from how i in is it me my of on or please say should tell the this to was what when where which who why will with would you your'.split(' '));

const FILLER = [
  'the', 'question', 'turns', 'on', 'a', 'few', 'points', 'worth', 'weighing', 'carefully', 'and', 'the', 'simplest', 'reading', 'holds', 'up',
  'once', 'each', 'part', 'is', 'checked', 'against', 'what', 'is', 'known', 'so', 'the', 'answer', 'follows', 'from', 'that',
];

export class ScriptedChatModel implements ChatModel {
  /**
   * What a script honours: the output limit and stop sequences cut its answer, tools and
   * tool_choice steer its calls, the seed picks its draws; the sampling knobs have no sampler to
   * reach (a scripted answer is not sampled), the hints nowhere to go.
   */
  static readonly params: ParamSupport = supportsAll({
    temperature: false,
    topP: false,
    reasoningEffort: false,
    frequencyPenalty: false,
    presencePenalty: false,
    logitBias: false,
    logprobs: false,
    topLogprobs: false,
    verbosity: false,
    user: false,
    serviceTier: false,
    store: false,
    storeMetadata: false,
    promptCacheKey: false,
  });
  readonly params = ScriptedChatModel.params;
  readonly provider = 'scripted' as const;
  readonly modelId: string;
  readonly workerName: string;
  readonly script: ScriptSpec;
  /** calls made so far: the failure draws are the nth call's of the seed, so a retry may succeed */
  #calls = 0;
  readonly #rules: ReadonlyArray<ScriptToolRule & { re: RegExp }>;

  constructor(workerName: string, script: Partial<ScriptSpec> = {}, opts: { model?: string } = {}) {
    this.workerName = workerName;
    this.modelId = opts.model ?? workerName;
    this.script = { ...SCRIPT_DEFAULTS, ...script, failures: { ...SCRIPT_DEFAULTS.failures, ...script.failures } };
    this.#rules = (this.script.toolRules ?? []).map((rule, i) => ({ ...rule, re: ruleRegExp(rule.when, `script.tool_rules[${i}].when`) }));
  }

  async generate(req: ChatRequest): Promise<ChatResult> {
    const s = this.script;
    const call = this.#calls++;
    const seed = req.seed ?? 0;
    // the request's own draws (the same request, the same answer) and this call's (failures, latency)
    const r = rng('scripted', s.seed, seed, this.workerName, promptText(req.messages), JSON.stringify(req.tools?.map((t) => t.name) ?? []));
    const c = rng('scripted-call', s.seed, seed, this.workerName, call);
    const latency = Math.max(0, Math.round(s.latencyMs * (0.75 + 0.5 * c.next())));
    const f = c.next();
    const { rateLimit, serverError, timeout } = s.failures;
    if (f < timeout) {
      const wait = req.timeoutMs ?? SIMULATED_TIMEOUT_MS;
      await sleep(wait, req.signal);
      throw new TimeoutError('scripted', `scripted worker "${this.workerName}": a simulated timeout after ${wait} ms (failures.timeout ${timeout})`);
    }
    await sleep(latency, req.signal);
    if (f < timeout + rateLimit) {
      throw new RateLimitError('scripted', `scripted worker "${this.workerName}": a simulated 429 (failures.rate_limit ${rateLimit})`, { retryAfterMs: 1 + c.int(50) });
    }
    if (f < timeout + rateLimit + serverError) {
      throw new ServerError('scripted', `scripted worker "${this.workerName}": a simulated 500 (failures.server_error ${serverError})`, { status: 500 });
    }

    const message = lastUserText(req);
    const question = questionOf(message);
    const results = toolResultsSinceUser(req);
    const ruled = this.#ruleCall(req, message);
    const tool = ruled?.tool ?? (results.length === 0 ? this.#toolToCall(req, question, message) : undefined);
    const meta = { scripted: { simulation: true, seed: s.seed, requestSeed: seed, style: s.style, latencyMs: latency } };
    const inputTokens = estimateTokens(promptText(req.messages));
    if (tool) {
      const args = ruled?.arguments ?? argumentsFor(tool, question);
      const id = `call_s${(r.int(2 ** 31) >>> 0).toString(36)}`;
      const toolCall: ToolCall = { id, name: tool.name, arguments: JSON.stringify(args) };
      return buildResult({
        text: '', toolCalls: [toolCall], finishReason: 'tool-calls', model: this.modelId,
        usage: { inputTokens, outputTokens: estimateTokens(`${tool.name}${toolCall.arguments}`) }, providerMetadata: meta,
      });
    }
    const answer = this.#answer(req, question, results, r);
    const { text, outputTokens, finishReason } = cut(answer, estimateTokens(answer), req);
    return buildResult({ text, toolCalls: [], finishReason, model: this.modelId, usage: { inputTokens, outputTokens }, providerMetadata: meta });
  }

  /** The same answer as `generate`, its text in a few deltas (none when it has no text: a tool call). */
  async *stream(req: ChatRequest): AsyncGenerator<StreamEvent> {
    const r = await this.generate(req);
    const words = r.text === '' ? [] : r.text.split(/(?<= )/);
    for (let i = 0; i < words.length; i += 8) yield { type: 'text-delta', text: words.slice(i, i + 8).join('') };
    for (const toolCall of r.toolCalls) yield { type: 'tool-call', toolCall };
    yield { type: 'finish', finishReason: r.finishReason, usage: r.usage, model: r.model };
  }

  /**
   * The call of the first rule that applies (toolRules): its tool offered (and the one tool_choice
   * names, if it names one), its `after` the tools called since the last user message, its `when`
   * matching that message, and a working directory in the prompt if its arguments need one. A
   * message that quotes tool results (other agents' answers: a fugu-ultra aggregator's prompt)
   * calls nothing by rule: the work is done, it answers from those results.
   */
  #ruleCall(req: ChatRequest, message: string): { tool: ToolDefinition; arguments: Record<string, unknown> } | undefined {
    const tools = req.tools ?? [];
    const choice = req.toolChoice;
    if (this.#rules.length === 0 || tools.length === 0 || choice === 'none') return undefined;
    if (quotedResults(message).length > 0) return undefined;
    const called = toolCallsSinceUser(req);
    let cwd: string | null | undefined;
    for (const rule of this.#rules) {
      if (typeof choice === 'object' && choice.name !== rule.tool) continue;
      const tool = tools.find((t) => t.name === rule.tool);
      if (!tool) continue;
      const after = rule.after ?? [];
      if (after.length !== called.length || after.some((name, i) => name !== called[i])) continue;
      const m = rule.re.exec(message);
      if (!m) continue;
      cwd ??= workingDirectoryOf(promptText(req.messages)) ?? null;
      const args = fillTemplate(rule.arguments, m, cwd ?? undefined);
      if (args !== undefined) return { tool, arguments: args as Record<string, unknown> };
    }
    return undefined;
  }

  /** `question`: what the tools are matched with; `message`: the whole user message (another agent's quoted results) */
  #toolToCall(req: ChatRequest, question: string, message: string): ToolDefinition | undefined {
    const tools = req.tools ?? [];
    const choice = req.toolChoice;
    if (tools.length === 0 || choice === 'none') return undefined;
    if (typeof choice === 'object') return tools.find((t) => t.name === choice.name);
    const named = this.script.tools;
    if (named === 'none' && choice !== 'required') return undefined;
    if (named !== 'auto' && named !== 'none') {
      const t = tools.find((x) => x.name === named);
      if (t) return t;
    }
    // the best match by shared words (ties: the first offered), among the tools whose results the
    // prompt does not already quote (an agent that reads another's work does not call again)
    const words = contentWords(question);
    const fresh = tools.filter((t) => !message.includes(`${t.name} gave `));
    if (fresh.length === 0 && choice !== 'required') return undefined;
    let best = (fresh[0] ?? tools[0])!;
    let bestScore = -1;
    for (const t of fresh) {
      const mine = contentWords(`${t.name.replace(/[_-]/g, ' ')} ${t.description ?? ''}`);
      const score = [...mine].filter((w) => words.has(w) || [...words].some((q) => q.length > 3 && (w.startsWith(q) || q.startsWith(w)))).length;
      if (score > bestScore) [best, bestScore] = [t, score];
    }
    return bestScore > 0 || choice === 'required' ? best : undefined;
  }

  #answer(req: ChatRequest, question: string, results: ReadonlyArray<{ name: string; content: string }>, r: ReturnType<typeof rng>): string {
    const s = this.script;
    const topic = [...contentWords(question)].slice(0, 6).join(', ') || 'the message';
    // up to 400 characters of each result: enough for a short file behind a harness's wrapper (Codex's exec header, OpenCode's <path> and <content> tags)
    const found = results.map((x) => `${x.name} gave ${JSON.stringify(clip(x.content, 400))}`).join('; ');
    const json = req.responseFormat?.type === 'json_object' || req.responseFormat?.type === 'json_schema';
    if (s.style === 'echo') {
      const echo = results.length > 0 ? `${question} -> ${found}` : question;
      return json ? JSON.stringify({ answer: echo }) : echo;
    }
    // an agent that reads others' answers (a fugu-ultra aggregator) passes on the tool results they quote
    const quoted = results.length === 0 ? quotedResults(lastUserText(req)) : [];
    const lead = results.length > 0 ? `From the tool results (${found}): ` : quoted.length > 0 ? `From the tool results the other agents quote (${quoted.join('; ')}): ` : '';
    const want = Math.max(4, Math.round(s.outputTokens * (0.7 + 0.6 * r.next()) * (s.style === 'detailed' ? 3 : 1)));
    const body: string[] = [];
    while (estimateTokens(body.join(' ')) < want) body.push(FILLER[r.int(FILLER.length)]!);
    const text = `${lead}[scripted ${this.workerName}] On ${topic}: ${body.join(' ')}.`;
    return json ? JSON.stringify({ answer: text, simulation: 'scripted' }) : text;
  }
}

/**
 * The question a user message asks: the whole message, or, in a fugu-ultra agent's prompt (the
 * Conductor's worker template: "The overall task:" then the task), that task's first line.
 */
function questionOf(message: string): string {
  const task = /The overall task:\s*\n([^\n]+)/.exec(message);
  return task ? task[1]!.trim() : message;
}

function lastUserText(req: ChatRequest): string {
  const m = [...req.messages].reverse().find((x) => x.role === 'user');
  return m ? messageText(m).trim() : '';
}

/** The names of the tools called after the last user message, in order (what this agent has done since it was asked). */
function toolCallsSinceUser(req: ChatRequest): string[] {
  const out: string[] = [];
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i]!;
    if (m.role === 'user') break;
    if (m.role === 'assistant' && typeof m.content !== 'string') out.unshift(...m.content.flatMap((p) => (p.type === 'tool-call' ? [p.name] : [])));
  }
  return out;
}

/** `<tool> gave "<result>"` quotes in a message (other agents' answers), each once, in order. */
function quotedResults(message: string): string[] {
  const seen = new Set<string>();
  for (const m of message.matchAll(/([\w.:-]+) gave ("(?:[^"\\\n]|\\.)*")/g)) seen.add(`${m[1]} gave ${m[2]}`);
  return [...seen];
}

/**
 * The client's working directory as its prompt states it: Codex's environment context
 * (`<cwd>/path</cwd>`), Claude Code's system prompt (`Primary working directory: /path`),
 * OpenCode's (`Working directory: /path`); undefined when the prompt names none.
 */
export function workingDirectoryOf(text: string): string | undefined {
  for (const re of [/<cwd>([^<\n]+)<\/cwd>/, /Primary working directory:\s*(\S+)/, /Working directory:\s*(\S+)/]) {
    const m = re.exec(text);
    if (m) return m[1]!.trim();
  }
  return undefined;
}

/** A rule's `when`, compiled (case-insensitive); a bad pattern is an InputError naming its field. */
export function ruleRegExp(when: string, field: string): RegExp {
  try {
    return new RegExp(when, 'i');
  } catch (e) {
    throw new InputError(`not a valid regular expression: ${(e as Error).message}`, { field });
  }
}

/**
 * A rule's arguments with their string templates filled: `$0`..`$9` the match and its groups (an
 * unmatched group: empty), `{{cwd}}` the working directory, `$$` a dollar sign; objects and lists
 * filled inside, other values as they are. Undefined when a template needs a working directory
 * and the prompt states none (the rule does not apply).
 */
export function fillTemplate(value: unknown, m: RegExpExecArray, cwd: string | undefined): unknown {
  if (typeof value === 'string') {
    if (value.includes('{{cwd}}') && cwd === undefined) return undefined;
    return value.replace(/\$(\$|\d)|\{\{cwd\}\}/g, (all, g: string | undefined) => (g === undefined ? cwd! : g === '$' ? '$' : (m[Number(g)] ?? '')));
  }
  if (Array.isArray(value)) {
    const out = value.map((v) => fillTemplate(v, m, cwd));
    return out.includes(undefined) ? undefined : out;
  }
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const f = fillTemplate(v, m, cwd);
      if (f === undefined) return undefined;
      out[k] = f;
    }
    return out;
  }
  return value;
}

/** The tool results after the last user message (what the agent was given to answer from). */
function toolResultsSinceUser(req: ChatRequest): Array<{ name: string; content: string }> {
  const out: Array<{ name: string; content: string }> = [];
  for (let i = req.messages.length - 1; i >= 0; i--) {
    const m = req.messages[i]!;
    if (m.role === 'user') break;
    if (m.role === 'tool') for (const p of m.content) out.unshift({ name: p.name ?? 'tool', content: p.content });
  }
  return out;
}

function contentWords(text: string): Set<string> {
  return new Set(text.toLowerCase().split(/[^a-z0-9]+/).filter((w) => w.length > 1 && !STOPWORDS.has(w)));
}

/** The capitalised words of a text that do not start a sentence (names, places), in order. */
function properNouns(text: string): string[] {
  const out: string[] = [];
  const re = /(^|[.!?]\s+|\s)([A-Z][a-zA-Z'-]+)/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const startsSentence = m[1] === '' || /[.!?]/.test(m[1]!);
    if (!startsSentence && !STOPWORDS.has(m[2]!.toLowerCase())) out.push(m[2]!);
  }
  return out;
}

const PLACE = /city|town|location|place|country|region|where|destination|origin/i;
const TEXT = /query|q|text|question|search|prompt|topic|input|message|keywords?/i;

/** Arguments for a tool from a prompt, by its JSON Schema: each required property (all, when none is listed). */
export function argumentsFor(tool: ToolDefinition, prompt: string): Record<string, unknown> {
  const schema = tool.parameters as { properties?: Record<string, { type?: string | string[]; enum?: unknown[]; items?: unknown }>; required?: string[] };
  const props = schema.properties ?? {};
  const names = schema.required && schema.required.length > 0 ? schema.required : Object.keys(props);
  const places = properNouns(prompt);
  const numbers = prompt.match(/-?\d+(\.\d+)?/g) ?? [];
  const out: Record<string, unknown> = {};
  let place = 0;
  for (const name of names) {
    const p = props[name] ?? {};
    const type = Array.isArray(p.type) ? p.type.find((t) => t !== 'null') : p.type;
    if (p.enum && p.enum.length > 0) {
      const words = contentWords(prompt);
      out[name] = p.enum.find((v) => typeof v === 'string' && words.has(v.toLowerCase())) ?? p.enum[0];
    } else if (type === 'number' || type === 'integer') {
      const n = Number(numbers[0] ?? 1);
      out[name] = type === 'integer' ? Math.trunc(n) : n;
    } else if (type === 'boolean') out[name] = true;
    else if (type === 'array') out[name] = [];
    else if (type === 'object') out[name] = {};
    else if (PLACE.test(name)) out[name] = places[place++] ?? places[0] ?? clip(prompt, 60);
    else if (TEXT.test(name)) out[name] = clip(prompt, 200);
    else out[name] = places[place++] ?? clip(prompt, 60);
  }
  return out;
}

function clip(s: string, n: number): string {
  const one = s.replace(/\s+/g, ' ').trim();
  return one.length > n ? `${one.slice(0, n - 3)}...` : one;
}

/** Waits `ms` (Node's abortable timer; none at 0, where a timer would still take a millisecond); the caller's abort is an AbortedError. */
async function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0 && !signal?.aborted) return;
  try {
    await delay(Math.max(0, ms), undefined, signal && { signal });
  } catch {
    throw new AbortedError('scripted', 'scripted: call aborted by the caller');
  }
}
