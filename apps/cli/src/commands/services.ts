// `fugu up | down | services | migrate`: the project's own Redis and Postgres, and migrations.
import { FuguError } from '@fugu/core';
import { redactUrl, type FuguConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { DEFAULT_REDIS_CLUSTER_PORT, down, isReachable, localServiceUrls, servicesStatus, up, type ClusterNodeInfo } from '@fugu/local-services';
import { action, intOption, type CommandGroup } from '../cli.ts';

type UpFlags = { redisCluster?: number; clusterReplicas: number; clusterPort: number };

export const servicesCommands: CommandGroup = (program, cli) => {
  program
    .command('up')
    .description("start the project's own Redis and Postgres when they are not reachable (--redis-cluster N: a local Redis Cluster instead of the one Redis)")
    .addOption(intOption('--redis-cluster <masters>', 'start a local Redis Cluster of this many masters (at least 3) from redis-server, in FUGU_HOME/redis-cluster'))
    .addOption(intOption('--cluster-replicas <n>', 'replicas of each master (a master killed is replaced by its replica)', 1))
    .addOption(intOption('--cluster-port <p>', "the first node's port; the others follow", DEFAULT_REDIS_CLUSTER_PORT))
    .action(action((f: UpFlags) => cmdUp(cli.config(), f)));
  program
    .command('down')
    .description('stop what `fugu up` started')
    .action(action(async () => {
      const r = await down({ home: cli.config().home });
      process.stderr.write(r.stopped.length ? `stopped ${r.stopped.join(', ')}\n` : 'nothing was running\n');
    }));
  program
    .command('services')
    .description('show where Redis and Postgres are and whether they answer (a local Redis Cluster: its nodes, roles and slots)')
    .action(action(async () => {
      const config = cli.config();
      process.stdout.write(`redis     ${redactUrl(config.redisUrl)}  ${(await isReachable(config.redisUrl)) ? 'reachable' : 'NOT reachable'}\n`);
      process.stdout.write(`postgres  ${redactUrl(config.databaseUrl)}  ${(await isReachable(config.databaseUrl)) ? 'reachable' : 'NOT reachable'}\n`);
      for (const s of await servicesStatus({ home: config.home })) {
        if (s.name === 'redis-cluster') {
          process.stdout.write(`own redis-cluster: ${s.url}  ${s.reachable ? 'every slot served' : 'NOT serving every slot'}; in ${s.dir}\n`);
          for (const n of s.nodes ?? []) process.stdout.write(`  ${clusterNodeLine(n, s.nodes ?? [])}\n`);
          continue;
        }
        process.stdout.write(`own ${s.name}: ${s.pid ? `running (pid ${s.pid})` : 'not running'} in ${s.dir}\n`);
      }
    }));
  program
    .command('migrate')
    .description('run database migrations')
    .action(action(async () => {
      const db = await connectDb(cli.config().databaseUrl);
      try {
        const results = await migrate(db);
        process.stdout.write(results.length ? results.map((r) => `${r.migrationName}: ${r.status}`).join('\n') + '\n' : 'database is up to date\n');
      } finally {
        await db.destroy();
      }
    }));
};

/** One node of a cluster: port, role (a replica's master), slots, pid. */
export function clusterNodeLine(n: ClusterNodeInfo, all: readonly ClusterNodeInfo[]): string {
  const slots = n.slots.reduce((s, [a, b]) => s + b - a + 1, 0);
  const role = n.role === 'master' ? `master, ${slots} slots (${n.slots.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(' ')})` : `replica of ${all.find((m) => m.id === n.masterId)?.port ?? n.masterId}`;
  return `${n.host}:${n.port}  ${role}${n.failed ? '  FAILED' : ''}${n.pid ? `  pid ${n.pid}` : ''}`;
}

async function cmdUp(config: FuguConfig, f: UpFlags = { clusterReplicas: 1, clusterPort: DEFAULT_REDIS_CLUSTER_PORT }): Promise<void> {
  const own = localServiceUrls();
  const only: Array<'redis' | 'postgres'> = [];
  if (f.redisCluster !== undefined) {
    // the cluster is started whatever FUGU_REDIS_URL says; the URL to set is printed
    only.push('redis');
    if (!(await isReachable(config.databaseUrl))) {
      if (config.databaseUrl !== own.databaseUrl) throw new FuguError('service-unavailable', `postgres is not reachable at ${redactUrl(config.databaseUrl)}: start it, or unset FUGU_DATABASE_URL to use the project's own`);
      only.push('postgres');
    }
    const r = await up({ home: config.home, only, redisCluster: { masters: f.redisCluster, replicas: f.clusterReplicas, basePort: f.clusterPort } });
    for (const s of r.started) process.stderr.write(`${s}: started (data in ${config.home})\n`);
    process.stderr.write(`redis-cluster: every slot served at ${r.redisUrl}\n`);
    if (config.redisUrl !== r.redisUrl) process.stderr.write(`to use it: export FUGU_REDIS_URL=${r.redisUrl}\n`);
    return;
  }
  for (const [name, url, ownUrl, variable] of [
    ['redis', config.redisUrl, own.redisUrl, 'FUGU_REDIS_URL'],
    ['postgres', config.databaseUrl, own.databaseUrl, 'FUGU_DATABASE_URL'],
  ] as const) {
    if (await isReachable(url)) {
      process.stderr.write(`${name}: reachable at ${redactUrl(url)}\n`);
    } else if (url === ownUrl) {
      only.push(name);
    } else {
      throw new FuguError('service-unavailable', `${name} is not reachable at ${redactUrl(url)}: start it, or unset ${variable} to use the project's own`);
    }
  }
  if (only.length > 0) {
    const r = await up({ home: config.home, only });
    for (const s of r.started) process.stderr.write(`${s}: started (data in ${config.home})\n`);
  }
}
