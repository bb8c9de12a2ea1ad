// The replay step model's parameters: five named numbers per worker, two presets by worker size,
// per-worker overrides, validation. See ./README.md for what each parameter means and the
// published measurements behind its default and range.

import { InputError } from '@fugu/core';

/** The five parameters of a worker performing a step that sees earlier answers. */
export type ReplayParams = {
  /** P(correct | the worker can solve the item, every visible answer correct) */
  keep: number;
  /** P(wrong | the worker can solve the item, every visible answer wrong) */
  misled: number;
  /** P(correct | the worker cannot solve the item, every visible answer correct) */
  adopt: number;
  /** P(correct | the worker cannot solve the item, every visible answer wrong) */
  fix: number;
  /** majority-following exponent of g_h(f) = f^h / (f^h + (1-f)^h); 1 is linear in f */
  herd: number;
};

export const REPLAY_PARAM_NAMES = ['keep', 'misled', 'adopt', 'fix', 'herd'] as const;
export type ReplayParamName = (typeof REPLAY_PARAM_NAMES)[number];

/** `large`: API frontier models and open models of about 27B and up; `small`: open models below that. */
export const SIZE_CLASSES = ['large', 'small'] as const;
export type SizeClass = (typeof SIZE_CLASSES)[number];

/** The presets of the evidence note (docs/analysis/conductor-replay/evidence.md, section 4.2). */
export const REPLAY_PRESETS: Readonly<Record<SizeClass, Readonly<ReplayParams>>> = Object.freeze({
  large: Object.freeze({ keep: 0.95, misled: 0.2, adopt: 0.6, fix: 0.05, herd: 2 }),
  small: Object.freeze({ keep: 0.8, misled: 0.5, adopt: 0.5, fix: 0.07, herd: 2 }),
});

export type ParamSpec = {
  /** what a value must lie in to be accepted at all (an InputError otherwise) */
  valid: readonly [number, number];
  /** the range the published measurements support (README); a value outside it is allowed but flagged by `outsideJustified` */
  justified: readonly [number, number];
};

export const REPLAY_PARAM_SPECS: Readonly<Record<ReplayParamName, ParamSpec>> = Object.freeze({
  keep: { valid: [0, 1], justified: [0.7, 0.99] },
  misled: { valid: [0, 1], justified: [0.05, 0.65] },
  adopt: { valid: [0, 1], justified: [0.3, 0.95] },
  fix: { valid: [0, 1], justified: [0, 0.15] },
  herd: { valid: [0.1, 10], justified: [1, 4] },
});

/** Sizes (billions of parameters) from this one up get the `large` preset. */
export const LARGE_FROM_BILLIONS = 27;

/** What the replay knows about one worker: an explicit class, a size, and/or text to read a size from. */
export type WorkerSizeInfo = {
  name: string;
  /** e.g. the pool card's description ("a 49-billion parameter model ...") */
  description?: string;
  /** parameters in billions, or a card's size text ("7B", "8x7B", "141B") */
  size?: number | string;
  sizeClass?: SizeClass;
};

const SIZE_RE = /(?:^|[^a-z0-9.])(?:(\d+)\s*x\s*)?(\d+(?:\.\d+)?)\s*(?:b\b|-?\s?billion\b)/i;

/** Billions of parameters read from a text such as "llama-3.1-8b-instruct", "8x7B", "a 49-billion parameter model"; undefined when none. */
export function parseBillions(text: string): number | undefined {
  const m = SIZE_RE.exec(text);
  if (!m) return undefined;
  const per = Number(m[2]);
  return m[1] !== undefined ? Number(m[1]) * per : per;
}

/**
 * The size class of a worker. In order: the explicit `sizeClass`; the explicit `size`; a
 * parameter count in the name; one in the description; else `large` (a name without a
 * parameter count is taken to be an API model, whose sizes are not published).
 * A mixture's total count decides ("8x7b" = 56B).
 */
