// `fugu gateway`: starts the OpenAI-compatible gateway (the same command as its container,
// `node apps/gateway/src/main.ts`) in the foreground, with flags as FUGU_GATEWAY_* overrides, and
// prints a curl line to try it once it listens; Ctrl-C stops it gracefully.
// `fugu keys create|list|revoke`: the gateway's API keys. A key is printed once, at creation
// (on stdout alone, so `KEY=$(fugu keys create --name ci)` works); only its hash is stored.
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { formatUsd, InputError, parseUsd } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { createApiKey, listApiKeys, revokeApiKey, type ApiKeyRecord } from '@fugu/db';
import { resolvePool } from '@fugu/datasets';
import { openContext } from '@fugu/evaluation';
import { gatewayMain } from '@fugu/local-services';
import { action, choiceOption, intOption, jsonOption, listOption, printJson, type CommandGroup } from '../cli.ts';

export type GatewayFlags = {
  port?: number; host?: string; mode?: 'in-process' | 'pool'; pool?: string; auth?: 'keys' | 'none';
  /** the gateway's own output (its JSON log, one access-log line per request) to this file instead of this terminal (the demo's) */
  logFile?: string;
};

export const servingCommands: CommandGroup = (program, cli) => {
  program
    .command('gateway')
    .summary('the OpenAI-compatible gateway: model "fugu" (the router), "fugu-ultra" (the Conductor) or a worker by name')
    .description(
      'the OpenAI-compatible gateway, in the foreground (/v1/chat/completions, /v1/responses, the Batch API): model ' +
        '"fugu" (the router: picks one worker per request; `fugu router publish`), "fugu-ultra" (the Conductor: writes a ' +
        "workflow of up to five steps over the workers and runs it; `fugu ultra publish`), or a worker by its name",
    )
    .addOption(intOption('--port <n>', 'listen port (default: FUGU_GATEWAY_PORT, else 8080)'))
    .option('--host <h>', 'listen address (default: config gateway.host)')
    .addOption(choiceOption('--mode <mode>', 'route in this process or through the router-worker pool', ['in-process', 'pool']))
    .option('--pool <P>', 'the worker pool: llmrouter | <pool.yaml>')
    .addOption(choiceOption('--auth <auth>', 'API keys required, or none', ['keys', 'none']))
    .action(action((f: GatewayFlags) => startGateway(cli.config(), f)));

  const keys = program.command('keys').description("the gateway's API keys");
  keys
    .command('create')
    .description('an API key for the gateway, printed once on stdout (only its hash is stored)')
    .option('--name <name>', 'the name of the key')
    .addOption(listOption('--workers <a,b>', 'the workers the key may use (default: all)'))
    .option('--spend-limit-usd <usd>', 'refuse requests once the key has spent this much')
    .action(action(async (f: { name?: string; workers?: string[]; spendLimitUsd?: string }) => {
      const config = cli.config();
      if (f.name === undefined) throw new InputError(`give the key a name: ${USAGE}`, { field: '--name' });
      if (f.workers) await checkWorkers(config, f.workers);
      let spendLimit: bigint | undefined;
      if (f.spendLimitUsd !== undefined) {
        try {
          spendLimit = parseUsd(f.spendLimitUsd);
        } catch {
          throw new InputError(`must be an amount of USD like 12.50, got "${f.spendLimitUsd}"`, { field: '--spend-limit-usd' });
        }
      }
      const ctx = await openContext({ redis: false, config });
      try {
        const { key, record } = await createApiKey(ctx.db, { name: f.name, allowedWorkers: f.workers ?? null, spendLimit: spendLimit ?? null });
        process.stderr.write(`created API key "${record.name}" (${record.id}; workers: ${record.allowedWorkers?.join(', ') ?? 'all'}; spend limit: ${limitText(record)})\n`);
        process.stderr.write('the key is shown once, below: store it now (fugu keeps only its hash)\n');
        process.stdout.write(`${key}\n`);
      } finally {
        await ctx.close();
      }
    }));
  keys
    .command('list')
    .description('the API keys (never the keys themselves)')
    .addOption(jsonOption())
    .action(action(async (f: { json?: boolean }) => {
      const ctx = await openContext({ redis: false, config: cli.config() });
      try {
        const list = await listApiKeys(ctx.db);
        if (f.json) {
          return printJson(list.map(({ spent, spendLimit, ...k }) => ({ ...k, spentUsd: formatUsd(spent), spendLimitUsd: spendLimit === null ? null : formatUsd(spendLimit) })));
        }
        if (list.length === 0) process.stdout.write('no API keys yet (fugu keys create --name NAME)\n');
        for (const k of list) {
          process.stdout.write(
            `${k.name.padEnd(20)} ${k.id}  ${k.prefix}...  ${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : 'active'}  workers: ${k.allowedWorkers?.join(',') ?? 'all'}  ` +
              `spent $${formatUsd(k.spent, 6)} of ${limitText(k)}  created ${k.createdAt.toISOString()}\n`,
          );
        }
      } finally {
        await ctx.close();
      }
    }));
  keys
    .command('revoke')
    .description('revoke a key: every gateway refuses it within FUGU_GATEWAY_KEY_CACHE_MS (1 s by default)')
    .argument('<key>', 'the name or id of the key')
    .action(action(async (name: string) => {
      const ctx = await openContext({ redis: false, config: cli.config() });
      try {
        const k = await revokeApiKey(ctx.db, name);
        if (!k) throw new InputError(`no API key named "${name}" (fugu keys list shows them)`, { field: 'key' });
        process.stdout.write(`revoked API key "${k.name}" (${k.id}) at ${k.revokedAt!.toISOString()}; gateways refuse it within their FUGU_GATEWAY_KEY_CACHE_MS (${cli.config().gateway.keyCacheMs} ms here)\n`);
      } finally {
        await ctx.close();
      }
    }));
};

