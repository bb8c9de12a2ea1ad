// Worker-pool files (YAML or JSON): which LLMs a run may use, how to reach them and what they cost.
//
//   name: my-pool
//   default_worker: gpt-4o-mini      # optional: what model `fugu` answers with until a router trained on this pool is published (default: the first worker)
//   workers:
//     - name: gpt-4o-mini
//       provider: openai            # openai | anthropic | google | openai-compatible | replay | scripted
//       model: gpt-4o-mini
//       api_key_env: OPENAI_API_KEY  # the NAME of an environment variable, never a key
//       price: { input: "0.15", output: "0.60" }   # USD per 1M tokens
//       description: a small fast model     # optional: what a Conductor reads about the worker
//       size: 8B                            # optional: parameter count (the replay model's size class)
//     - name: sim-fast                      # provider scripted: a simulation that answers any prompt (no key)
//       provider: scripted
//       model: sim-fast
//       price: { input: "0.10", output: "0.40" }
//       script: { seed: 1, latency_ms: 300, output_tokens: 60, style: concise, tools: auto,
//                 failures: { rate_limit: 0.02, server_error: 0.01, timeout: 0 } }
//       # optional: tool calls by rule, tried in order before `tools` (data/pools/harness.yaml):
//       #   tool_rules:
//       #     - when: "code word in (\\S+)"         # a regex (case-insensitive) on the last user message
//       #       tool: Read                         # the first rule whose tool is offered and whose regex matches
//       #       arguments: { file_path: "{{cwd}}/$1" }   # $0..$9: the match; {{cwd}}: the prompt's working directory
//       #       after: []                          # the tools called since that message (default none)
//
// Errors name the file, the line where YAML knows it, and the field path (`workers[2].price.input`).
// Secret values are never echoed in an error.

import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, extname, resolve } from 'node:path';
import { LineCounter, isNode, parseDocument, stringify } from 'yaml';
import { z } from 'zod';
import { InputError, PROVIDERS, parseUsd, type WorkerPool, type WorkerSpec } from '@fugu/core';
import { defaultLlmRouterDir, loadLlmRouterPool, REPO_ROOT } from './llmrouter.ts';
import { formatPath } from './normalize.ts';

const REASONING_EFFORTS = ['minimal', 'low', 'medium', 'high'] as const;
const SCRIPT_STYLES = ['concise', 'detailed', 'echo'] as const;

const share = (what: string) => z.number({ error: `${what} must be a number in [0, 1]` }).min(0, `${what} must be in [0, 1]`).max(1, `${what} must be in [0, 1]`).optional();

// Keys that would hold a literal credential. `api_key_env` (a variable NAME) is the allowed way.
const SECRET_KEY = /^(api[_-]?key|apikey|key|secret|secret[_-]?key|token|access[_-]?token|auth[_-]?token|password|authorization|bearer)$/i;
// Values shaped like provider keys (OpenAI/Anthropic "sk-...", Google "AIza...", bearer tokens).
const SECRET_VALUE = /^(sk-[A-Za-z0-9_-]{12,}|sk-ant-[A-Za-z0-9_-]{12,}|AIza[A-Za-z0-9_-]{20,}|Bearer\s+\S{12,})/;

const nonEmpty = (what: string) =>
  z
    .string({ error: (iss) => (iss.input === undefined ? `missing ${what}` : `${what} must be a string`) })
    .trim()
    .min(1, `${what} must not be empty`);

/** USD per 1M tokens: a decimal string ("0.15") or a number; kept as an exact decimal string. */
const price = z
  .union([z.string(), z.number()], { error: (iss) => (iss.input === undefined ? 'missing price' : 'price must be a decimal string like "0.15"') })
  .transform((v, ctx) => {
    const s = typeof v === 'number' ? (Number.isFinite(v) && v >= 0 ? v.toFixed(12).replace(/\.?0+$/, '') || '0' : String(v)) : v.trim();
    if (/^-/.test(s)) {
      ctx.addIssue({ code: 'custom', message: 'price must not be negative' });
      return z.NEVER;
    }
    try {
      parseUsd(s);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'price must be a decimal USD amount per 1M tokens, like "0.15" (at most 12 decimals)' });
      return z.NEVER;
    }
    return s;
  });

