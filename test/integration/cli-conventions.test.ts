// The CLI's conventions, for every command there is: commander's command tree is walked (a new
// command is covered without touching this file), and each command's `--help` runs as a real
// process (exit 0, its usage line, every option it declares). `fugu --version` and the bin
// (`npx fugu`), and the `--json` output of every command that has one, parsed, on small data.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { allCommands, buildProgram, commandPath } from '../../apps/cli/src/program.ts';
import { createEsEnv, runCli, type EsEnv } from '../support/es-env.ts';
import { replayPool, startWorkerProcess, syntheticItems, writeFixtures, type WorkerProcess } from '../support/eval-env.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));
const version = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

type Result = { code: number; stdout: string; stderr: string };
function run(file: string, args: string[], opts: { cwd?: string } = {}): Promise<Result> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: opts.cwd ?? root, env: { PATH: process.env.PATH, HOME: process.env.HOME, FUGU_HOME: tmpdir() }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** Runs fn over the items, at most `limit` at once. */
async function pool<T, R>(items: readonly T[], limit: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  }));
  return out;
}

describe('fugu --help, --version and the bin', () => {
  const commands = allCommands(buildProgram());

  it('the tree holds every command group', () => {
    const paths = commands.map(commandPath);
    for (const p of ['fugu eval', 'fugu status', 'fugu router eval', 'fugu router study', 'fugu train es', 'fugu train compare', 'fugu keys list', 'fugu gateway', 'fugu demo', 'fugu ultra eval', 'fugu ultra run', 'fugu ultra report']) {
      expect(paths).toContain(p);
    }
    expect(commands.length).toBeGreaterThan(25);
  });

  it('--help on every command and subcommand: exit 0, its usage and all its options', async () => {
    const results = await pool(commands, 4, async (c) => ({ c, r: await run(process.execPath, [main, ...commandPath(c).split(' ').slice(1), '--help']) }));
    for (const { c, r } of results) {
      const name = commandPath(c);
      expect(r.code, `${name} --help: ${r.stderr}`).toBe(0);
      expect(r.stdout, name).toContain(`Usage: ${name}`);
      for (const o of c.options) expect(r.stdout, `${name} --help names ${o.long}`).toContain(o.long!);
      for (const sub of c.commands) expect(r.stdout, `${name} --help lists ${sub.name()}`).toContain(sub.name());
      for (const a of c.registeredArguments) expect(r.stdout, `${name} --help shows <${a.name()}>`).toContain(a.name());
    }
  }, 300_000);

  it('fugu --version and npx fugu --version print the package version', async () => {
    const direct = await run(process.execPath, [main, '--version']);
    expect(direct).toMatchObject({ code: 0, stdout: `${version}\n` });
    const bin = await run('npx', ['--no', '--', 'fugu', '--version']); // --no: never download a package named fugu
    expect(bin.code, bin.stderr).toBe(0);
    expect(bin.stdout).toBe(`${version}\n`);
  }, 120_000);
});

describe('--json', () => {
  let env: EsEnv;
  let worker: WorkerProcess | undefined;
  beforeAll(async () => {
    env = await createEsEnv({ items: 90 });
  }, 180_000);
  afterAll(async () => {
    await worker?.kill9().catch(() => {});
    await env?.cleanup();
  });

  const json = async (args: string[]): Promise<unknown> => {
    const r = await runCli(env.config, [...args, '--json']);
    expect(r.code, `${args.join(' ')}: ${r.stderr}`).toBe(0);
    return JSON.parse(r.stdout) as unknown;
  };

  it('eval (the summary), status, router list, router eval, router study, train compare and keys list each print one JSON document', async () => {
    worker = await startWorkerProcess(env.config);
    const files = await writeFixtures(`${env.dir}/json`, syntheticItems(30, 9), replayPool());
    const ev = (await json(['eval', '--dataset', files.dataset, '--pool', files.pool, '--run-id', 'json', '--local-workers', '0'])) as { run: { id: string; status: string }; summary: { workers: unknown[] } };
    expect(ev.run).toMatchObject({ id: 'json', status: 'completed' });
    expect(ev.summary.workers).toHaveLength(3);

    const list = (await json(['status'])) as { runs: Array<{ id: string }> };
    expect(list.runs.map((r) => r.id)).toEqual(expect.arrayContaining(['json', 'skills']));
    const one = (await json(['status', 'json'])) as { run: { doneCalls: number }; queues: unknown[] };
    expect(one.run.doneCalls).toBe(90);
    expect(one.queues).toHaveLength(1);

    const ckpts = (await json(['router', 'list'])) as Array<{ id: string }>;
    expect(ckpts.map((c) => c.id)).toContain(env.checkpointId);
    const ev2 = (await json(['router', 'eval', env.checkpointId, '--out', `${env.dir}/r.html`])) as { methods: Array<{ name: string }>; report: string };
    expect(ev2.methods[0]!.name).toBe('router');
    expect(ev2.report).toBe(`${env.dir}/r.html`);
    const study = (await json(['router', 'study', '--run', 'skills', '--seeds', '1', '--epochs', '2', '--out', `${env.dir}/s.html`])) as { seeds: number; summary: unknown[] };
    expect(study.seeds).toBe(1);
    expect(study.summary.length).toBeGreaterThan(3);

    const cmp = (await json(['train', 'compare', '--checkpoints', env.checkpointId, '--episodes', '5', '--questions', '2', '--turn-budget', '3', '--seeds', '0'])) as { rows: unknown[] };
    expect(cmp.rows.length).toBeGreaterThan(1);

    expect((await runCli(env.config, ['keys', 'create', '--name', 'json'])).code).toBe(0);
    const keys = (await json(['keys', 'list'])) as Array<{ name: string; spentUsd: string }>;
    expect(keys).toEqual([expect.objectContaining({ name: 'json', spentUsd: expect.any(String) })]);
    expect(JSON.stringify(keys)).not.toMatch(/fugu-sk-[A-Za-z0-9_-]{43}/);

    // an ES run, created without coordinating it: its status
    const es = await runCli(env.config, ['train', 'es', '--from', env.checkpointId, '--run-id', 'es-json', '--generations', '1', '--no-wait']);
    expect(es.code, es.stderr).toBe(0);
    const esStatus = (await json(['status', 'es-json'])) as { esRun: { id: string }; generations: unknown[] };
    expect(esStatus.esRun.id).toBe('es-json');
    expect(esStatus.generations).toEqual([]);
  }, 300_000);
});
