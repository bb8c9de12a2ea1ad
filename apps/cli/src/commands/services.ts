// `fugu up | down | services | migrate`: the project's own Redis and Postgres, and migrations.
import { FuguError } from '@fugu/core';
import { redactUrl, type FuguConfig } from '@fugu/config';
import { connectDb, migrate } from '@fugu/db';
import { down, isReachable, localServiceUrls, servicesStatus, up } from '@fugu/local-services';
import { action, type CommandGroup } from '../cli.ts';

export const servicesCommands: CommandGroup = (program, cli) => {
  program
    .command('up')
    .description("start the project's own Redis and Postgres when they are not reachable")
    .action(action(() => cmdUp(cli.config())));
  program
    .command('down')
    .description('stop what `fugu up` started')
    .action(action(async () => {
      const r = await down({ home: cli.config().home });
      process.stderr.write(r.stopped.length ? `stopped ${r.stopped.join(', ')}\n` : 'nothing was running\n');
    }));
  program
    .command('services')
    .description('show where Redis and Postgres are and whether they answer')
    .action(action(async () => {
      const config = cli.config();
      process.stdout.write(`redis     ${redactUrl(config.redisUrl)}  ${(await isReachable(config.redisUrl)) ? 'reachable' : 'NOT reachable'}\n`);
      process.stdout.write(`postgres  ${redactUrl(config.databaseUrl)}  ${(await isReachable(config.databaseUrl)) ? 'reachable' : 'NOT reachable'}\n`);
      for (const s of await servicesStatus({ home: config.home })) process.stdout.write(`own ${s.name}: ${s.pid ? `running (pid ${s.pid})` : 'not running'} in ${s.dir}\n`);
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

async function cmdUp(config: FuguConfig): Promise<void> {
  const own = localServiceUrls();
  const only: Array<'redis' | 'postgres'> = [];
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