const USAGE = 'fugu keys create --name NAME [--workers a,b] [--spend-limit-usd X]';

/** The gateway app as a child process with these flags (FUGU_GATEWAY_* overrides), in its own process group. */
function forkGateway(config: FuguConfig, f: GatewayFlags): { child: ChildProcess; auth: string } {
  const env: Record<string, string | undefined> = { ...process.env };
  if (f.port !== undefined) env.FUGU_GATEWAY_PORT = String(f.port);
  if (f.host !== undefined) env.FUGU_GATEWAY_HOST = f.host;
  if (f.mode !== undefined) env.FUGU_GATEWAY_MODE = f.mode;
  if (f.pool !== undefined) env.FUGU_GATEWAY_POOL = f.pool;
  if (f.auth !== undefined) env.FUGU_GATEWAY_AUTH = f.auth;
  // its own process group: a signal reaches it once, from here (Ctrl-C in a terminal, or a kill
  // of this process alike), never twice (a second signal makes it exit without draining)
  let out: number | 'inherit' = 'inherit';
  if (f.logFile !== undefined) {
    mkdirSync(path.dirname(path.resolve(f.logFile)), { recursive: true });
    out = openSync(f.logFile, 'a');
  }
  const child = fork(gatewayMain, [], { env, stdio: ['inherit', out, out, 'ipc'], detached: true });
  if (typeof out === 'number') closeSync(out);
  return { child, auth: env.FUGU_GATEWAY_AUTH ?? config.gateway.auth };
}

/**
 * A gateway in the background (the demo's second one): resolves once it listens, to its base URL
 * and a stop that drains it; rejects when it exits first.
 */
