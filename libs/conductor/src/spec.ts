// Conductor specs: who writes the workflow. `llm:<worker or endpoint>`, `policy:<checkpoint>`,
// `fixed:single:<worker>`, `fixed:router:<checkpoint>`, `fixed:moa:<n>`, `fixed:chain`, and a
// comma list of several (`fugu ultra eval --conductor a,b`). Parsing checks the form only;
// `checkConductorSpec` checks it against a pool and a maximum number of steps. The fixed
// topologies become workflows through `fixedWorkflow` (fixed.ts).

import { InputError } from '@fugu/core';
import { resolveMaxSteps } from './workflow.ts';

/** The fixed topologies, in the order messages list them. */
export const FIXED_TOPOLOGIES = ['single', 'router', 'moa', 'chain'] as const;
export type FixedTopology = (typeof FIXED_TOPOLOGIES)[number];

/** The kinds of Conductor, in the order messages list them. */
export const CONDUCTOR_KINDS = ['llm', 'policy', 'fixed'] as const;
export type ConductorKind = (typeof CONDUCTOR_KINDS)[number];

/** A parsed conductor spec; `spec` is its canonical text (what rows and reports label it by). */
export type ConductorSpec =
  | { kind: 'llm'; spec: string; model: string }
  | { kind: 'policy'; spec: string; checkpoint: string }
  | { kind: 'fixed'; spec: string; topology: 'single'; worker: string }
  | { kind: 'fixed'; spec: string; topology: 'router'; checkpoint: string }
  | { kind: 'fixed'; spec: string; topology: 'moa'; n: number }
  | { kind: 'fixed'; spec: string; topology: 'chain' };

export type FixedConductorSpec = Extract<ConductorSpec, { kind: 'fixed' }>;

const FIELD = 'conductor';
const FORMS = 'llm:<worker or endpoint>, policy:<checkpoint>, fixed:single:<worker>, fixed:router:<checkpoint>, fixed:moa:<n>, fixed:chain';

function bad(text: string, why: string): InputError {
  return new InputError(`conductor spec ${JSON.stringify(text)}: ${why}`, { field: FIELD });
}

/** A name argument: non-empty, no whitespace, no comma (the list separator). */
function nameArg(text: string, what: string, value: string | undefined): string {
  if (value === undefined || value === '') throw bad(text, `missing ${what}`);
  if (/[\s,]/.test(value)) throw bad(text, `${what} ${JSON.stringify(value)} must not contain whitespace or commas`);
  return value;
}

/**
 * Parses one conductor spec (surrounding whitespace ignored). Anything else is an InputError
 * (field `conductor`) naming the spec and what is wrong: an unknown kind (the known ones
 * listed), an unknown topology (the known ones listed), a missing or malformed argument.
 * `fixed:moa:<n>` needs an integer n >= 1 here; its upper bound (maxSteps - 1, the pool size)
 * is checked by `checkConductorSpec`.
 */
export function parseConductorSpec(text: string): ConductorSpec {
  if (typeof text !== 'string') throw new InputError(`a conductor spec must be a string, got ${typeof text}`, { field: FIELD });
  const s = text.trim();
  if (s === '') throw new InputError(`empty conductor spec (one of ${FORMS})`, { field: FIELD });
  if (s.includes(',')) throw bad(s, 'one spec expected; parseConductorSpecs reads a comma list');
  const [kind, rest] = headAndRest(s);
  switch (kind) {
    case 'llm': {
      const model = nameArg(s, 'worker or endpoint name (llm:<worker or endpoint>)', rest);
      return { kind: 'llm', spec: `llm:${model}`, model };
    }
    case 'policy': {
      const checkpoint = nameArg(s, 'checkpoint id (policy:<checkpoint>)', rest);
      return { kind: 'policy', spec: `policy:${checkpoint}`, checkpoint };
    }
    case 'fixed':
      return parseFixed(s, rest);
    default:
      throw bad(s, `unknown kind ${JSON.stringify(kind)} (known kinds: ${CONDUCTOR_KINDS.join(', ')}; forms: ${FORMS})`);
  }
}

/** `a:b:c` -> [`a`, `b:c`]; no colon -> [text, undefined]. */
function headAndRest(text: string): [string, string | undefined] {
  const colon = text.indexOf(':');
  return colon < 0 ? [text, undefined] : [text.slice(0, colon), text.slice(colon + 1)];
}

