// `fugu ultra` as a user runs it, before any workflow executes: bad arguments are usage errors
// (exit 2) naming the flag, a policy checkpoint of another pool among them (the unreachable
// conductor endpoint is in ultra-live.test.ts: it needs a workflow to run); a conductor run written straight into Postgres is listed, shown,
// reported (alone and with another run as seeds) and appears in `fugu status` / `fugu report`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConductorRun, getDatasetItems, getUltraDeployment, saveDataset, savePool } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { writeWorkerPool } from '@fugu/datasets';
import { replayPool, syntheticItems, testRedisUrl, writeFixtures } from '../support/eval-env.ts';

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
let t: TestDatabase;
let dir: string;
let files: { dataset: string; pool: string };

type Result = { code: number; stdout: string; stderr: string };
function fugu(args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [main, ...args],
      {
        env: { PATH: process.env.PATH, FUGU_HOME: dir, FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: t.url, FUGU_QUEUE_PREFIX: `ultra-cli-${randomBytes(3).toString('hex')}` },
        timeout: 60_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const items = syntheticItems(30, 3);
const pool = replayPool();

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(path.join(tmpdir(), 'fugu-ultra-cli-'));
  files = await writeFixtures(dir, items, pool);
}, 120_000);
afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('fugu ultra publish', () => {
  it('stores the deployment gateways serve as fugu-ultra; bad input is exit 2 naming the flag, nothing stored', async () => {
    const bad = await fugu(['ultra', 'publish', '--pool', files.pool, '--conductor', 'fixed:single:nobody']);
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toMatch(/field --conductor: .*unknown worker "nobody"/);
    const ranking = await fugu(['ultra', 'publish', '--pool', files.pool, '--conductor', 'fixed:moa:2', '--ranking', 'beta,nobody']);
    expect(ranking.code).toBe(2);
    expect(ranking.stderr).toMatch(/field --ranking: the ranking names nobody/);
    const steps = await fugu(['ultra', 'publish', '--pool', files.pool, '--conductor', 'fixed:moa:2', '--max-steps', '11']);
    expect(steps.code).toBe(2);
    expect(steps.stderr).toMatch(/options\.workflow\.maxSteps/);
    expect(await getUltraDeployment(t.db, 'fugu-ultra')).toBeUndefined();

    const ok = await fugu(['ultra', 'publish', '--pool', files.pool, '--conductor', 'fixed:moa:2', '--ranking', 'gamma,beta,alpha', '--max-tool-turns', '3', '--no-shared-memory']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout.trim()).toBe(`fugu-ultra: fixed:moa:2 on pool ${pool.name}`);
    const d = await getUltraDeployment(t.db, 'fugu-ultra');
    expect(d!.options).toMatchObject({ workflow: { maxSteps: 5, ranking: ['gamma', 'beta', 'alpha'] }, maxToolTurnsPerAgent: 3, sharedMemory: false });
    const again = await fugu(['ultra', 'publish', '--pool', files.pool, '--conductor', 'fixed:chain']);
    expect(again.stdout.trim()).toBe(`fugu-ultra: fixed:moa:2 -> fixed:chain on pool ${pool.name}`);
  });
});

