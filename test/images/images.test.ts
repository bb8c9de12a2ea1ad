// test:images: fugu's CPU image built from this checkout and run as the stack of containers the
// Kubernetes manifests describe (test/images/stack.ts): Redis, Postgres, the migrations, a
// provider worker, a conductor, a router worker and a gateway in pool mode, and `fugu` commands as
// one-off containers.
// 1. the image: uid 10001 under tini, a read-only root filesystem (writes only to FUGU_HOME and
//    /tmp), nothing of the build's CA, its size;
// 2. an evaluation batch of the LLMRouter data (a seeded sample) through the containers, the
//    provider worker's container killed (docker kill) mid-batch and started again: every call row
//    and reward once, and the figures (per-worker rewards, tokens, cost, oracle shares, reference
//    figures) equal to those of the same command without containers;
// 3. a Conductor batch (fixed:moa:3) through the containers, the conductor's container stopped
//    (docker stop) mid-batch: it drains (nothing left running) and exits 0; started again, the
//    batch completes with every workflow, step and call once, the figures equal to those of the
//    same command without containers;
// 4. serving: a router trained and published by `fugu` containers; a router worker and a gateway
//    in pool mode answer a chat request, routed to one of the checkpoint's workers;
// 5. `docker stop` of each app's container: SIGTERM reaches Node through tini, the app shuts down
//    and exits 0 within its pod's terminationGracePeriodSeconds (k8s/base).
// Figures (build time, image size, stop times, ...) are printed at the end and, with
// FUGU_IMAGES_REPORT=<file>, written as JSON (docs/deploy.md quotes them).
import { readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { getCheckpoint, getRun, type Db } from '@fugu/db';
import { waitFor } from '../support/eval-env.ts';
import { APPS, buildImage, builder, DOCKER, docker, dockerOk, dockerUnavailable, nodeImage, repoRoot, serviceImages, Stack, type App, type Run } from './stack.ts';

const IMAGE = process.env.FUGU_IMAGES_TAG ?? 'fugu:images-test';
const SAMPLE = 500; // LLMRouter questions, x 9 replay workers = the batch's calls
const CONDUCTOR_SAMPLE = 100; // test-split questions; fixed:moa:3 = 4 steps a workflow
const CONDUCTOR_SPEC = 'fixed:moa:3';
const CONDUCTOR_CONCURRENCY = 4;
// quick stalled-job detection after the kill (default 30 s), as test:cluster
const LOCKS = { FUGU_WORKER_LOCK_MS: '3000', FUGU_CONDUCTOR_LOCK_MS: '3000' };

const report: Record<string, string | number> = {};
const say = (s: string) => process.stderr.write(`test:images: ${s}\n`);
let stack: Stack;

/** An app's grace period: its pod's terminationGracePeriodSeconds in k8s/base. */
function graceSeconds(app: App): number {
  const m = /terminationGracePeriodSeconds:\s*(\d+)/.exec(readFileSync(path.join(repoRoot, `k8s/base/${app}.yaml`), 'utf8'));
  if (!m) throw new Error(`k8s/base/${app}.yaml: no terminationGracePeriodSeconds`);
  return Number(m[1]);
}

/** Waits for fn while a command runs; the command ending first fails with what it said. */
async function whileRunning<T>(cmd: Promise<Run>, what: string, fn: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  let ended: Run | undefined;
  void cmd.then((r) => { ended = r; });
  return waitFor(what, async () => {
    if (ended) throw new Error(`the command ended (exit ${ended.code}) before ${what}:\n${ended.stderr.slice(-3000)}`);
    return fn();
  }, timeoutMs, 10);
}

function ok(r: Run, what: string): string {
  expect(r.code, `${what}\n${r.stderr.slice(-3000)}`).toBe(0);
  return r.stdout;
}

/** A counter of a Prometheus text page, summed over its label sets. */
function counter(page: string, name: string): number {
  let sum = 0;
  for (const line of page.split('\n')) if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

/** docker stop with the app's grace period: how long it took, the exit code, the app's own log of it. */
async function stopApp(app: App): Promise<{ ms: number; code: number; logged: boolean }> {
  const t0 = Date.now();
  await dockerOk(['stop', '-t', String(graceSeconds(app)), stack.name(app)]);
  const ms = Date.now() - t0;
  const logs = await stack.logs(app);
  // the shutdown's own log line, with the signal it got: SIGTERM passed through tini
  const logged = logs.split('\n').some((l) => l.includes('"msg":"shutting down"') && l.includes('"signal":"SIGTERM"'));
  return { ms, code: await stack.exitCode(app), logged };
}

beforeAll(async () => {
  const why = await dockerUnavailable();
  if (why) throw new Error(why);
  const server = await dockerOk(['version', '--format', '{{.Server.Version}}']);
  const client = await dockerOk(['version', '--format', '{{.Client.Version}}']);
  report['docker'] = `client ${client} (${DOCKER}), daemon ${server}, builder ${await builder()}`;
  const node = await nodeImage(say);
  report['NODE_IMAGE'] = `${node.image} (${node.source})`;
  const t0 = Date.now();
  await buildImage(IMAGE, node.image, path.join(repoRoot, '.fugu', 'images-build.log'));
  report['image build (this run; layers cached from earlier builds are reused)'] = `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  const services = await serviceImages(node.image, say);
  report['Redis and Postgres'] = services.source;
  stack = await Stack.start(IMAGE, services);
  // the migrations Job, then the workers the batches need
  const migrate = await stack.cli(['migrate'], { FUGU_LOG_LEVEL: 'info' });
  ok(migrate, 'fugu migrate (container)');
  await stack.startApp('provider-worker', LOCKS);
  // a few workflows at a time, so that the stop mid-batch (below) finds most of the batch still
  // waiting however fast the workers answer (the drain finishes only the ones in hand)
  await stack.startApp('conductor', { ...LOCKS, FUGU_CONDUCTOR_CONCURRENCY: String(CONDUCTOR_CONCURRENCY) });
}, 1_800_000);

afterAll(async () => {
  const rows = Object.entries(report);
  if (rows.length) {
    process.stdout.write(`\ntest:images\n${rows.map(([k, v]) => `  ${k.padEnd(60)} ${v}`).join('\n')}\n`);
    if (process.env.FUGU_IMAGES_REPORT) writeFileSync(process.env.FUGU_IMAGES_REPORT, `${JSON.stringify(report, null, 2)}\n`);
  }
  await stack?.stop();
}, 120_000);

describe('the image', () => {
  it('runs its apps as uid 10001 under tini, with a read-only root filesystem, and holds nothing of the build CA', async () => {
    const [config] = JSON.parse(await dockerOk(['image', 'inspect', IMAGE])) as Array<{ Size: number; Config: { User: string; Entrypoint: string[]; Env: string[] } }>;
    expect(config!.Config.User).toBe('10001:10001');
    expect(config!.Config.Entrypoint).toEqual(['/usr/bin/tini', '--']);
    report['image size'] = `${(config!.Size / 1e6).toFixed(0)} MB (${config!.Size} bytes)`;

    const c = stack.name('provider-worker');
    expect(await dockerOk(['exec', c, 'id', '-u'])).toBe('10001');
    // PID 1 is tini, with the app's command as its child
    expect((await dockerOk(['exec', c, 'cat', '/proc/1/cmdline'])).split('\0').filter(Boolean)).toEqual(['/usr/bin/tini', '--', ...APPS['provider-worker'].cmd]);
    expect(await dockerOk(['inspect', '--format', '{{.HostConfig.ReadonlyRootfs}}', c])).toBe('true');
    const write = await docker(['exec', c, 'touch', '/app/x']);
    expect(write.code).not.toBe(0);
    expect(write.stderr).toMatch(/Read-only file system/);
    // where it may write: FUGU_HOME (the image's volume) and /tmp
    ok(await docker(['exec', c, 'sh', '-c', 'touch /var/lib/fugu/x /tmp/x && rm /var/lib/fugu/x /tmp/x']), 'writes to FUGU_HOME and /tmp');

    // the host's CA bundle was the deps stage's (DEPS_IMAGE) only
    expect(config!.Config.Env.filter((e) => e.startsWith('NODE_EXTRA_CA_CERTS='))).toEqual([]);
    const history = await dockerOk(['history', '--no-trunc', '--format', '{{.CreatedBy}}', IMAGE]);
    expect(history).not.toMatch(/fugu-build-ca|NODE_EXTRA_CA_CERTS|DEPS_IMAGE/);
    const bundle = process.env.FUGU_BUILD_CA ?? process.env.NODE_EXTRA_CA_CERTS;
    const files = await dockerOk(['run', '--rm', '--entrypoint', 'sh', IMAGE, '-c', 'ls /usr/local/share/fugu-build-ca.pem 2>/dev/null; sha256sum /etc/ssl/certs/ca-certificates.crt']);
    expect(files).not.toContain('fugu-build-ca.pem');
    if (bundle && bundle !== 'none') {
      const hostHash = createHash('sha256').update(readFileSync(bundle)).digest('hex');
      expect(files, "the image's CA bundle is Debian's, not the host's").not.toContain(hostHash);
    }
  });
});

/** [call rows, distinct (item, worker, repetition) among them, reward rows, distinct among them] */
async function rowsOf(db: Db, runId: string): Promise<number[]> {
  const q = (table: 'calls' | 'rewards') =>
    sql<{ n: string; distinct: string }>`select count(*) as n, count(distinct (item_id, worker_id, repetition)) as distinct from ${sql.table(table)} where run_id = ${runId}`.execute(db);
  const [calls, rewards] = [(await q('calls')).rows[0]!, (await q('rewards')).rows[0]!];
  return [calls.n, calls.distinct, rewards.n, rewards.distinct].map(Number);
}

type EvalJson = { run: { id: string; status: string; totalCalls: number }; summary: { run: Record<string, unknown>; workers: Array<Record<string, unknown>>; reference: { bestSingle: { worker: string; mean: number }; oracle: number } } };
/** An evaluation's figures, less what names the run or measures time. */
const evalFigures = (j: EvalJson) => ({
  ...j.summary,
  run: { ...j.summary.run, id: undefined, createdAt: undefined, finishedAt: undefined, durationS: undefined, callsPerS: undefined },
  workers: j.summary.workers.map(({ latencyP50Ms: _a, latencyP95Ms: _b, ...w }) => w),
});

describe('an evaluation batch through the containers', () => {
  it('the provider worker killed mid-batch and started again: every row once, the figures of the same command without containers', async () => {
    const total = SAMPLE * 9;
    const args = ['eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--sample', String(SAMPLE), '--repetitions', '1', '--seed', '0', '--json'];
    const calls = async () => counter(await stack.httpGet('provider-worker', '/metrics'), 'fugu_provider_calls_total');
    const before = await calls();
    const t0 = Date.now();
    // the operator's command as a one-off container, followed to the end; the stack's worker does the calls
    const batch = stack.cli([...args, '--run-id', 'img-eval', '--local-workers', '0']);
    await whileRunning(batch, 'the provider worker at work on the batch', async () => (await calls()) >= before + total / 6, 180_000);
    ok(await docker(['kill', stack.name('provider-worker')]), 'docker kill');
    const atKill = (await getRun(stack.db, 'img-eval'))!;
    expect(atKill.doneCalls, 'killed mid-batch').toBeLessThan(total);
    await waitFor('the killed container to stop', async () => !(await stack.running('provider-worker')), 30_000, 50);
    const killed = await stack.exitCode('provider-worker');
    expect(killed, 'SIGKILL: 128 + 9').toBe(137);
    report['eval: provider worker docker kill mid-batch (calls done at the kill) -> exit code'] = `${killed} (${atKill.doneCalls} of ${total})`;
    // what its Deployment would do: the container again
    ok(await docker(['start', stack.name('provider-worker')]), 'docker start');
    await stack.ready('provider-worker');
    const containers = JSON.parse(ok(await batch, 'fugu eval (container)')) as EvalJson;
    report['eval: CLI start -> completed (container, with the kill)'] = `${((Date.now() - t0) / 1000).toFixed(1)} s`;
    expect(containers.run.status).toBe('completed');
    expect(containers.run.totalCalls).toBe(total);
    expect(await rowsOf(stack.db, 'img-eval'), 'call rows, distinct, reward rows, distinct').toEqual([total, total, total, total]);
    const run = (await getRun(stack.db, 'img-eval'))!;
    expect([run.doneCalls, run.failedCalls]).toEqual([total, 0]);

    // the same command without containers (its own provider worker process, queue prefix `host`)
    const atHostStart = await calls();
    const t1 = Date.now();
    const host = JSON.parse(ok(await stack.hostCli([...args, '--run-id', 'host-eval', '--local-workers', '1']), 'fugu eval (host)')) as EvalJson;
    report['eval: CLI start -> completed (host)'] = `${((Date.now() - t1) / 1000).toFixed(1)} s`;
    expect(await calls(), "the host run used no container's worker").toBe(atHostStart);
    expect(await rowsOf(stack.hostDb, 'host-eval')).toEqual([total, total, total, total]);
    expect(evalFigures(containers)).toEqual(evalFigures(host));
    const s = containers.summary;
    report['eval: calls / rows / spend USD (containers = host)'] = `${total} / ${total} / ${String(s.run.spendUsd)}`;
    report['eval: best single worker / oracle (mean reward)'] = `${s.reference.bestSingle.mean.toFixed(4)} (${s.reference.bestSingle.worker}) / ${s.reference.oracle.toFixed(4)}`;
  });
});

type UltraJson = { run: { id: string; status: string; total: number }; summary: { run: Record<string, unknown>; results: Array<Record<string, unknown> & { name: string; accuracy: number; meanReward: number; usdPerItem: { workers: number } }> } & Record<string, unknown> };
/** A Conductor run's figures, less what names the run or measures time. */
const ultraFigures = (j: UltraJson) => ({
  ...j.summary,
  run: { ...j.summary.run, id: undefined, createdAt: undefined, finishedAt: undefined },
  results: j.summary.results.map(({ latencyMs: _l, ...r }) => r),
});

/** What a conductor run stored: workflows, steps, the steps' chat calls (as test:cluster counts them). */
async function conductorRows(db: Db, runId: string) {
  const wf = await sql<{ n: number; keys: number; done: number; running: number; steps: number }>`
    select count(*)::int as n, count(distinct key)::int as keys, count(*) filter (where status = 'done')::int as done,
           count(*) filter (where status = 'running')::int as running, coalesce(sum(n_steps), 0)::int as steps
    from workflows where run_id = ${runId}`.execute(db);
  const st = await sql<{ n: number; distinct: number; ok: number; calls: number; callKeys: number }>`
    select count(*)::int as n, count(distinct (s.workflow_id, s.idx))::int as distinct, count(*) filter (where s.status = 'ok')::int as ok,
           (select count(*)::int from chat_calls c join workflow_steps s2 on c.key = s2.chat_call_id join workflows w2 on w2.id = s2.workflow_id where w2.run_id = ${runId}) as calls,
           (select count(distinct c.key)::int from chat_calls c join workflow_steps s2 on c.key = s2.chat_call_id join workflows w2 on w2.id = s2.workflow_id where w2.run_id = ${runId}) as "callKeys"
    from workflow_steps s join workflows w on w.id = s.workflow_id where w.run_id = ${runId}`.execute(db);
  return { workflows: wf.rows[0]!, steps: st.rows[0]! };
}

describe('a Conductor batch through the containers', () => {
  it(`${CONDUCTOR_SPEC}, the conductor stopped mid-batch (drained, exit 0) and started again: every workflow once, the figures of the same command without containers`, async () => {
    const total = CONDUCTOR_SAMPLE;
    const steps = total * 4;
    // under a step model measured on recorded multi-agent runs: the image carries them (was: none in /app/data/multistep/replay)
    const args = ['ultra', 'eval', '--dataset', 'llmrouter', '--pool', 'llmrouter', '--conductor', CONDUCTOR_SPEC, '--sample', String(total), '--seed', '0', '--replay', 'measured:dylan-math-cot.point', '--json'];
    const done = async () => counter(await stack.httpGet('conductor', '/metrics'), 'fugu_conductor_workflows_total');
    const before = await done();
    const t0 = Date.now();
    const batch = stack.cli([...args, '--run-id', 'img-ultra', '--local-conductors', '0', '--local-workers', '0']);
    await whileRunning(batch, 'the conductor at work on the batch', async () => (await done()) >= before + CONDUCTOR_CONCURRENCY, 180_000);
    const stop = await stopApp('conductor');
    // drained: the workflows it held are finished, none left running; the rest wait in the queue
    const atStop = await conductorRows(stack.db, 'img-ultra');
    expect(stop.code, `docker stop of the conductor\n${await stack.logs('conductor')}`).toBe(0);
    expect(stop.logged, 'the conductor logged its shutdown on SIGTERM').toBe(true);
    expect(atStop.workflows.running, 'workflows left running after the drain').toBe(0);
    expect(atStop.workflows.done, 'stopped mid-batch').toBeLessThan(total);
    report['conductor: docker stop mid-batch -> exit code (workflows done at the stop; stop took)'] = `${stop.code} (${atStop.workflows.done} of ${total}; ${(stop.ms / 1000).toFixed(2)} s)`;
    ok(await docker(['start', stack.name('conductor')]), 'docker start');
    await stack.ready('conductor');
    const containers = JSON.parse(ok(await batch, 'fugu ultra eval (container)')) as UltraJson;
    report['conductor: CLI start -> completed (container, with the stop)'] = `${((Date.now() - t0) / 1000).toFixed(1)} s`;
    expect([containers.run.status, containers.run.total]).toEqual(['completed', total]);
    const rows = await conductorRows(stack.db, 'img-ultra');
    expect(rows.workflows).toEqual({ n: total, keys: total, done: total, running: 0, steps });
    expect(rows.steps).toEqual({ n: steps, distinct: steps, ok: steps, calls: steps, callKeys: steps });

    const t1 = Date.now();
    const host = JSON.parse(ok(await stack.hostCli([...args, '--run-id', 'host-ultra', '--local-conductors', '1', '--local-workers', '1']), 'fugu ultra eval (host)')) as UltraJson;
    report['conductor: CLI start -> completed (host)'] = `${((Date.now() - t1) / 1000).toFixed(1)} s`;
    expect((await conductorRows(stack.hostDb, 'host-ultra')).workflows).toEqual({ n: total, keys: total, done: total, running: 0, steps });
    expect(ultraFigures(containers)).toEqual(ultraFigures(host));
    const moa = containers.summary.results.find((r) => r.name === CONDUCTOR_SPEC)!;
    report[`conductor: ${CONDUCTOR_SPEC} workflows / steps / accuracy / mean reward / worker USD per item (containers = host)`] =
      `${total} / ${steps} / ${moa.accuracy} / ${moa.meanReward} / ${moa.usdPerItem.workers}`;
  });
});

describe('serving from the containers', () => {
  it('a router trained and published by fugu containers; a router worker and a gateway in pool mode answer a chat request', async () => {
    const trained = ok(await stack.cli(['router', 'train', '--run', 'img-eval', '--epochs', '2', '--seed', '0']), 'fugu router train (container)');
    const checkpoint = trained.trim().split('\n').at(-1)!.trim();
    expect(checkpoint).toMatch(/^ckpt_/);
    ok(await stack.cli(['router', 'publish', checkpoint]), 'fugu router publish (container)');
    await stack.startApp('router-worker', { FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu', FUGU_ROUTER_THREADS: '1' });
    await stack.startApp('gateway', { FUGU_GATEWAY_MODE: 'pool', FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_POOL: 'llmrouter' });
    // a question the replay workers have answers for
    const first = JSON.parse(readFileSync(path.join(repoRoot, 'data/llmrouter/queries_test.jsonl'), 'utf8').split('\n')[0]!) as { query: string };
    const port = await stack.hostPort('gateway', APPS.gateway.port);
    const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: first.query }] }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await res.json()) as { model: string; choices?: Array<{ message: { content: string } }> };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(res.headers.get('x-fugu-worker')).toBe(body.model);
    const workers = (await getCheckpoint(stack.db, checkpoint))!.workers.map((w) => w.name);
    expect(workers).toContain(body.model);
    expect(body.choices?.[0]?.message.content).toBeTruthy();
    report['serving: routed answer from'] = body.model;
  });
});

describe('docker stop', () => {
  it.each(['gateway', 'router-worker', 'provider-worker', 'conductor'] as const)('%s: SIGTERM through tini, shut down, exit 0 within the grace period', async (app) => {
    expect(await stack.running(app)).toBe(true);
    const stop = await stopApp(app);
    // past the grace period docker stop sends SIGKILL: 137
    expect(stop.code, `${app}: exit code after docker stop -t ${graceSeconds(app)}\n${await stack.logs(app)}`).toBe(0);
    expect(stop.logged, `${app} logged its shutdown on SIGTERM`).toBe(true);
    report[`docker stop -t ${graceSeconds(app)} ${app}: exit code, time`] = `${stop.code}, ${(stop.ms / 1000).toFixed(2)} s`;
  });
});