export function sizeClassOf(w: WorkerSizeInfo): SizeClass {
  if (w.sizeClass) return w.sizeClass;
  const b =
    (typeof w.size === 'number' ? w.size : w.size !== undefined ? parseBillions(w.size) : undefined) ??
    parseBillions(w.name) ??
    (w.description !== undefined ? parseBillions(w.description) : undefined);
  if (b === undefined) return 'large';
  return b >= LARGE_FROM_BILLIONS ? 'large' : 'small';
}

/** Configuration of the replay model: preset overrides and per-worker size class and parameters. */
export type ReplayConfig = {
  /** where the values come from, in a sentence (a measured config names its table, corner and that the agents were not this pool's); reports show it next to the figures */
  source?: string;
  presets?: Partial<Record<SizeClass, Partial<ReplayParams>>>;
  /**
   * overrides for a step that reads k distinct other workers' answers, keyed by k ("2", "3", ...):
   * the entry with the largest key not above k applies over the worker's parameters (a measured
   * finding: adopt rises with the number of agreeing sources); none for k = 1
   */
  sources?: Record<string, Partial<ReplayParams>>;
  workers?: Record<string, { sizeClass?: SizeClass; size?: number | string; params?: Partial<ReplayParams> }>;
};

function checkParam(name: string, v: unknown, field: string): number {
  const spec = REPLAY_PARAM_SPECS[name as ReplayParamName];
  if (!spec) throw new InputError(`unknown replay parameter "${name}" (expected one of ${REPLAY_PARAM_NAMES.join(', ')})`, { field });
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new InputError(`${name} must be a finite number`, { field });
  const [lo, hi] = spec.valid;
  if (v < lo || v > hi) throw new InputError(`${name} must be in [${lo}, ${hi}], got ${v}`, { field });
  return v;
}

function checkPartial(v: unknown, field: string): Partial<ReplayParams> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new InputError('expected an object of replay parameters', { field });
  const out: Partial<ReplayParams> = {};
  for (const [k, x] of Object.entries(v)) out[k as ReplayParamName] = checkParam(k, x, field ? `${field}.${k}` : k);
  return out;
}

/** A full parameter set, validated: every one of the five present and in range; `field` prefixes the error's field. */
export function validateReplayParams(v: unknown, field = ''): ReplayParams {
  const p = checkPartial(v, field);
  for (const n of REPLAY_PARAM_NAMES) if (p[n] === undefined) throw new InputError(`missing replay parameter ${n}`, { field: field ? `${field}.${n}` : n });
  return p as ReplayParams;
}