/** A scripted worker's tool rule (ScriptToolRule): `when` must compile, the arguments are a mapping. */
const toolRuleSchema = z.strictObject(
  {
    when: z
      .string({ error: (iss) => (iss.input === undefined ? 'missing when: a regular expression on the last user message' : 'when must be a string (a regular expression)') })
      .min(1, 'when must not be empty')
      .superRefine((w, ctx) => {
        try {
          new RegExp(w, 'i');
        } catch (e) {
          ctx.addIssue({ code: 'custom', message: `when is not a valid regular expression: ${(e as Error).message}` });
        }
      }),
    tool: nonEmpty('tool'),
    arguments: z.record(z.string(), z.unknown(), { error: 'arguments must be a mapping of argument names to values (strings are templates: $1, {{cwd}})' }).optional(),
    after: z.array(nonEmpty('after[]'), { error: 'after must be a list of tool names' }).optional(),
  },
  { error: 'each tool rule must be a mapping (when, tool, arguments, after)' },
);

const workerSchema = z.strictObject({
  name: nonEmpty('name'),
  provider: z.enum(PROVIDERS, { error: `provider must be one of ${PROVIDERS.join(', ')}` }),
  model: nonEmpty('model'),
  api_key_env: z
    .string({ error: 'api_key_env must be a string' })
    .regex(/^[A-Z_][A-Z0-9_]*$/, 'api_key_env must be the NAME of an environment variable (upper-case letters, digits, _), never the key itself')
    .optional(),
  base_url: z.url({ error: 'base_url must be an http(s) URL', protocol: /^https?$/ }).optional(),
  temperature: z.number({ error: 'temperature must be a number' }).min(0, 'temperature must be in [0, 2]').max(2, 'temperature must be in [0, 2]').optional(),
  top_p: z.number({ error: 'top_p must be a number' }).gt(0, 'top_p must be in (0, 1]').max(1, 'top_p must be in (0, 1]').optional(),
  max_tokens: z.number({ error: 'max_tokens must be a number' }).int('max_tokens must be an integer').positive('max_tokens must be > 0').optional(),
  reasoning_effort: z.enum(REASONING_EFFORTS, { error: `reasoning_effort must be one of ${REASONING_EFFORTS.join(', ')}` }).optional(),
  description: nonEmpty('description').optional(),
  size: nonEmpty('size').optional(),
  price: z.strictObject({ input: price, output: price }, { error: (iss) => (iss.input === undefined ? 'missing price: { input, output } in USD per 1M tokens' : 'price must be { input, output }') }),
  script: z.strictObject({
    seed: z.number({ error: 'script.seed must be an integer' }).int('script.seed must be an integer').optional(),
    latency_ms: z.number({ error: 'script.latency_ms must be a number' }).min(0, 'script.latency_ms must be >= 0').max(600_000, 'script.latency_ms must be at most 600000').optional(),
    output_tokens: z.number({ error: 'script.output_tokens must be a number' }).int('script.output_tokens must be an integer').positive('script.output_tokens must be > 0').max(32_768, 'script.output_tokens must be at most 32768').optional(),
    style: z.enum(SCRIPT_STYLES, { error: `script.style must be one of ${SCRIPT_STYLES.join(', ')}` }).optional(),
    tools: nonEmpty('script.tools').optional(),
    tool_rules: z.array(toolRuleSchema, { error: 'script.tool_rules must be a list of rules (when, tool, arguments, after)' }).optional(),
    failures: z.strictObject({ rate_limit: share('script.failures.rate_limit'), server_error: share('script.failures.server_error'), timeout: share('script.failures.timeout') }, { error: 'script.failures must be { rate_limit, server_error, timeout }' })
      .refine((f) => (f.rate_limit ?? 0) + (f.server_error ?? 0) + (f.timeout ?? 0) <= 1, 'script.failures: the shares add up to more than 1')
      .optional(),
  }, { error: 'script must be a mapping (seed, latency_ms, output_tokens, style, tools, tool_rules, failures)' }).optional(),
});

const poolSchema = z
  .strictObject({
    name: nonEmpty('name'),
    workers: z.array(workerSchema, { error: 'workers must be a list' }).min(1, 'a pool needs at least one worker'),
    default_worker: nonEmpty('default_worker').optional(),
  })
  .superRefine((pool, ctx) => {
    if (pool.default_worker !== undefined && !pool.workers.some((w) => w.name === pool.default_worker)) {
      ctx.addIssue({ code: 'custom', path: ['default_worker'], message: `default_worker "${pool.default_worker}" is not a worker of the pool (${pool.workers.map((w) => w.name).join(', ')})` });
    }
    const first = new Map<string, number>();
    pool.workers.forEach((w, i) => {
      const j = first.get(w.name);
      if (j !== undefined) ctx.addIssue({ code: 'custom', path: ['workers', i, 'name'], message: `duplicate worker name "${w.name}" (also workers[${j}])` });
      else first.set(w.name, i);
      if (w.script !== undefined && w.provider !== 'scripted') {
        ctx.addIssue({ code: 'custom', path: ['workers', i, 'script'], message: `script is for provider scripted (this worker's provider is ${w.provider})` });
      }
      if (w.provider === 'openai-compatible' && w.base_url === undefined) {
        ctx.addIssue({ code: 'custom', path: ['workers', i, 'base_url'], message: 'an openai-compatible worker needs base_url' });
      }
    });
  });

