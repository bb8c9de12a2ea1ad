// `fugu requests [--key K] [--since T] [--limit N] [--json]` and `fugu requests show <id> [--json]`:
// the gateway's request rows (migration 0007_requests), newest first. Self-contained: the
// option parsing is the caller's (`requestsOptions` turns raw flag values into options).
import { formatUsd, InputError } from '@fugu/core';
import { getRequest, listRequests, type Db, type RequestRow } from '@fugu/db';

export type RequestsOptions = {
  /** `show <id>`: one row, by row id or x-request-id */
  show?: string;
  /** an API key's id or name */
  key?: string;
  since?: Date;
  limit: number;
  json: boolean;
};

/** Raw flag values (strings as typed) -> options; a bad value is an InputError naming the flag. */
export function requestsOptions(flags: { key?: unknown; since?: unknown; limit?: unknown; json?: unknown }, positionals: string[], now = Date.now()): RequestsOptions {
  const opts: RequestsOptions = { limit: 50, json: flags.json === true };
  if (positionals[0] === 'show') {
    if (positionals.length !== 2) throw new InputError('give one request id: fugu requests show <id>', { field: 'id' });
    opts.show = positionals[1]!;
  } else if (positionals.length > 0) {
    throw new InputError(`unexpected argument "${positionals[0]}" (fugu requests [--key K] [--since T] [--limit N] [--json] | fugu requests show <id>)`, { field: 'arguments' });
  }
  if (typeof flags.key === 'string') opts.key = flags.key;
  if (typeof flags.since === 'string') opts.since = parseSince(flags.since, now);
  if (flags.limit !== undefined) {
    const n = Number(flags.limit);
    if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new InputError(`must be a whole number from 1 to 10000, got "${String(flags.limit)}"`, { field: '--limit' });
    opts.limit = n;
  }
  return opts;
}

/** `--since`: an ISO time (2026-12-01T10:00:00Z, 2026-12-01) or an age (90s, 15m, 2h, 7d). */
export function parseSince(v: string, now = Date.now()): Date {
  const age = /^(\d+)(s|m|h|d)$/.exec(v.trim());
  if (age) return new Date(now - Number(age[1]) * { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[age[2] as 's' | 'm' | 'h' | 'd']);
  const t = Date.parse(v);
  if (Number.isNaN(t)) throw new InputError(`must be an ISO time (2026-12-01T10:00:00Z) or an age like 15m, 2h, 7d, got "${v}"`, { field: '--since' });
  return new Date(t);
}

/** Prints the rows (a table, or JSON); returns the exit code. */
export async function cmdRequests(ctx: { db: Db }, opts: RequestsOptions, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  if (opts.show !== undefined) {
    const r = await getRequest(ctx.db, opts.show);
    if (!r) throw new InputError(`no request "${opts.show}" (fugu requests lists them)`, { field: 'id' });
    out.write(opts.json ? `${JSON.stringify(toJson(r), null, 2)}\n` : detail(r));
    return 0;
  }
  const rows = await listRequests(ctx.db, { ...(opts.key !== undefined && { key: opts.key }), ...(opts.since && { since: opts.since }), limit: opts.limit });
  if (opts.json) {
    out.write(`${JSON.stringify(rows.map(toJson))}\n`);
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
