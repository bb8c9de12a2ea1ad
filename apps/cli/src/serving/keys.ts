// `fugu keys create|list|revoke`: the gateway's API keys. A key is printed once, at creation
// (on stdout alone, so `KEY=$(fugu keys create --name ci)` works); only its hash is stored.
import { formatUsd, InputError, parseUsd } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { createApiKey, listApiKeys, revokeApiKey, type ApiKeyRecord } from '@fugu/db';
import { resolvePool } from '@fugu/datasets';
import { parse } from '../args.ts';
import { openContext } from '@fugu/evaluation';

const USAGE = 'fugu keys create --name NAME [--workers a,b] [--spend-limit-usd X] | fugu keys list | fugu keys revoke <name|id>';

export async function cmdKeys(config: FuguConfig, args: string[], out: NodeJS.WritableStream = process.stdout, err: NodeJS.WritableStream = process.stderr): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'create': {
      const { flags, positionals } = parse(rest, { name: { type: 'string' }, workers: { type: 'string' }, 'spend-limit-usd': { type: 'string' } });
      if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
      if (typeof flags.name !== 'string') throw new InputError(`give the key a name: ${USAGE}`, { field: '--name' });
      const workers = typeof flags.workers === 'string' ? flags.workers.split(',').map((s) => s.trim()).filter(Boolean) : undefined;
      if (workers) await checkWorkers(config, workers);
      let spendLimit: bigint | undefined;
      if (flags['spend-limit-usd'] !== undefined) {
        try {
          spendLimit = parseUsd(String(flags['spend-limit-usd']));
        } catch {
          throw new InputError(`must be an amount of USD like 12.50, got "${String(flags['spend-limit-usd'])}"`, { field: '--spend-limit-usd' });
        }
      }
      const ctx = await openContext({ redis: false, config });
      try {
        const { key, record } = await createApiKey(ctx.db, { name: flags.name, allowedWorkers: workers ?? null, spendLimit: spendLimit ?? null });
        err.write(`created API key "${record.name}" (${record.id}; workers: ${record.allowedWorkers?.join(', ') ?? 'all'}; spend limit: ${limitText(record)})\n`);
        err.write('the key is shown once, below: store it now (fugu keeps only its hash)\n');
        out.write(`${key}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'list': {
      const ctx = await openContext({ redis: false, config });
      try {
        const keys = await listApiKeys(ctx.db);
        if (keys.length === 0) out.write('no API keys yet (fugu keys create --name NAME)\n');
        for (const k of keys) {
          out.write(
            `${k.name.padEnd(20)} ${k.id}  ${k.prefix}...  ${k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : 'active'}  workers: ${k.allowedWorkers?.join(',') ?? 'all'}  ` +
              `spent $${formatUsd(k.spent, 6)} of ${limitText(k)}  created ${k.createdAt.toISOString()}\n`,
          );
        }
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'revoke': {
      const { positionals } = parse(rest, {});
      if (positionals.length !== 1) throw new InputError(`give one key name or id: ${USAGE}`, { field: 'key' });
      const ctx = await openContext({ redis: false, config });
      try {
        const k = await revokeApiKey(ctx.db, positionals[0]!);
        if (!k) throw new InputError(`no API key named "${positionals[0]}" (fugu keys list shows them)`, { field: 'key' });
        out.write(`revoked API key "${k.name}" (${k.id}) at ${k.revokedAt!.toISOString()}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    default:
      throw new InputError(`${sub ? `unknown keys command "${sub}"` : 'missing keys command'}: ${USAGE}`, { field: 'command' });
  }
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