describe('fugu ultra: bad input is exit 2 naming the flag', () => {
  const evalArgs = (...more: string[]): string[] => ['ultra', 'eval', '--dataset', files.dataset, '--pool', files.pool, '--local-conductors', '0', '--local-workers', '0', ...more];

  it('an unknown worker in a spec, an unknown topology, a bad spec list', async () => {
    const w = await fugu(evalArgs('--conductor', 'fixed:chain,fixed:single:nobody'));
    expect(w.code, w.stderr).toBe(2);
    expect(w.stderr).toMatch(/field --conductor: conductor spec "fixed:single:nobody": unknown worker "nobody" \(the pool has alpha, beta, gamma\)/);
    const l = await fugu(evalArgs('--conductor', 'llm:nobody'));
    expect(l.code).toBe(2);
    expect(l.stderr).toMatch(/field --conductor: .*unknown worker or endpoint "nobody"/);
    const topo = await fugu(evalArgs('--conductor', 'fixed:star'));
    expect(topo.code).toBe(2);
    expect(topo.stderr).toMatch(/field --conductor: .*unknown topology "star" \(known topologies: single, router, moa, chain\)/);
    const moa = await fugu(evalArgs('--conductor', 'fixed:moa:4'));
    expect(moa.code).toBe(2);
    expect(moa.stderr).toMatch(/field --conductor: .*number of proposers 4 is out of range/);
    const twice = await fugu(evalArgs('--conductor', 'fixed:chain,fixed:chain'));
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/field --conductor: .*fixed:chain appears twice/);
    const missing = await fugu(evalArgs());
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/field --conductor/);
    const ckpt = await fugu(evalArgs('--conductor', 'policy:nope'));
    expect(ckpt.code).toBe(2);
    expect(ckpt.stderr).toMatch(/field --conductor: .*no Conductor policy checkpoint "nope"/);
  });

  it('--workers: a worker outside the pool or named twice; a fixed topology that does not fit the restricted pool', async () => {
    const unknown = await fugu(evalArgs('--conductor', 'fixed:chain', '--workers', 'alpha,nobody'));
    expect(unknown.code, unknown.stderr).toBe(2);
    expect(unknown.stderr).toMatch(/field --workers: worker "nobody" is not in the pool \(it has alpha, beta, gamma\)/);
    const twice = await fugu(evalArgs('--conductor', 'fixed:chain', '--workers', 'alpha,alpha'));
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/field --workers: worker "alpha" is named twice/);
    const outside = await fugu(evalArgs('--conductor', 'fixed:single:gamma', '--workers', 'alpha,beta'));
    expect(outside.code).toBe(2);
    expect(outside.stderr).toMatch(/field --conductor: conductor spec "fixed:single:gamma": unknown worker "gamma" \(the pool has alpha, beta\)/);
    const moa = await fugu(evalArgs('--conductor', 'fixed:moa:3', '--workers', 'alpha,beta'));
    expect(moa.code).toBe(2);
    expect(moa.stderr).toMatch(/field --conductor: .*the pool has only 2 workers/);
  });

  it('max steps out of range, a bad split, repeats, sample; a missing dataset; an unknown run', async () => {
    for (const n of ['0', '11']) {
      const r = await fugu(evalArgs('--conductor', 'fixed:chain', '--max-steps', n));
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`field --max-steps: maxSteps must be an integer from 1 to 10, got ${n}`));
    }
    const split = await fugu(evalArgs('--conductor', 'fixed:chain', '--split', 'dev'));
    expect(split.code).toBe(2);
    expect(split.stderr).toMatch(/--split/);
    const rep = await fugu(evalArgs('--conductor', 'fixed:chain', '--repeats', '0'));
    expect(rep.code).toBe(2);
    expect(rep.stderr).toMatch(/field --repeats/);
    const sample = await fugu(evalArgs('--conductor', 'fixed:chain', '--sample', 'x'));
    expect(sample.code).toBe(2);
    expect(sample.stderr).toMatch(/field --sample: must be a whole number/);
    const noDs = await fugu(['ultra', 'eval', '--pool', files.pool, '--conductor', 'fixed:chain']);
    expect(noDs.code).toBe(2);
    expect(noDs.stderr).toMatch(/field --dataset/);
    const resume = await fugu(['ultra', 'eval', '--resume', 'nope', '--local-conductors', '0', '--local-workers', '0']);
    expect(resume.code).toBe(2);
    expect(resume.stderr).toMatch(/field --resume: no conductor run "nope"/);
    const show = await fugu(['ultra', 'show', 'nope']);
    expect(show.code).toBe(2);
    expect(show.stderr).toMatch(/no conductor run "nope"/);
    const rep2 = await fugu(['ultra', 'report', 'nope']);
    expect(rep2.code).toBe(2);
    expect(rep2.stderr).toMatch(/no conductor run "nope"/);
    // --replay: a missing file, a file that is not JSON, parameters out of range
    const noFile = await fugu(evalArgs('--conductor', 'fixed:chain', '--replay', path.join(dir, 'none.json')));
    expect(noFile.code).toBe(2);
    expect(noFile.stderr).toMatch(/field --replay: cannot read/);
    await writeFile(path.join(dir, 'bad.json'), '{ not json');
    const notJson = await fugu(evalArgs('--conductor', 'fixed:chain', '--replay', path.join(dir, 'bad.json')));
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toMatch(/field --replay: .*is not JSON/);
    await writeFile(path.join(dir, 'range.json'), JSON.stringify({ presets: { large: { keep: 2 } } }));
    const range = await fugu(evalArgs('--conductor', 'fixed:chain', '--replay', path.join(dir, 'range.json')));
    expect(range.code).toBe(2);
    expect(range.stderr).toMatch(/field --replay: .*keep must be in \[0, 1\], got 2/);
  });

  it('ultra run: an empty question, an unknown worker, max steps out of range, a bad item', async () => {
    for (const q of [[''], ['   '], []]) {
      const r = await fugu(['ultra', 'run', ...q, '--pool', files.pool]);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).toMatch(/field question: the question must not be empty/);
    }
    const w = await fugu(['ultra', 'run', 'What is 2+2?', '--pool', files.pool, '--conductor', 'fixed:single:nobody']);
    expect(w.code).toBe(2);
    expect(w.stderr).toMatch(/field --conductor: .*unknown worker "nobody"/);
    const two = await fugu(['ultra', 'run', 'What is 2+2?', '--pool', files.pool, '--conductor', 'fixed:chain,fixed:moa:2']);
    expect(two.code).toBe(2);
    expect(two.stderr).toMatch(/field --conductor: .*one conductor spec/);
    for (const n of ['0', '11', '42']) {
      const steps = await fugu(['ultra', 'run', 'What is 2+2?', '--pool', files.pool, '--conductor', 'fixed:chain', '--max-steps', n]);
      expect(steps.code).toBe(2);
      expect(steps.stderr).toMatch(new RegExp(`field --max-steps: maxSteps must be an integer from 1 to 10, got ${n}`));
    }
    const topo = await fugu(['ultra', 'run', 'What is 2+2?', '--pool', files.pool, '--conductor', 'fixed:star']);
    expect(topo.code).toBe(2);
    expect(topo.stderr).toMatch(/field --conductor: .*unknown topology "star"/);
    const item = await fugu(['ultra', 'run', '--item', `${files.dataset}:no-such-item`, '--pool', files.pool, '--conductor', 'fixed:chain']);
    expect(item.code).toBe(2);
    expect(item.stderr).toMatch(/field --item: dataset ".*" has no item "no-such-item"/);
  });
});