export async function backgroundGateway(config: FuguConfig, f: GatewayFlags): Promise<{ url: string; stop(): Promise<void> }> {
  const { child } = forkGateway(config, f);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    child.on('message', (m: { type?: string; port?: number }) => m?.type === 'ready' && resolve(m.port!));
    void exited.then((code) => reject(new Error(`the gateway on pool ${f.pool ?? config.gateway.pool} exited (${code}) before it listened${f.logFile ? `; its log: ${f.logFile}` : ''}`)));
  });
  return {
    url: `http://${f.host ?? '127.0.0.1'}:${port}/v1`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Runs the gateway app as a child in the foreground; resolves to its exit code. */
export async function startGateway(config: FuguConfig, f: GatewayFlags): Promise<number> {
  const { child, auth } = forkGateway(config, f);
  child.on('message', (m: { type?: string; port?: number; host?: string; example?: string; ultra?: string; ultraDefault?: string; pool?: string; defaultRouting?: { worker: string; reason: string } }) => {
    if (m?.type !== 'ready') return;
    const host = !m.host || m.host === '0.0.0.0' ? '127.0.0.1' : m.host;
    const body = JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: m.example ?? 'Hello!' }] }).replace(/'/g, "'\\''");
    const authHeader = auth === 'none' ? '' : ` -H "Authorization: Bearer $FUGU_API_KEY"`;
    process.stderr.write(`\nthe gateway is up: OpenAI base URL http://${host}:${m.port}/v1 (model "fugu"${m.ultra ? `, "${m.ultra}"` : ''}, or a worker's name)\n`);
    if (auth !== 'none') process.stderr.write('a key for it: export FUGU_API_KEY=$(npx fugu keys create --name me)\n');
    process.stderr.write(`try:\n  curl -s http://${host}:${m.port}/v1/chat/completions${authHeader} -H 'Content-Type: application/json' -d '${body}'\n`);
    if (m.ultra) {
      // the Conductor: a workflow of several workers behind one model name (the x-fugu-workflow header and the fugu object name it)
      const ultraBody = JSON.stringify({ model: m.ultra, messages: [{ role: 'user', content: m.example ?? 'Hello!' }] }).replace(/'/g, "'\\''");
      process.stderr.write(`  curl -s http://${host}:${m.port}/v1/chat/completions${authHeader} -H 'Content-Type: application/json' -d '${ultraBody}'\n`);
    }
    if (m.defaultRouting) {
      // no router for this pool yet: what fugu does meanwhile, and the three commands that make one
      const p = f.pool ?? m.pool ?? 'POOL';
      process.stderr.write(
        `model "fugu" answers with the pool's default worker ${m.defaultRouting.worker} (${m.defaultRouting.reason}); to route, train and publish a router for this pool:\n` +
          `  npx fugu eval --dataset DATASET --pool ${p}          # every worker on a dataset (its rewards)\n` +
          '  npx fugu router train --run RUN                     # SFT of the router on that run (prints the checkpoint id)\n' +
          '  npx fugu router publish CHECKPOINT                  # then restart the gateway\n',
      );
    }
    if (m.ultra && m.ultraDefault) {
      process.stderr.write(`model "${m.ultra}" runs the default Conductor ${m.ultraDefault} (none is published for this pool; \`npx fugu ultra publish --conductor SPEC --pool ${f.pool ?? m.pool ?? 'POOL'}\` publishes one)\n`);
    }
    process.stderr.write('a batch of such requests (OpenAI Batch API JSONL): npx fugu batch submit FILE --wait\n');
    if (f.logFile !== undefined) process.stderr.write(`the gateway's JSON log (a line per request): ${f.logFile} (npm run demo -- --gateway-log - shows it here)\n`);
    process.stderr.write('\n');
  });
  // pass each signal on: the gateway drains and exits (a second one: at once); wait for it
  const onSignal = (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      // a gateway that failed said why in its log: its last lines here
      if (f.logFile !== undefined && code !== 0 && code !== null) {
        const tail = readFileSync(f.logFile, 'utf8').trimEnd().split('\n').slice(-5).join('\n');
        process.stderr.write(`${tail}\n(the gateway exited ${code}; its log: ${f.logFile})\n`);
      }
      resolve(code ?? (signal === 'SIGINT' ? 130 : 1));
    });
  });
}

function limitText(k: ApiKeyRecord): string {
  return k.spendLimit === null ? 'no limit' : `$${formatUsd(k.spendLimit, 6)}`;
}

/** The workers must be in the gateway's pool (config gateway.pool), when it can be read here. */
async function checkWorkers(config: FuguConfig, workers: string[]): Promise<void> {
  const spec = config.gateway.pool === 'llmrouter' ? `llmrouter:${config.llmrouterDir}` : config.gateway.pool;
  let names: string[];
  try {
    names = (await resolvePool(spec)).workers.map((w) => w.name);
  } catch {
    return; // the pool is not readable from here: the gateway ignores unknown names
  }
  const unknown = workers.filter((w) => !names.includes(w));
  if (unknown.length > 0) throw new InputError(`unknown worker ${unknown.map((w) => `"${w}"`).join(', ')} (the gateway's pool has: ${names.join(', ')})`, { field: '--workers' });
}
