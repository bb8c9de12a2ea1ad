// fugu as containers on one Docker daemon (test:images): the CPU image built from this checkout
// (infra/container/build-image.sh), Redis and Postgres (their official images where they can be
// pulled, else one image built on the Node base from Debian's redis-server and postgresql
// packages), and the apps, each a container of the image running its documented command, as the
// Kubernetes manifests run them: non-root (the image's uid 10001), read-only root filesystem, a
// tmpfs on /tmp, FUGU_HOME on the image's volume, all capabilities dropped, no new privileges,
// configured only by environment, on a network of their own. The test process is the observer:
// Postgres, Redis and the apps' ops ports are published on 127.0.0.1 only.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { connectDb, type Db } from '@fugu/db';
import { isReachable } from '@fugu/local-services';
import { waitFor } from '../support/eval-env.ts';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The docker client: DOCKER, else `docker` on PATH. */
export const DOCKER = process.env.DOCKER ?? 'docker';
let builderChoice: Promise<'legacy' | 'buildkit'> | undefined;
/**
 * The builder: FUGU_IMAGES_BUILDER (legacy | buildkit); else BuildKit where this client has it
 * (built in before Docker 23, the buildx plugin since), else the legacy builder (DOCKER_BUILDKIT=0,
 * which every client still has). BuildKit builds the two stages at once.
 */
export function builder(): Promise<'legacy' | 'buildkit'> {
  builderChoice ??= (async () => {
    const set = process.env.FUGU_IMAGES_BUILDER;
    if (set === 'legacy' || set === 'buildkit') return set;
    if (set) throw new Error(`FUGU_IMAGES_BUILDER must be legacy or buildkit, got "${set}"`);
    const client = Number((await docker(['version', '--format', '{{.Client.Version}}'])).stdout.trim().split('.')[0]);
    if (client > 0 && client < 23) return 'buildkit';
    return (await docker(['buildx', 'version'])).code === 0 ? 'buildkit' : 'legacy';
  })();
  return builderChoice;
}
const builderEnv = async () => ({ DOCKER_BUILDKIT: (await builder()) === 'buildkit' ? '1' : '0' });
const OFFICIAL_NODE = 'node:24-bookworm-slim';
const OFFICIAL_REDIS = 'redis:7-bookworm';
const OFFICIAL_POSTGRES = 'postgres:17-bookworm';

export type Run = { code: number | null; stdout: string; stderr: string };

/** Runs a command to its end: exit code and output (never throws for a non-zero exit). */
export function run(cmd: string, args: string[], opts: { input?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; cwd?: string } = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: opts.cwd ?? repoRoot, env: opts.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => { stdout += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { stderr += d.toString(); });
    const timer = opts.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs) : undefined;
    child.once('error', reject);
    child.once('close', (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    // a command that exits without reading its input (docker failing at once) closes the pipe:
    // its exit code tells what happened, the write's EPIPE adds nothing
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
  });
}