describe('a policy checkpoint of another pool', () => {
  it('`ultra eval` and `ultra run` refuse it, naming both worker lists (exit 2, one line)', async () => {
    const other = path.join(dir, 'other-pool.yaml');
    await writeWorkerPool(other, replayPool(['alpha', 'beta']));
    const init = await fugu(['ultra', 'policy', 'init', '--pool', other, '--id', 'pol-other']);
    expect(init.code, init.stderr).toBe(0);
    const msg = /field --conductor: conductor spec "policy:pol-other": checkpoint pol-other chooses from \[alpha, beta\] but the pool has \[alpha, beta, gamma\]/;
    const ev = await fugu(['ultra', 'eval', '--dataset', files.dataset, '--pool', files.pool, '--conductor', 'policy:pol-other', '--local-conductors', '0', '--local-workers', '0']);
    expect(ev.code, ev.stderr).toBe(2);
    expect(ev.stderr.trim().split('\n')).toHaveLength(1);
    expect(ev.stderr).toMatch(msg);
    const run = await fugu(['ultra', 'run', 'What is 2+2?', '--pool', files.pool, '--conductor', 'policy:pol-other']);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toMatch(msg);
    // nothing was stored for the refused eval
    expect(JSON.parse((await fugu(['ultra', 'list', '--json'])).stdout)).toEqual([]);
  });
});

