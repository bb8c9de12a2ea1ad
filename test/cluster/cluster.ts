// A fugu cluster on one machine (test:cluster): Redis and Postgres on host `db`, fugu processes on
// the other hosts of a VirtualNetwork, each started with its container's command
// (`node apps/<app>/src/<main>.ts`) and configured only by environment, talking over the virtual
// network. The test process checks results as the observer, over the same network.
import { execFileSync } from 'node:child_process';
import { chmod, chown, appendFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadConfig } from '@fugu/config';
import { connectDb, type Db } from '@fugu/db';
import { conductorMain, coordinatorMain, evaluatorMain, findPostgresBinaries, isReachable, providerWorkerMain } from '@fugu/local-services';
import { watchApp, type AppProcess } from '../support/app-process.ts';
import { routerWorkerMain } from '../support/router-workers.ts';
import { waitFor } from '../support/eval-env.ts';
import { SYSTEM_PATH, VirtualNetwork } from './netns.ts';

export type App = 'provider-worker' | 'evaluator' | 'coordinator' | 'gateway' | 'router-worker' | 'conductor';
const MAINS: Record<App, string> = {
  'provider-worker': providerWorkerMain,
  evaluator: evaluatorMain,
  coordinator: coordinatorMain,
  gateway: fileURLToPath(new URL('../../apps/gateway/src/main.ts', import.meta.url)),
  'router-worker': routerWorkerMain,
  conductor: conductorMain,
};
const cliMain = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));

export type FuguProcess = AppProcess & { host: string; app: App };

export class TestCluster {
  readonly net: VirtualNetwork;
  readonly dir: string;
  readonly redisUrl: string;
  readonly databaseUrl: string;
  /** Postgres as seen by the observer (this process), over the virtual network */
  db!: Db;
  private readonly llmrouterDir = loadConfig().llmrouterDir;

  private constructor(net: VirtualNetwork, dir: string) {
    this.net = net;
    this.dir = dir;
    const dbIp = net.host('db').ip;
    this.redisUrl = `redis://${dbIp}:6379`;
    this.databaseUrl = `postgres://postgres@${dbIp}:5432/fugu`;
  }

  /** The network (a host `db` and the given ones), then Redis and Postgres on `db`. */
  static async start(hosts: string[]): Promise<TestCluster> {
    const net = VirtualNetwork.create(['db', ...hosts]);
    const dir = await mkdtemp(path.join(tmpdir(), 'fugu-cluster-'));
    await chmod(dir, 0o755);
    const c = new TestCluster(net, dir);
    try {
      await c.startRedis();
      await c.startPostgres();
      c.db = await connectDb(c.databaseUrl, { applicationName: 'fugu-cluster-observer' });
    } catch (e) {
      await c.stop();
      throw e;
    }
    return c;
  }

  private startRedis(): Promise<void> {
    const ip = this.net.host('db').ip;
    const child = this.net.spawn('db', 'redis-server', ['--bind', ip, '--port', '6379', '--save', '', '--appendonly', 'no', '--protected-mode', 'no', '--dir', this.dir], { env: { PATH: SYSTEM_PATH } });
    return waitFor('Redis on host db', async () => child.exitCode === null && (await isReachable(this.redisUrl, 1_000)), 20_000, 50).then(() => undefined);
  }

