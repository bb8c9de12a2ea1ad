// `fugu ultra calibrate` against stub providers: a multiple-choice dataset written here and three
// stub workers on the OpenAI stub with scripted behaviour (solo: right on a known set of items;
// seeing another agent's answer: x always keeps its own, y always adopts the shown one, z adopts
// it on even items and keeps its own on odd ones), run through a provider-worker process and a
// conductor process on real Redis/Postgres. The estimates must equal the scripted rules (exact
// counts), the ReplayConfig must validate, a re-run (library and CLI) makes no provider call, the
// proposer's chain step comes from the response cache, and a replay pool is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { InputError, type DatasetItem, type WorkerSpec } from '@fugu/core';
import { validateReplayConfig } from '@fugu/conductor';
import { serviceEnv } from '@fugu/config';
import { writeDatasetJsonl, writeWorkerPool } from '@fugu/datasets';
import { sampleIndices } from '@fugu/evaluation';
import { startOpenAIStub, type OpenAIStub, type RecordedRequest } from '@fugu/providers/testing';
import { runCalibration, type CalibrationOptions, type CalibrationResult } from '@fugu/ultra-training';
import { createEvalEnv, replayPool, startWorkerProcess, type EvalEnv, type WorkerProcess } from '../support/eval-env.ts';
import { startConductorProcess, type ConductorProcess } from '../support/conductor.ts';

const KEY_ENV = 'FUGU_TEST_CALIBRATE_KEY';
const SECRET = 'sk-test-calibrate-0123456789';
const LABELS = ['A', 'B', 'C', 'D'];
const N_ITEMS = 30;
const SAMPLE = 24;
const SEED = 5;
const WORKERS = ['x', 'y', 'z'] as const;
type W = (typeof WORKERS)[number];

/** the scripted solo outcome of each worker on item i (every (s_B, s_A) cell occurs for every pair) */
const soloRight: Record<W, (i: number) => boolean> = { x: (i) => i % 2 === 0, y: (i) => i % 3 === 0, z: (i) => i % 5 < 2 };
/** what a worker answers when it sees another agent's answer: its own solo label or the shown one */
const adopts: Record<W, (i: number) => boolean> = { x: () => false, y: () => true, z: (i) => i % 2 === 0 };
const truth = (i: number): string => LABELS[i % 4]!;
const wrong = (i: number): string => LABELS[(i + 1) % 4]!;
const soloLabel = (w: W, i: number): string => (soloRight[w](i) ? truth(i) : wrong(i));

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
let env: EvalEnv;
let stub: OpenAIStub;
let worker: WorkerProcess;
let conductor: ConductorProcess;
let poolFile: string;
let replayPoolFile: string;
let datasetFile: string;
let first: CalibrationResult;

const lastUser = (req: RecordedRequest): string => {
  const msgs = (req.body?.messages ?? []) as Array<{ role: string; content: unknown }>;
  const c = msgs.filter((m) => m.role === 'user').at(-1)?.content;
  return typeof c === 'string' ? c : JSON.stringify(c);
};

const options = (o: Partial<CalibrationOptions> = {}): CalibrationOptions => ({
  dataset: datasetFile, pool: poolFile, sample: SAMPLE, seed: SEED, priorStrength: 0, keyCheck: false, localWorkers: 0, localConductors: 0, timeoutMs: 120_000, log: () => {}, ...o,
});