export const docker = (args: string[], opts: { input?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<Run> =>
  run(DOCKER, args, { ...opts, env: { ...process.env, ...opts.env } });

/** docker, its stdout trimmed; a non-zero exit throws with what it said. */
export async function dockerOk(args: string[], opts: { input?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<string> {
  const r = await docker(args, opts);
  if (r.code !== 0) throw new Error(`docker ${args.join(' ')} exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(-3000)}`);
  return r.stdout.trim();
}

/** Why no Docker daemon can be used, or undefined when one answers. */
export async function dockerUnavailable(): Promise<string | undefined> {
  const r = await docker(['version', '--format', '{{.Server.Version}}']).catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message }));
  if (r.code === 0 && r.stdout.trim()) return undefined;
  return `test:images needs a Docker daemon (${DOCKER} version: ${(r.stderr || r.stdout).trim().split('\n').at(-1)}); start dockerd, or set DOCKER_HOST / DOCKER`;
}

const exists = async (image: string): Promise<boolean> => (await docker(['image', 'inspect', image])).code === 0;

/** An image that is here or can be pulled (a registry that cannot be reached fails in seconds). */
async function pulled(image: string): Promise<boolean> {
  if (await exists(image)) return true;
  const r = await docker(['pull', '-q', image], { timeoutMs: 300_000 });
  return r.code === 0;
}

/** NODE_IMAGE: NODE_IMAGE when set; else node:24-bookworm-slim where it can be pulled; else infra/container/base-image.sh's. */
export async function nodeImage(log: (s: string) => void): Promise<{ image: string; source: string }> {
  if (process.env.NODE_IMAGE) return { image: process.env.NODE_IMAGE, source: 'NODE_IMAGE' };
  if (await pulled(OFFICIAL_NODE)) return { image: OFFICIAL_NODE, source: 'official' };
  log(`${OFFICIAL_NODE} cannot be pulled: the base from Debian packages (infra/container/base-image.sh)`);
  const r = await run('bash', ['infra/container/base-image.sh'], { env: { ...process.env, DOCKER } });
  if (r.code !== 0) throw new Error(`infra/container/base-image.sh failed:\n${r.stderr.slice(-4000)}`);
  return { image: r.stdout.trim().split('\n').at(-1)!, source: 'base-image.sh' };
}

/** Builds the CPU image with infra/container/build-image.sh; its build log goes to logFile. */
export async function buildImage(tag: string, node: string, logFile: string): Promise<void> {
  const r = await run('bash', ['infra/container/build-image.sh', '-t', tag, '--builder', await builder()], { env: { ...process.env, DOCKER, NODE_IMAGE: node } });
  await mkdir(path.dirname(logFile), { recursive: true });
  await writeFile(logFile, r.stderr);
  if (r.code !== 0) throw new Error(`building ${tag} failed (log: ${logFile}):\n${r.stderr.slice(-4000)}`);
}

type Service = { image: string; args: string[]; user?: string; env: string[] };
export type Services = { source: string; redis: Service; postgres: Service };

const REDIS_ARGS = ['redis-server', '--bind', '0.0.0.0', '--protected-mode', 'no', '--save', '', '--appendonly', 'no'];
// fsync off: nothing here crashes Postgres, and the disk is not what this test measures
const PG_SETTINGS = ['-c', 'fsync=off', '-c', 'max_connections=200'];

/**
 * Redis and Postgres: their official images where both can be pulled; else one image built on the
 * Node base (NODE_IMAGE) from Debian's redis-server and postgresql packages, its Postgres cluster
 * made at build time (trust auth: the network is the test's own), reused by its content's hash.
 */
export async function serviceImages(base: string, log: (s: string) => void): Promise<Services> {
  if ((await pulled(OFFICIAL_REDIS)) && (await pulled(OFFICIAL_POSTGRES))) {
    return {
      source: 'official',
      redis: { image: OFFICIAL_REDIS, args: REDIS_ARGS, env: [] },
      postgres: { image: OFFICIAL_POSTGRES, args: ['postgres', ...PG_SETTINGS], env: ['POSTGRES_HOST_AUTH_METHOD=trust'] },
    };
  }
  const dockerfile = [
    `FROM ${base}`,
    'RUN apt-get update -q \\',
    ' && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends redis-server postgresql \\',
    ' && rm -rf /var/lib/apt/lists/* \\',
    ' && ln -s "$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)" /usr/local/lib/postgresql-bin \\',
    ' && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \\',
    ' && runuser -u postgres -- /usr/local/lib/postgresql-bin/initdb -D /var/lib/postgresql/data -U postgres --auth=trust --encoding=UTF8 --no-locale >/dev/null \\',
    " && echo 'host all all all trust' >> /var/lib/postgresql/data/pg_hba.conf",
    '',
  ].join('\n');
  const baseId = await dockerOk(['image', 'inspect', '--format', '{{.Id}}', base]);
  const tag = `fugu-images-services:${createHash('sha256').update(`${baseId}\n${dockerfile}`).digest('hex').slice(0, 12)}`;
  if (!(await exists(tag))) {
    log(`${OFFICIAL_REDIS} / ${OFFICIAL_POSTGRES} cannot be pulled: building ${tag} from Debian's redis-server and postgresql on ${base}`);
    const network = process.env.FUGU_BUILD_NETWORK ?? 'host';
    await dockerOk(['build', ...(network === 'default' ? [] : ['--network', network]), '-t', tag, '-'], { input: dockerfile, env: await builderEnv(), timeoutMs: 900_000 });
  }
  return {
    source: `Debian packages (${tag})`,
    redis: { image: tag, args: REDIS_ARGS, env: [] },
    postgres: { image: tag, user: 'postgres', args: ['/usr/local/lib/postgresql-bin/postgres', '-D', '/var/lib/postgresql/data', '-c', 'listen_addresses=*', ...PG_SETTINGS], env: [] },
  };
}

export type App = 'provider-worker' | 'router-worker' | 'conductor' | 'gateway';
/** Each app's command and ops port: the Dockerfile's comment, the manifests, docs/deploy.md. */
export const APPS: Record<App, { cmd: string[]; port: number }> = {
  'provider-worker': { cmd: ['node', 'apps/provider-worker/src/main.ts'], port: 9464 },
  'router-worker': { cmd: ['node', 'apps/router-worker/src/main.ts'], port: 9465 },
  conductor: { cmd: ['node', 'apps/conductor/src/main.ts'], port: 9472 },
  gateway: { cmd: ['node', 'apps/gateway/src/main.ts'], port: 8080 },
};

/** The containers of one test run, named <prefix>-<what>, on the network <prefix>. */
export class Stack {
  readonly prefix = `fugu-images-${process.pid}`;
  readonly image: string;
  readonly dir: string;
  redisPort = 0;
  pgPort = 0;
  /** the containers' database */
  db!: Db;
  /** the database of the runs without containers */
  hostDb!: Db;
  private cliCount = 0;
  private readonly ports = new Map<string, number>();

  private constructor(image: string, dir: string) {
    this.image = image;
    this.dir = dir;
  }

  static async start(image: string, services: Services): Promise<Stack> {
    const s = new Stack(image, await mkdtemp(path.join(tmpdir(), 'fugu-images-')));
    try {
      await dockerOk(['network', 'create', s.prefix]);
      await s.startServices(services);
    } catch (e) {
      await s.stop();
      throw e;
    }
    return s;
  }

  name(what: string): string {
    return `${this.prefix}-${what}`;
  }

  /**
   * The host port (on 127.0.0.1) a container's port is published on, read once; it changes when
   * the container restarts (fresh: read it again).
   */
  async hostPort(what: string, port: number, fresh = false): Promise<number> {
    const key = `${what}:${port}`;
    const known = this.ports.get(key);
    if (known !== undefined && !fresh) return known;
    const out = await dockerOk(['port', this.name(what), `${port}/tcp`]);
    const m = /127\.0\.0\.1:(\d+)/.exec(out);
    if (!m) throw new Error(`${this.name(what)}: port ${port} is not published on 127.0.0.1 (${out})`);
    this.ports.set(key, Number(m[1]));
    return Number(m[1]);
  }

  private async startServices(services: Services): Promise<void> {
    const svc = (what: string, s: Service, port: number) =>
      dockerOk(['run', '-d', '--name', this.name(what), '--network', this.prefix, '-p', `127.0.0.1::${port}`, ...(s.user ? ['--user', s.user] : []), ...s.env.flatMap((e) => ['-e', e]), s.image, ...s.args]);
    await svc('redis', services.redis, 6379);
    await svc('postgres', services.postgres, 5432);
    this.redisPort = await this.hostPort('redis', 6379);
    this.pgPort = await this.hostPort('postgres', 5432);
    await waitFor('Redis in its container', async () => (await this.running('redis')) && isReachable(this.redisUrlHost, 1_000), 60_000, 100).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${await this.logs('redis')}`);
    });
    const admin = `postgres://postgres@127.0.0.1:${this.pgPort}/postgres`;
    await waitFor('Postgres in its container', async () => (await this.running('postgres')) && isReachable(admin, 1_000), 120_000, 200).catch(async (e: Error) => {
      throw new Error(`${e.message}: ${await this.logs('postgres')}`);
    });
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      // (the official image restarts once after its first initdb: retry the first statement)
      // fugu: the containers'; fugu_host: the same commands' without containers (this checkout's
      // code, which migrates its own database)
      for (const name of ['fugu', 'fugu_host']) {
        await waitFor(`the database ${name}`, async () => {
          const r = await client.query('select 1 from pg_database where datname = $1', [name]).catch(() => undefined);
          if (!r) return false;
          if (r.rowCount === 0) await client.query(`create database ${name}`);
          return true;
        }, 30_000, 200);
      }
    } finally {
      await client.end();
    }
    this.db = await connectDb(this.databaseUrlHost, { applicationName: 'fugu-images-observer' });
    this.hostDb = await connectDb(this.hostDatabaseUrl, { applicationName: 'fugu-images-observer' });
  }

  get redisUrlHost(): string {
    return `redis://127.0.0.1:${this.redisPort}`;
  }

  /** The containers' database, as the test reaches it. */
  get databaseUrlHost(): string {
    return `postgres://postgres@127.0.0.1:${this.pgPort}/fugu`;
  }

  /** The database of the runs without containers (hostCli). */
  get hostDatabaseUrl(): string {
    return `postgres://postgres@127.0.0.1:${this.pgPort}/fugu_host`;
  }

  /** What every fugu container gets, as the manifests give it: the hardening flags and the services' URLs. */
  private appFlags(env: Record<string, string>): string[] {
    const all: Record<string, string> = {
      FUGU_REDIS_URL: `redis://${this.name('redis')}:6379`,
      FUGU_DATABASE_URL: `postgres://postgres@${this.name('postgres')}:5432/fugu`,
      FUGU_LOG_LEVEL: 'info',
      ...env,
    };
    return [
      '--network', this.prefix, '--read-only', '--tmpfs', '/tmp', '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges',
      ...Object.entries(all).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
    ];
  }

  /** Starts an app's container (its command, its ops port published); resolves once /readyz answers 200. */
  async startApp(app: App, env: Record<string, string> = {}): Promise<void> {
    await dockerOk(['run', '-d', '--name', this.name(app), ...this.appFlags(env), '-p', `127.0.0.1::${APPS[app].port}`, this.image, ...APPS[app].cmd]);
    await this.ready(app);
  }

  /** Waits until a started (or restarted) app answers /readyz with 200. */
  async ready(app: App): Promise<void> {
    await waitFor(`${app} ready in its container`, async () => {
      if (!(await this.running(app))) throw new Error(`${app}'s container is not running (exit ${await this.exitCode(app)}): ${await this.logs(app)}`);
      const port = await this.hostPort(app, APPS[app].port, true);
      const r = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) }).catch(() => undefined);
      return r?.status === 200;
    }, 120_000, 200);
  }

  async running(what: string): Promise<boolean> {
    return (await dockerOk(['inspect', '--format', '{{.State.Running}}', this.name(what)])) === 'true';
  }

  async exitCode(what: string): Promise<number> {
    return Number(await dockerOk(['inspect', '--format', '{{.State.ExitCode}}', this.name(what)]));
  }

  async logs(what: string): Promise<string> {
    const r = await docker(['logs', this.name(what)]);
    return `${r.stdout}${r.stderr}`.slice(-4000);
  }

  /** GET an app's ops endpoint through its published port. */
  async httpGet(app: App, urlPath: string): Promise<string> {
    const port = await this.hostPort(app, APPS[app].port);
    const r = await fetch(`http://127.0.0.1:${port}${urlPath}`, { signal: AbortSignal.timeout(5_000) });
    return r.text();
  }

  /** `fugu <args>` as a one-off container of the image (a Job's pod); removed when it ends. */
  cli(args: string[], env: Record<string, string> = {}, timeoutMs = 600_000): Promise<Run> {
    const name = this.name(`cli-${++this.cliCount}`);
    return docker(['run', '--rm', '--name', name, ...this.appFlags({ FUGU_LOG_LEVEL: 'warn', ...env }), this.image, 'node', 'apps/cli/src/main.ts', ...args], { timeoutMs });
  }

  /**
   * The same `fugu <args>` without containers: this checkout's CLI with this Node, its own
   * FUGU_HOME, on the stack's Redis under the queue prefix `host` (only the processes it starts
   * itself, --local-workers and --local-conductors, take its jobs) and the database fugu_host.
   */
  hostCli(args: string[], timeoutMs = 600_000): Promise<Run> {
    return run(process.execPath, [path.join(repoRoot, 'apps/cli/src/main.ts'), ...args], {
      timeoutMs,
      env: {
        PATH: process.env.PATH,
        FUGU_REDIS_URL: this.redisUrlHost,
        FUGU_DATABASE_URL: this.hostDatabaseUrl,
        FUGU_QUEUE_PREFIX: 'host',
        FUGU_HOME: path.join(this.dir, 'home-host'),
        FUGU_LOG_LEVEL: 'warn',
      },
    });
  }

  /** Removes every container of this run (and their anonymous volumes) and the network. */
  async stop(): Promise<void> {
    await this.db?.destroy().catch(() => undefined);
    await this.hostDb?.destroy().catch(() => undefined);
    const ids = (await docker(['ps', '-a', '-q', '--filter', `name=^${this.prefix}-`])).stdout.split('\n').filter(Boolean);
    if (ids.length) await docker(['rm', '-f', '-v', ...ids]);
    await docker(['network', 'rm', this.prefix]);
    await rm(this.dir, { recursive: true, force: true });
  }
}