describe('a conductor run in status, list, show and report', () => {
  it('lists, shows and reports runs written into Postgres', async () => {
    expect(JSON.parse((await fugu(['ultra', 'list', '--json'])).stdout)).toEqual([]);
    const ds = await saveDataset(t.db, { name: 'synthetic', source: 'test', contentHash: 'ultra-cli-ds', items });
    const stored = await getDatasetItems(t.db, ds.id);
    const { poolId, workers } = await savePool(t.db, pool, 'ultra-cli-pool');
    for (const [id, reward] of [['u1', 1], ['u2', 0.5]] as const) {
      await createConductorRun(t.db, {
        id, datasetId: ds.id, poolId, specs: ['fixed:single:alpha'], total: 2,
        options: { dataset: files.dataset, pool: files.pool, split: 'all', splitSeed: 0, sample: 2, seed: 0, repeats: 1, items: 2, workflow: { maxSteps: 5, ranking: ['beta', 'alpha', 'gamma'] } },
      });
      for (const it of stored.slice(0, 2)) {
        const wf = await t.db.insertInto('workflows').values({
          key: `${id}.${it.dbId}.0.0`, run_id: id, item_id: it.dbId, pool_id: poolId, question: it.prompt, conductor: 'fixed:single:alpha', options: '{}', status: 'done',
          reward, outcome: reward === 1 ? 'correct' : 'incorrect', parse_ok: true, topology: 'single', n_steps: 1, finish_reason: 'answered', latency_ms: 10, final_answer: 'x',
        }).returning('id').executeTakeFirstOrThrow();
        await t.db.insertInto('workflow_steps').values({
          workflow_id: wf.id, idx: 0, worker_id: workers[0]!.id, worker: 'alpha', subtask: 'solve', access: '"none"', sees: '[]', chat_call_id: `wf${wf.id}.s0`, status: 'ok', answer: 'x',
        }).execute();
      }
    }
    const list = await fugu(['ultra', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^u1\s+ultra pending\s+2\/2 workflows\s+failed 0\s+fixed:single:alpha/m);
    const status = await fugu(['status']);
    expect(status.stdout).toMatch(/^u2\s+ultra pending\s+2\/2 workflows/m);
    const statusJson = JSON.parse((await fugu(['status', '--json'])).stdout) as { conductorRuns: Array<{ run: { id: string } }> };
    expect(statusJson.conductorRuns.map((c) => c.run.id).sort()).toEqual(['u1', 'u2']);
    const one = JSON.parse((await fugu(['status', 'u1', '--json'])).stdout) as { conductorRun: { id: string }; progress: { counts: { done: number } }; summary: { results: Array<{ name: string; meanReward: number }> } };
    expect(one.conductorRun.id).toBe('u1');
    expect(one.progress.counts.done).toBe(2);
    expect(one.summary.results.map((r) => r.name)).toEqual(['fixed:single:alpha', 'best single (beta, by train mean)', 'oracle']);
    const show = await fugu(['ultra', 'show', 'u2']);
    expect(show.stdout).toMatch(/fixed:single:alpha: done 2, failed 0, running 0, pending 0/);
    expect(show.stdout).toMatch(/^fixed:single:alpha\s+2\s+0\.500\s+0\.000/m);

    const rep = JSON.parse((await fugu(['ultra', 'report', 'u1,u2', '--out', path.join(dir, 'seeds.html'), '--json'])).stdout) as { report: string; summary: { results: Array<{ name: string; meanReward: number; seeds?: { count: number; meanRewardSd: number } }> } };
    const r = rep.summary.results[0]!;
    expect(r).toMatchObject({ name: 'fixed:single:alpha', meanReward: 0.75, seeds: { count: 2 } });
    expect(r.seeds!.meanRewardSd).toBeCloseTo(Math.SQRT1_2 * 0.5, 12);
    // the data is written beside the HTML (the HTML too once the renderer is in the build)
    const data = JSON.parse(await readFile(path.join(dir, 'seeds.json'), 'utf8')) as { run: { id: string } };
    expect(data.run.id).toBe('u1,u2');
    const plain = await fugu(['report', 'u1', '--out', path.join(dir, 'u1.html')]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toMatch(/wrote the report of conductor run u1 to .*u1\.(html|json)/);
  });
});

// issue 28, section 3: `fugu ultra run` on the demo's own setup, in this process (no conductor or
// provider-worker process is started or needed), wherever the gateway answers
describe('fugu ultra run answers where the gateway does', () => {
  const QUESTION = 'who won the most gold metals in olympics'; // a question of the LLMRouter data (the README's)

  it('the replay pool llmrouter, a dataset question, no --conductor: the default Conductor, then the published one', async () => {
    // none published for llmrouter (the deployment above is the synthetic pool's): the default Conductor
    const r = await fugu(['ultra', 'run', QUESTION, '--pool', 'llmrouter']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^workflow \d+ \(q_\w+\) by fixed:moa:2: done, answered/m);
    expect(r.stdout).toContain(`question: ${QUESTION}`);
    // the aggregator reads both proposals: the replay step model's answer (recorded, or simulated from what it reads)
    expect(r.stdout).toMatch(/^step 2 \[[\w.-]+\] sees 0, 1: .*\n {2}ok: \[replay:[\w.-]+\] (recorded|simulated) score/m);
    expect(r.stdout).toMatch(/^final answer: \[replay:[\w.-]+\] (recorded|simulated) score/m);
    expect(r.stdout).toMatch(/^outcome: (correct|incorrect), reward [\d.]+$/m);
    expect(r.stderr).toMatch(/no Conductor is published as "fugu-ultra" for pool "llmrouter".*fixed:moa:2/);
    expect(r.stderr).not.toMatch(/replayStore|createChatModel/);

    const pub = await fugu(['ultra', 'publish', '--pool', 'llmrouter', '--conductor', 'fixed:moa:3']);
    expect(pub.code, pub.stderr).toBe(0);
    const p = await fugu(['ultra', 'run', QUESTION]); // the gateway's pool (FUGU_GATEWAY_POOL, default llmrouter)
    expect(p.code, p.stderr).toBe(0);
    expect(p.stdout).toMatch(/^workflow \d+ \(q_\w+\) by fixed:moa:3: done, answered/m);
    expect(p.stdout.match(/^ {2}ok: \[replay:/gm)).toHaveLength(4);
    expect(p.stdout).toMatch(/^final answer: \[replay:[\w.-]+\] (recorded|simulated) score/m);
    expect(p.stderr).toMatch(/the Conductor published as "fugu-ultra" for pool "llmrouter": fixed:moa:3/);
  }, 120_000);

  it('--pool scripted: any question, answered by the scripted workers', async () => {
    const r = await fugu(['ultra', 'run', 'How do I descale a kettle?', '--pool', 'scripted']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^workflow \d+ \(q_\w+\) by fixed:moa:2: done, answered/m);
    expect(r.stdout).toMatch(/^final answer: \[scripted sim-\w+\]/m);
    expect(r.stdout).not.toMatch(/^outcome:/m); // a free question has no verifier
  }, 120_000);

  it('a question that is not in the replay dataset: exit 1, a line saying so, quoting it, and what to use instead', async () => {
    const q = 'What is the capital of Atlantis, asked nowhere in the data?';
    const r = await fugu(['ultra', 'run', q, '--pool', 'llmrouter']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n').filter((l) => l.startsWith('fugu:'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`"${q}"`);
    expect(lines[0]).toMatch(/not a question of its dataset/);
    expect(lines[0]).toMatch(/--pool scripted/);
    expect(lines[0]).toMatch(/pool file of live workers/);
    expect(r.stderr).not.toMatch(/replayStore|createChatModel|at .*\.ts:\d+/);
  }, 120_000);
});