beforeAll(async () => {
  env = await createEvalEnv({ overrides: { 'worker.concurrency': 16, 'conductor.pollMs': 20, 'conductor.concurrency': 16 } });
  stub = await startOpenAIStub({
    apiKey: SECRET,
    defaultReply: (req) => {
      const w = String(req.body?.model).replace(/-model$/, '') as W;
      const q = lastUser(req);
      const i = Number(/Question m(\d+):/.exec(q)?.[1]);
      const shown = /It answered:\s*The answer is \(([A-D])\)/.exec(q)?.[1];
      const label = shown !== undefined && adopts[w](i) ? shown : soloLabel(w, i);
      return { type: 'text', text: `The answer is (${label}).`, usage: { input: 20, output: 5 } };
    },
  });
  const items: DatasetItem[] = Array.from({ length: N_ITEMS }, (_, i) => ({
    id: `m${i}`, task: 'mmlu', prompt: `Question m${i}: which option is right? (A) alpha (B) beta (C) gamma (D) delta`, groundTruth: truth(i), metric: 'multiple-choice',
    choices: { labels: LABELS, texts: ['alpha', 'beta', 'gamma', 'delta'] },
    // x's recorded outcomes agree with its live ones except on items 1 and 2 (drift)
    recorded: { x: { score: (soloRight.x(i) !== (i === 1 || i === 2)) ? 1 : 0 } },
  }));
  datasetFile = path.join(env.dir, 'mc.jsonl');
  await writeDatasetJsonl(datasetFile, items);
  const live: WorkerSpec[] = WORKERS.map((w) => ({ name: w, provider: 'openai', model: `${w}-model`, baseUrl: stub.baseURL, apiKeyEnv: KEY_ENV, settings: {}, prices: { inputPerMTok: '1', outputPerMTok: '2' } }));
  poolFile = path.join(env.dir, 'live.yaml');
  await writeWorkerPool(poolFile, { name: 'live-stub', workers: live });
  replayPoolFile = path.join(env.dir, 'replay.yaml');
  await writeWorkerPool(replayPoolFile, { name: 'mixed', workers: [live[0]!, ...replayPool(['alpha']).workers] });
  [worker, conductor] = await Promise.all([startWorkerProcess(env.config, { [KEY_ENV]: SECRET }), startConductorProcess(env.config, { [KEY_ENV]: SECRET, FUGU_CONDUCTOR_POLL_MS: '20' })]);
  first = await runCalibration(env.ctx, options());
}, 180_000);

afterAll(async () => {
  await conductor?.term();
  await worker?.term();
  await stub?.close();
  await env?.cleanup();
});

/** the cells expected from the scripts on the sampled items: per step worker, [n, correct] of keep, misled, adopt, fix */
function expectedCells(): Record<string, Record<'keep' | 'misled' | 'adopt' | 'fix', [number, number]>> {
  const sampled = sampleIndices(N_ITEMS, SAMPLE, SEED);
  const out: ReturnType<typeof expectedCells> = {};
  for (const b of WORKERS) {
    const cells = { keep: [0, 0], misled: [0, 0], adopt: [0, 0], fix: [0, 0] } as Record<'keep' | 'misled' | 'adopt' | 'fix', [number, number]>;
    for (const a of WORKERS) {
      if (a === b) continue;
      for (const i of sampled) {
        const s = soloRight[b](i), f = soloRight[a](i);
        const answer = adopts[b](i) ? soloLabel(a, i) : soloLabel(b, i);
        const cell = s ? (f ? 'keep' : 'misled') : f ? 'adopt' : 'fix';
        cells[cell][0]++;
        if (answer === truth(i)) cells[cell][1]++;
      }
    }
    out[b] = cells;
  }
  return out;
}