/** A replay configuration (e.g. parsed from a calibration file), validated; an error names the field (`workers.gpt-4o.params.keep`). */
export function validateReplayConfig(v: unknown): ReplayConfig {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw new InputError('expected an object with presets and/or workers');
  const out: ReplayConfig = {};
  for (const [k, x] of Object.entries(v)) {
    if (k === 'source') {
      if (typeof x !== 'string' || x.trim() === '' || x.length > 2000) throw new InputError('expected a sentence saying where the values come from (at most 2000 characters)', { field: 'source' });
      out.source = x;
    } else if (k === 'sources') {
      if (x === null || typeof x !== 'object' || Array.isArray(x)) throw new InputError('expected an object keyed by the number of sources a step reads ("2", "3", ...)', { field: 'sources' });
      out.sources = {};
      for (const [n, ps] of Object.entries(x)) {
        if (!/^[1-9][0-9]*$/.test(n) || Number(n) < 2) throw new InputError(`a key of sources is a number of sources of 2 or more, got "${n}"`, { field: `sources.${n}` });
        out.sources[n] = checkPartial(ps, `sources.${n}`);
      }
    } else if (k === 'presets') {
      if (x === null || typeof x !== 'object' || Array.isArray(x)) throw new InputError('expected an object keyed by size class', { field: 'presets' });
      out.presets = {};
      for (const [c, ps] of Object.entries(x)) {
        if (!(SIZE_CLASSES as readonly string[]).includes(c)) throw new InputError(`unknown size class "${c}" (expected ${SIZE_CLASSES.join(' or ')})`, { field: `presets.${c}` });
        out.presets[c as SizeClass] = checkPartial(ps, `presets.${c}`);
      }
    } else if (k === 'workers') {
      if (x === null || typeof x !== 'object' || Array.isArray(x)) throw new InputError('expected an object keyed by worker name', { field: 'workers' });
      out.workers = {};
      for (const [name, w] of Object.entries(x)) {
        const f = `workers.${name}`;
        if (w === null || typeof w !== 'object' || Array.isArray(w)) throw new InputError('expected an object with sizeClass, size and/or params', { field: f });
        const entry: NonNullable<ReplayConfig['workers']>[string] = {};
        for (const [wk, wv] of Object.entries(w)) {
          if (wk === 'sizeClass') {
            if (!(SIZE_CLASSES as readonly unknown[]).includes(wv)) throw new InputError(`sizeClass must be ${SIZE_CLASSES.join(' or ')}`, { field: `${f}.sizeClass` });
            entry.sizeClass = wv as SizeClass;
          } else if (wk === 'size') {
            if (!((typeof wv === 'number' && Number.isFinite(wv) && wv > 0) || (typeof wv === 'string' && parseBillions(wv) !== undefined))) {
              throw new InputError('size must be a positive number of billions or a text such as "7B"', { field: `${f}.size` });
            }
            entry.size = wv;
          } else if (wk === 'params') {
            entry.params = checkPartial(wv, `${f}.params`);
          } else {
            throw new InputError(`unknown field "${wk}" (expected sizeClass, size or params)`, { field: `${f}.${wk}` });
          }
        }
        out.workers[name] = entry;
      }
    } else {
      throw new InputError(`unknown field "${k}" (expected source, presets, sources or workers)`, { field: k });
    }
  }
  return out;
}

/**
 * The parameters a worker uses when it performs a step: its class's preset (with the config's
 * preset overrides), then the config's per-worker overrides. `info` supplies a description or
 * size when the config gives none.
 */
export function resolveWorkerParams(config: ReplayConfig, worker: string, info: Omit<WorkerSizeInfo, 'name'> & { sources?: number } = {}): ReplayParams & { sizeClass: SizeClass } {
  const { sources, ...size } = info;
  const own = config.workers?.[worker];
  const sizeInfo: WorkerSizeInfo = { ...size, name: worker };
  if (own?.size !== undefined) sizeInfo.size = own.size;
  if (own?.sizeClass !== undefined) sizeInfo.sizeClass = own.sizeClass;
  const sizeClass = sizeClassOf(sizeInfo);
  return { ...REPLAY_PRESETS[sizeClass], ...config.presets?.[sizeClass], ...own?.params, ...(sources !== undefined && sourcesOverride(config, sources)), sizeClass };
}

/** The `sources` entry of a config that applies to a step reading k sources: the largest key not above k (none below 2). */
export function sourcesOverride(config: Pick<ReplayConfig, 'sources'>, k: number): Partial<ReplayParams> | undefined {
  let best: number | undefined;
  for (const key of Object.keys(config.sources ?? {})) {
    const n = Number(key);
    if (n <= k && (best === undefined || n > best)) best = n;
  }
  return best === undefined ? undefined : config.sources![String(best)];
}

/** The parameters outside the range the published measurements support (allowed, but worth a warning). */
export function outsideJustified(p: ReplayParams): ReplayParamName[] {
  return REPLAY_PARAM_NAMES.filter((n) => p[n] < REPLAY_PARAM_SPECS[n].justified[0] || p[n] > REPLAY_PARAM_SPECS[n].justified[1]);
}
