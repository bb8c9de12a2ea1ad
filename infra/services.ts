// The project's own Redis and Postgres from the shell, for infra/quickstart.sh and .ci/run
// (the same functions as `fugu up` / `fugu down`, without loading the CLI).
//
//   node infra/services.ts up [--only redis|postgres] [--redis-port N] [--pg-port N]
//   node infra/services.ts down [same options]
//   node infra/services.ts env [same options]      URLs, without starting anything
//   node infra/services.ts status [same options]
//   node infra/services.ts reachable <url>...      exit 0 when every URL answers
//
// `up` and `env` print FUGU_REDIS_URL=... and FUGU_DATABASE_URL=... on stdout (nothing else
// goes there); progress goes to stderr. Data lives under FUGU_HOME (default <repo>/.fugu).
import { parseArgs } from 'node:util';
import { FuguError } from '@fugu/core';
import { redactUrl } from '@fugu/config';
import { down, isReachable, localServiceUrls, servicesStatus, up, type ServiceName, type ServicesOptions } from '@fugu/local-services';

const USAGE = 'usage: node infra/services.ts up|down|env|status [--only redis|postgres] [--redis-port N] [--pg-port N] | reachable <url>...';

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

function port(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65535) fail(`${flag}: not a TCP port: ${value}`);
  return n;
}

async function main(): Promise<number> {
  const { positionals, values } = parseArgs({
    allowPositionals: true,
    options: {
      only: { type: 'string', multiple: true },
      'redis-port': { type: 'string' },
      'pg-port': { type: 'string' },
    },
  });
  const [command, ...rest] = positionals;
  const only = values.only?.map((s) => {
    if (s !== 'redis' && s !== 'postgres') fail(`--only: expected redis or postgres, got ${s}`);
    return s as ServiceName;
  });
  const opts: ServicesOptions = { only, redisPort: port(values['redis-port'], '--redis-port'), pgPort: port(values['pg-port'], '--pg-port') };
  const printEnv = (urls: { redisUrl: string; databaseUrl: string }): void => {
    const wanted = only ?? ['redis', 'postgres'];
    if (wanted.includes('redis')) process.stdout.write(`FUGU_REDIS_URL=${urls.redisUrl}\n`);
    if (wanted.includes('postgres')) process.stdout.write(`FUGU_DATABASE_URL=${urls.databaseUrl}\n`);
  };

  switch (command) {
    case 'up': {
      const res = await up(opts);
      process.stderr.write(res.started.length ? `fugu: started ${res.started.join(' and ')}\n` : 'fugu: services already running\n');
      printEnv(res);
      return 0;
    }
    case 'down': {
      const res = await down(opts);
      if (!res.stopped.length) process.stderr.write('fugu: nothing to stop\n');
      return 0;
    }
    case 'env':
      printEnv(localServiceUrls(opts));
      return 0;
    case 'status': {
      for (const s of await servicesStatus(opts)) {
        const state = s.reachable ? 'reachable' : 'not reachable';
        process.stdout.write(`${s.name.padEnd(8)} ${s.url}  ${state}${s.pid ? `, pid ${s.pid}` : ''}  (${s.dir})\n`);
      }
      return 0;
    }
    case 'reachable': {
      if (!rest.length) fail(USAGE);
      const results = await Promise.all(rest.map((u) => isReachable(u)));
      results.forEach((ok, i) => {
        if (!ok) process.stderr.write(`fugu: not reachable: ${redactUrl(rest[i]!)}\n`);
      });
      return results.every(Boolean) ? 0 : 1;
    }
    default:
      fail(USAGE);
  }
}

try {
  process.exitCode = await main();
} catch (e) {
  // Known failures are one clear line; anything else keeps its stack.
  process.stderr.write(`fugu: ${e instanceof FuguError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exitCode = 1;
}
