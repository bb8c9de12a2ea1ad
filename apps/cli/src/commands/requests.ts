// `fugu requests [--key K] [--since T] [--limit N] [--json]` and `fugu requests show <id> [--json]`:
// the gateway's request rows (migration 0007_requests), newest first.
import { formatUsd, InputError } from '@fugu/core';
import { getRequest, listRequests, type Db, type RequestRow } from '@fugu/db';
import { withDb } from '../checkpoints.ts';
import { action, int, jsonOption, named, printJson, type CommandGroup } from '../cli.ts';

type ListFlags = { key?: string; since?: Date; limit: number; json?: boolean };

export const requestsCommands: CommandGroup = (program, cli) => {
  const requests = program
    .command('requests')
    .description("the gateway's request rows, newest first (one per chat request: worker, tokens, cost, latency, status)")
    .option('--key <K>', "only this API key's requests (its id or name)")
    .addOption(named('--since <T>', 'only requests since an ISO time or an age (90s, 15m, 2h, 7d)', (v) => parseSince(v)))
    .addOption(named('--limit <n>', 'at most this many rows (1 to 10000)', (v, f) => limit(v, f), 50))
    .addOption(jsonOption())
    .action(action((f: ListFlags) => withDb(cli.config(), (db) => listCommand(db, f))));
  requests
    .command('show')
    .description('one request in full, by row id or x-request-id')
    .argument('<id>', 'the row id or the x-request-id')
    .addOption(jsonOption())
    .action(action((id: string, f: { json?: boolean }) => withDb(cli.config(), (db) => showCommand(db, id, f.json === true))));
};

function limit(v: string, flag: string): number {
  const n = int(v, flag, 50);
  if (n < 1 || n > 10_000) throw new InputError(`must be a whole number from 1 to 10000, got "${v}"`, { field: flag });
  return n;
}


/** `--since`: an ISO time (2026-12-01T10:00:00Z, 2026-12-01) or an age (90s, 15m, 2h, 7d). */
export function parseSince(v: string, now = Date.now()): Date {
  const age = /^(\d+)(s|m|h|d)$/.exec(v.trim());
  if (age) return new Date(now - Number(age[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[age[2] as 's' | 'm' | 'h' | 'd']);
  const t = Date.parse(v);
  if (Number.isNaN(t)) throw new InputError(`must be an ISO time (2026-12-01T10:00:00Z) or an age like 15m, 2h, 7d, got "${v}"`, { field: '--since' });
  return new Date(t);
}

async function showCommand(db: Db, id: string, json: boolean, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const r = await getRequest(db, id);
  if (!r) throw new InputError(`no request "${id}" (fugu requests lists them)`, { field: 'id' });
  if (json) printJson(toJson(r));
  else out.write(detail(r));
  return 0;
}

/** Prints the rows (a table, or JSON); returns the exit code. */
async function listCommand(db: Db, opts: ListFlags, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const rows = await listRequests(db, { ...(opts.key !== undefined && { key: opts.key }), ...(opts.since && { since: opts.since }), limit: opts.limit });
  if (opts.json) {
    printJson(rows.map(toJson));
    return 0;
  }
  if (rows.length === 0) {
    out.write('no requests recorded (the gateway writes one row per chat request)\n');
    return 0;
  }
  const table = [
    ['created', 'id', 'status', 'model', 'worker', 'tokens in/out', 'cost USD', 'ms (route/prov/total)', 'fallbacks', 'error'],
    ...rows.map((r) => [
      r.createdAt.toISOString(),
      r.id,
      String(r.status),
      r.model ?? '-',
      r.worker ?? '-',
      `${r.tokensIn}/${r.tokensOut}`,
      formatUsd(r.cost, 8),
      `${ms(r.routingMs)}/${ms(r.providerMs)}/${ms(r.totalMs)}`,
      r.fallbacks.join(',') || '-',
      r.errorCode ?? '-',
    ]),
  ];
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  for (const row of table) out.write(`${row.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()}\n`);
  return 0;
}

const ms = (v: number | null): string => (v === null ? '-' : v.toFixed(1));

function toJson(r: RequestRow): Record<string, unknown> {
  return { ...r, cost: formatUsd(r.cost), createdAt: r.createdAt.toISOString() };
}

function detail(r: RequestRow): string {
  const lines: Array<[string, string]> = [
    ['id', r.id],
    ['x-request-id', r.requestId],
    ['created', r.createdAt.toISOString()],
    ['api key', r.apiKeyId ?? '(none: auth off)'],
    ['end user', r.endUser ?? '-'],
    ['hints', r.hints ? JSON.stringify(r.hints) : '-'],
    ['route', r.route],
    ['model asked', r.model ?? '-'],
    ['worker', r.worker ?? '-'],
    ['stream', String(r.stream)],
    ['status', `${r.status}${r.errorCode ? ` (${r.errorCode})` : ''}`],
    ['top probabilities', r.topProbs ? r.topProbs.map((p) => `${p.worker} ${p.prob.toFixed(3)}`).join(', ') : '-'],
    ['fallbacks tried', r.fallbacks.join(', ') || '-'],
    ['tokens in/out', `${r.tokensIn} / ${r.tokensOut}`],
    ['cost', `$${formatUsd(r.cost)}`],
    ['routing ms', ms(r.routingMs)],
    ['provider ms', ms(r.providerMs)],
    ['total ms', ms(r.totalMs)],
  ];
  return lines.map(([k, v]) => `${k.padEnd(18)} ${v}\n`).join('');
}