describe('fugu ultra calibrate on stub workers', () => {
  it('estimates equal the scripted rules, with exact counts; the config validates', () => {
    expect(first).toMatchObject({ items: SAMPLE, workers: [...WORKERS], dropped: 0, workflows: { solo: SAMPLE * 3, chains: SAMPLE * 6, failed: 0 } });
    expect(first.pairs).toEqual([['x', 'y'], ['x', 'z'], ['y', 'x'], ['y', 'z'], ['z', 'x'], ['z', 'y']]);
    expect(first.observations).toHaveLength(SAMPLE * 6);
    const want = expectedCells();
    for (const w of WORKERS) {
      const e = first.estimates.workers[w]!;
      for (const c of ['keep', 'misled', 'adopt', 'fix'] as const) {
        const [n, correct] = want[w]![c];
        expect(n).toBeGreaterThan(0);
        expect(e.cells[c]).toMatchObject({ n, correct, source: 'data' });
        expect(e.cells[c].estimate).toBeCloseTo(c === 'misled' ? 1 - correct / n : correct / n, 12);
      }
      expect(e.herd).toMatchObject({ n: 0, source: 'fallback', identified: false });
    }
    // the rules: x keeps its own answer, y adopts the shown one
    expect(first.estimates.workers.x!.params).toMatchObject({ keep: 1, misled: 0, adopt: 0, fix: 0 });
    expect(first.estimates.workers.y!.params).toMatchObject({ keep: 1, misled: 1, adopt: 1, fix: 0 });
    const z = first.estimates.workers.z!.params;
    expect(z.keep).toBe(1);
    expect(z.fix).toBe(0);
    expect(z.misled).toBeGreaterThan(0);
    expect(z.misled).toBeLessThan(1);
    // solo accuracy and drift against x's recorded outcomes
    const sampled = sampleIndices(N_ITEMS, SAMPLE, SEED);
    for (const w of WORKERS) expect(first.solo[w]).toMatchObject({ n: SAMPLE, correct: sampled.filter((i) => soloRight[w](i)).length });
    expect(first.solo.x!.recorded).toEqual({ n: SAMPLE, agree: SAMPLE - sampled.filter((i) => i === 1 || i === 2).length });
    expect(first.solo.y!.recorded).toBeUndefined();
    // the ReplayConfig: the four corners per worker (herd left to the presets)
    expect(validateReplayConfig(first.config)).toEqual(first.config);
    expect(first.config.workers!.y).toEqual({ params: { keep: 1, misled: 1, adopt: 1, fix: 0 } });
    expect(Object.keys(first.config.workers!.z!.params!)).toEqual(['keep', 'misled', 'adopt', 'fix']);
  });

  it('pays each solo answer once: the proposer steps of the chains come from the response cache', async () => {
    // every solo call, then only the step worker's call of each chain
    expect(stub.requestCount).toBe(SAMPLE * 3 + SAMPLE * 6);
    expect(first.cachedProposerSteps).toBe(SAMPLE * 6);
    const keys = await sql<{ key: string }>`select key from workflows order by key limit 3`.execute(env.ctx.db);
    expect(keys.rows[0]!.key).toMatch(new RegExp(`^calib\\.${first.id}\\.\\d+\\.[xyz](\\.[xyz])?$`));
  });

  it('a re-run makes no new call and gives the same estimates', async () => {
    const before = stub.requestCount;
    const again = await runCalibration(env.ctx, options());
    expect(stub.requestCount).toBe(before);
    expect(again.estimates).toEqual(first.estimates);
    expect(again.config).toEqual(first.config);
  });

  it('refuses a pool with a replay worker, naming it, before anything runs', async () => {
    const before = (await sql<{ n: number }>`select count(*)::int as n from workflows`.execute(env.ctx.db)).rows[0]!.n;
    const e = await runCalibration(env.ctx, options({ pool: replayPoolFile })).then(() => undefined, (x: unknown) => x);
    expect(e).toBeInstanceOf(InputError);
    expect((e as InputError).field).toBe('--pool');
    expect((e as Error).message).toMatch(/calibration needs live workers.*"alpha" is a replay worker/);
    expect((await sql<{ n: number }>`select count(*)::int as n from workflows`.execute(env.ctx.db)).rows[0]!.n).toBe(before);
  });
});

describe('the CLI', () => {
  const fugu = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(
        process.execPath, [main, ...args],
        { env: { PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_HOME: env.dir, FUGU_LOG_LEVEL: 'warn', [KEY_ENV]: SECRET }, timeout: 120_000, cwd: env.dir },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('resumes the same calibration (no new call), prints the table and writes the ReplayConfig', async () => {
    const before = stub.requestCount;
    const out = path.join(env.dir, 'calib.json');
    const r = await fugu(['ultra', 'calibrate', '--pool', poolFile, '--dataset', datasetFile, '--sample', String(SAMPLE), '--seed', String(SEED), '--prior-strength', '0', '--out', out, '--local-workers', '0', '--local-conductors', '0']);
    expect(r.stderr).toContain(`calibration ${first.id}`);
    expect(r.code).toBe(0);
    expect(stub.requestCount).toBe(before);
    expect(r.stdout).toMatch(/^worker\s+solo\s+keep\s+misled\s+adopt\s+fix\s+herd$/m);
    expect(r.stdout).toMatch(/^y\s+\d+\/24\s+1\.000 \(n \d+, [\d.]+-1\.000\)\s+1\.000 \(n \d+/m);
    expect(r.stdout).toMatch(/^\(pool\)/m);
    expect(r.stdout).toContain('fallback, not identified');
    expect(r.stdout).toContain(`recorded vs live solo outcomes: x ${first.solo.x!.recorded!.agree}/${SAMPLE} agree`);
    expect(JSON.parse(await readFile(out, 'utf8'))).toEqual(first.config);
  });

  it('a replay pool exits 2 naming --pool', async () => {
    const r = await fugu(['ultra', 'calibrate', '--pool', replayPoolFile, '--dataset', datasetFile, '--local-workers', '0', '--local-conductors', '0']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--pool.*replay worker/);
  });
});