/** The pool file's shape (snake_case, as people write it). */
export type WorkerPoolFile = z.input<typeof poolSchema>;
type PoolOut = z.output<typeof poolSchema>;

/** Throws before validation if any key or value looks like a literal credential. */
function rejectSecrets(value: unknown, path: PropertyKey[], fail: (msg: string, path: PropertyKey[]) => never): void {
  if (typeof value === 'string') {
    if (SECRET_VALUE.test(value.trim())) fail('this value looks like a literal API key: put the key in an environment variable and name it with api_key_env', path);
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((v, i) => rejectSecrets(v, [...path, i], fail));
    return;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      if (SECRET_KEY.test(k)) {
        fail(`"${k}" looks like a literal secret: never put keys in a pool file; set api_key_env: OPENAI_API_KEY (a variable name) and export the key in that variable`, [...path, k]);
      }
      rejectSecrets(v, [...path, k], fail);
    }
  }
}

function toSpec(w: PoolOut['workers'][number]): WorkerSpec {
  const spec: WorkerSpec = { name: w.name, provider: w.provider, model: w.model, settings: {}, prices: { inputPerMTok: w.price.input, outputPerMTok: w.price.output } };
  if (w.base_url !== undefined) spec.baseUrl = w.base_url;
  if (w.api_key_env !== undefined) spec.apiKeyEnv = w.api_key_env;
  if (w.temperature !== undefined) spec.settings.temperature = w.temperature;
  if (w.top_p !== undefined) spec.settings.topP = w.top_p;
  if (w.max_tokens !== undefined) spec.settings.maxTokens = w.max_tokens;
  if (w.reasoning_effort !== undefined) spec.settings.reasoningEffort = w.reasoning_effort;
  if (w.description !== undefined) spec.description = w.description;
  if (w.size !== undefined) spec.size = w.size;
  if (w.script !== undefined) {
    const x = w.script;
    const failures = x.failures && { rateLimit: x.failures.rate_limit ?? 0, serverError: x.failures.server_error ?? 0, timeout: x.failures.timeout ?? 0 };
    spec.script = {
      ...(x.seed !== undefined && { seed: x.seed }), ...(x.latency_ms !== undefined && { latencyMs: x.latency_ms }), ...(x.output_tokens !== undefined && { outputTokens: x.output_tokens }),
      ...(x.style !== undefined && { style: x.style }), ...(x.tools !== undefined && { tools: x.tools }), ...(failures && { failures }),
      ...(x.tool_rules !== undefined && {
        toolRules: x.tool_rules.map((r) => ({ when: r.when, tool: r.tool, arguments: r.arguments ?? {}, ...(r.after !== undefined && { after: r.after }) })),
      }),
    };
  }
  return spec;
}

/**
 * Parse the text of a pool file (YAML, which also reads JSON). `file` names it in errors.
 * Throws an InputError naming file, line and field path.
 */
export function parseWorkerPool(text: string, file = '<pool>'): WorkerPool {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const err = doc.errors[0]!;
    throw new InputError(`not valid YAML or JSON: ${err.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}`, { file, line: err.linePos?.[0].line });
  }
  // line of the nearest node on the path (a missing field: its parent)
  const lineOf = (path: readonly PropertyKey[]): number | undefined => {
    for (let n = path.length; n >= 0; n--) {
      const node = doc.getIn(path.slice(0, n), true);
      if (isNode(node) && node.range) {
        const l = lineCounter.linePos(node.range[0]).line;
        return l > 0 ? l : undefined;
      }
    }
    return undefined;
  };
  const fail = (message: string, path: readonly PropertyKey[]): never => {
    throw new InputError(message, { file, line: lineOf(path), field: formatPath(path) || undefined });
  };
  const raw: unknown = doc.toJS();
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) fail('a pool file must be a mapping with name and workers', []);
  rejectSecrets(raw, [], fail);
  const r = poolSchema.safeParse(raw);
  if (!r.success) {
    const iss = r.error.issues[0]!;
    if (iss.code === 'unrecognized_keys') {
      const path = [...iss.path, iss.keys[0]!];
      return fail(`unknown field${iss.keys.length > 1 ? 's' : ''} ${iss.keys.map((k) => JSON.stringify(k)).join(', ')}`, path);
    }
    return fail(iss.message, iss.path);
  }
  return { name: r.data.name, workers: r.data.workers.map(toSpec), ...(r.data.default_worker !== undefined && { defaultWorker: r.data.default_worker }) };
}