function parseFixed(s: string, rest: string | undefined): FixedConductorSpec {
  const known = `known topologies: ${FIXED_TOPOLOGIES.join(', ')}`;
  if (rest === undefined || rest === '') throw bad(s, `missing topology (fixed:<topology>; ${known})`);
  const [topology, arg] = headAndRest(rest);
  switch (topology) {
    case 'single': {
      const worker = nameArg(s, 'worker name (fixed:single:<worker>)', arg);
      return { kind: 'fixed', spec: `fixed:single:${worker}`, topology: 'single', worker };
    }
    case 'router': {
      const checkpoint = nameArg(s, 'router checkpoint id (fixed:router:<checkpoint>)', arg);
      return { kind: 'fixed', spec: `fixed:router:${checkpoint}`, topology: 'router', checkpoint };
    }
    case 'moa': {
      if (arg === undefined || arg === '') throw bad(s, 'missing number of proposers (fixed:moa:<n>)');
      if (!/^[0-9]+$/.test(arg)) throw bad(s, `number of proposers ${JSON.stringify(arg)} is not a whole number (fixed:moa:<n>, n >= 1)`);
      const n = Number(arg);
      if (n < 1) throw bad(s, `number of proposers ${n} is out of range (n >= 1)`);
      return { kind: 'fixed', spec: `fixed:moa:${n}`, topology: 'moa', n };
    }
    case 'chain':
      if (arg !== undefined) throw bad(s, `fixed:chain takes no argument, got ${JSON.stringify(arg)}`);
      return { kind: 'fixed', spec: 'fixed:chain', topology: 'chain' };
    default:
      throw bad(s, `unknown topology ${JSON.stringify(topology)} (${known})`);
  }
}

/**
 * Parses a comma list of conductor specs (`a,b`; one spec is a list of one). Empty entries and
 * a spec given twice (same canonical text) are InputErrors naming the entry.
 */
export function parseConductorSpecs(text: string): ConductorSpec[] {
  if (typeof text !== 'string' || text.trim() === '') throw new InputError(`empty conductor spec list (one or more of ${FORMS}, separated by commas)`, { field: FIELD });
  const parts = text.split(',');
  const out: ConductorSpec[] = [];
  const seen = new Set<string>();
  parts.forEach((part, i) => {
    if (part.trim() === '') throw new InputError(`conductor spec list ${JSON.stringify(text)}: entry ${i + 1} is empty`, { field: FIELD });
    const spec = parseConductorSpec(part);
    if (seen.has(spec.spec)) throw new InputError(`conductor spec list ${JSON.stringify(text)}: ${spec.spec} appears twice`, { field: FIELD });
    seen.add(spec.spec);
    out.push(spec);
  });
  return out;
}

export type ConductorSpecContext = {
  /** the pool's worker names */
  workers: readonly string[];
  /** the maximum number of steps of a workflow (default 5) */
  maxSteps?: number;
  /** separately configured OpenAI-compatible endpoints an `llm:` Conductor may name besides the workers */
  endpoints?: readonly string[];
};

/**
 * Checks a parsed spec against a pool: a named worker must be in the pool (`llm:` may also name
 * one of `endpoints`); `fixed:moa:<n>` needs n <= maxSteps - 1 (n proposers and an aggregator)
 * and n <= the pool size; `fixed:chain` needs two workers and maxSteps >= 2. An InputError
 * (field `conductor`) names the spec and what is wrong, listing the pool where a name is unknown.
 * Checkpoints are not looked up here (that needs the database).
 */
export function checkConductorSpec(spec: ConductorSpec, ctx: ConductorSpecContext): void {
  const maxSteps = resolveMaxSteps(ctx.maxSteps);
  const workers = ctx.workers;
  const poolList = workers.length === 0 ? 'the pool is empty' : `the pool has ${workers.join(', ')}`;
  if (spec.kind === 'llm') {
    const endpoints = ctx.endpoints ?? [];
    if (!workers.includes(spec.model) && !endpoints.includes(spec.model)) {
      const eps = endpoints.length === 0 ? 'no endpoints are configured' : `endpoints: ${endpoints.join(', ')}`;
      throw bad(spec.spec, `unknown worker or endpoint ${JSON.stringify(spec.model)} (${poolList}; ${eps})`);
    }
    return;
  }
  if (spec.kind === 'policy') return;
  if (workers.length === 0) throw bad(spec.spec, 'the pool is empty');
  switch (spec.topology) {
    case 'single':
      if (!workers.includes(spec.worker)) throw bad(spec.spec, `unknown worker ${JSON.stringify(spec.worker)} (${poolList})`);
      return;
    case 'router':
      return;
    case 'moa':
      if (spec.n > maxSteps - 1) throw bad(spec.spec, `number of proposers ${spec.n} is out of range: at most maxSteps - 1 = ${maxSteps - 1} (n proposers and an aggregator in at most ${maxSteps} steps)`);
      if (spec.n > workers.length) throw bad(spec.spec, `number of proposers ${spec.n} is out of range: the pool has only ${workers.length} workers`);
      return;
    case 'chain':
      if (workers.length < 2) throw bad(spec.spec, `needs two workers (a solver and a verifier); ${poolList}`);
      if (maxSteps < 2) throw bad(spec.spec, `needs 2 steps, more than maxSteps = ${maxSteps}`);
      return;
  }
}