  private async startPostgres(): Promise<void> {
    // Postgres refuses to run as root: initdb and the server run as the system user postgres
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    const bins = await findPostgresBinaries({ runAs: { name: 'postgres', uid, gid }, install: false, log: () => undefined });
    const data = path.join(this.dir, 'pg');
    await mkdir(data, { mode: 0o700 });
    await chown(data, uid, gid);
    execFileSync('runuser', ['-u', 'postgres', '--', bins.initdb, '-D', data, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-locale'], { cwd: '/', stdio: 'ignore', env: { PATH: SYSTEM_PATH, LC_ALL: 'C' } });
    await appendFile(path.join(data, 'pg_hba.conf'), `host all all ${this.net.subnet}.0/24 trust\n`);
    const ip = this.net.host('db').ip;
    // fsync off: this test never crashes Postgres, and the disk is not what it measures
    const child = this.net.spawn('db', 'runuser', ['-u', 'postgres', '--', bins.postgres, '-D', data, '-p', '5432', '-c', `listen_addresses=${ip}`, '-c', 'unix_socket_directories=', '-c', 'max_connections=200', '-c', 'fsync=off'], {
      env: { PATH: SYSTEM_PATH, LC_ALL: 'C' },
    });
    let log = '';
    child.stderr?.on('data', (d: Buffer) => { log += d.toString(); });
    const admin = `postgres://postgres@${ip}:5432/postgres`;
    await waitFor('Postgres on host db', async () => {
      if (child.exitCode !== null) throw new Error(`Postgres exited: ${log.slice(-2000)}`);
      return isReachable(admin, 1_000);
    }, 30_000, 100);
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    try {
      await client.query('create database fugu');
    } finally {
      await client.end();
    }
  }

  /** What a container of this host gets: the services' URLs, a FUGU_HOME of its own, the data. */
  env(host: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      FUGU_REDIS_URL: this.redisUrl,
      FUGU_DATABASE_URL: this.databaseUrl,
      FUGU_QUEUE_PREFIX: 'fugu',
      FUGU_HOME: path.join(this.dir, `home-${host}`),
      FUGU_LLMROUTER_DIR: this.llmrouterDir,
      FUGU_LOG_LEVEL: 'warn',
      ...extra,
    };
  }

  /** Starts an app on a host with its container's command; resolves once it says it is ready. */
  async startApp(host: string, app: App, extra: Record<string, string> = {}): Promise<FuguProcess> {
    await mkdir(path.join(this.dir, `home-${host}`), { recursive: true });
    const child = this.net.spawn(host, process.execPath, [MAINS[app]], { env: this.env(host, extra), stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    return { ...(await watchApp(child, `${app} on ${host}`)), host, app };
  }

  /** `fugu <args>` on a host (the operator's shell, or a `kubectl run` pod). */
  async cli(host: string, args: string[], timeoutMs = 300_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
    await mkdir(path.join(this.dir, `home-${host}`), { recursive: true });
    const child = this.net.spawn(host, process.execPath, [cliMain, ...args], { env: this.env(host) });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => { stdout += d.toString(); });
    child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    clearTimeout(timer);
    return { code, stdout, stderr };
  }

  /** A host's ops endpoint (/metrics, /healthz) over the network. */
  async httpGet(host: string, port: number, urlPath: string): Promise<string> {
    const res = await fetch(`http://${this.net.host(host).ip}:${port}${urlPath}`, { signal: AbortSignal.timeout(5_000) });
    return res.text();
  }

  /**
   * A host's ops endpoint read from inside the host, on its loopback (what `kubectl exec` into the
   * pod sees): it answers while the host's cable is pulled, when httpGet cannot reach it.
   */
  async localGet(host: string, port: number, urlPath: string): Promise<string> {
    const script = `fetch('http://127.0.0.1:${port}${urlPath}', { signal: AbortSignal.timeout(5000) }).then((r) => r.text()).then((t) => process.stdout.write(t), (e) => { process.stderr.write(String(e)); process.exit(1); })`;
    const child = this.net.spawn(host, process.execPath, ['-e', script], { env: { PATH: process.env.PATH } });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => { stdout += d.toString(); });
    child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    if (code !== 0) throw new Error(`GET ${urlPath} on ${host}'s loopback: ${stderr.trim() || `exit ${code}`}`);
    return stdout;
  }

  async stop(): Promise<void> {
    await this.db?.destroy().catch(() => undefined);
    this.net.destroy();
    await rm(this.dir, { recursive: true, force: true });
  }
}