/** The name of the shipped pool of scripted workers (data/pools/scripted.yaml): simulations that answer any prompt, no keys. */
export const SCRIPTED_POOL = 'scripted';

/** The shipped scripted pool's file. */
export function scriptedPoolFile(): string {
  return resolve(REPO_ROOT, 'data', 'pools', 'scripted.yaml');
}

/** Load a pool file (.yaml, .yml or .json). */
export async function loadWorkerPool(path: string): Promise<WorkerPool> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new InputError(code === 'ENOENT' ? 'no such pool file' : `cannot read pool file: ${(e as Error).message}`, { file: path }, { cause: e });
  }
  return parseWorkerPool(text, path);
}

/** A WorkerPool in the file's shape. */
export function poolToFile(pool: WorkerPool): WorkerPoolFile {
  return {
    name: pool.name,
    ...(pool.defaultWorker !== undefined && { default_worker: pool.defaultWorker }),
    workers: pool.workers.map((w) => {
      const opt: Partial<WorkerPoolFile['workers'][number]> = {};
      if (w.apiKeyEnv !== undefined) opt.api_key_env = w.apiKeyEnv;
      if (w.baseUrl !== undefined) opt.base_url = w.baseUrl;
      if (w.settings.temperature !== undefined) opt.temperature = w.settings.temperature;
      if (w.settings.topP !== undefined) opt.top_p = w.settings.topP;
      if (w.settings.maxTokens !== undefined) opt.max_tokens = w.settings.maxTokens;
      if (w.settings.reasoningEffort !== undefined) opt.reasoning_effort = w.settings.reasoningEffort;
      if (w.description !== undefined) opt.description = w.description;
      if (w.size !== undefined) opt.size = w.size;
      if (w.script !== undefined) {
        const x = w.script;
        opt.script = {
          ...(x.seed !== undefined && { seed: x.seed }), ...(x.latencyMs !== undefined && { latency_ms: x.latencyMs }), ...(x.outputTokens !== undefined && { output_tokens: x.outputTokens }),
          ...(x.style !== undefined && { style: x.style }), ...(x.tools !== undefined && { tools: x.tools }),
          ...(x.toolRules !== undefined && { tool_rules: x.toolRules.map((r) => ({ when: r.when, tool: r.tool, arguments: r.arguments, ...(r.after !== undefined && { after: r.after }) })) }),
          ...(x.failures && { failures: { rate_limit: x.failures.rateLimit, server_error: x.failures.serverError, timeout: x.failures.timeout } }),
        };
      }
      const out: WorkerPoolFile['workers'][number] = {
        name: w.name,
        provider: w.provider,
        model: w.model,
        ...opt,
        price: { input: w.prices.inputPerMTok, output: w.prices.outputPerMTok },
      };
      return out;
    }),
  };
}

/** Write a pool file: JSON for a .json path, YAML otherwise. The pool is validated first. */
export async function writeWorkerPool(path: string, pool: WorkerPool): Promise<void> {
  const file = poolToFile(pool);
  const isJson = extname(path).toLowerCase() === '.json';
  const text = isJson ? `${JSON.stringify(file, null, 2)}\n` : stringify(file);
  parseWorkerPool(text, path); // the same checks as loading: never write a file we would refuse
  await mkdir(dirname(resolve(path)), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  try {
    await writeFile(tmp, text, 'utf8');
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/**
 * A pool from a spec: "llmrouter" (the replay pool of the default LLMRouter directory),
 * "llmrouter:<dir>" (of that directory), "scripted" (the shipped pool of scripted workers), or
 * else the path of a pool file.
 */
export async function resolvePool(spec: string): Promise<WorkerPool> {
  const s = spec.trim();
  if (s === 'llmrouter') return loadLlmRouterPool(defaultLlmRouterDir());
  if (s === SCRIPTED_POOL) return loadWorkerPool(scriptedPoolFile());
  if (s.startsWith('llmrouter:')) {
    const dir = s.slice('llmrouter:'.length).trim();
    if (dir === '') throw new InputError('"llmrouter:" needs a directory after the colon', { field: 'pool' });
    return loadLlmRouterPool(dir);
  }
  return loadWorkerPool(s);
}
