// `fugu requests [--key K] [--since T] [--limit N] [--json]` and `fugu requests show <id> [--json]`:
// the gateway's request rows (migration 0007_requests), newest first. `--session S`: one client
// session's turns (migration 0021: a coding harness's session id), oldest first, with the worker
// that answered each turn, what it cost and the tool calls it gave the client, then the totals per
// worker (`fugu report session:S` is the same as an HTML report).
import { formatUsd, InputError } from '@fugu/core';
import { getRequest, listRequests, type Db, type RequestRow } from '@fugu/db';
import { apiOf, workerSwitches, workerTotals, type SessionReportData, type SessionTurn } from '@fugu/report';
import { withDb } from '../checkpoints.ts';
import { action, columns, int, jsonOption, named, printJson, type CommandGroup } from '../cli.ts';

type ListFlags = { key?: string; since?: Date; session?: string; limit?: number; json?: boolean };

export const requestsCommands: CommandGroup = (program, cli) => {
  const requests = program
    .command('requests')
    .description("the gateway's request rows, newest first (one per chat request: worker, tokens, cost, latency, status)")
    .option('--key <K>', "only this API key's requests (its id or name)")
    .addOption(named('--since <T>', 'only requests since an ISO time or an age (90s, 15m, 2h, 7d)', (v) => parseSince(v)))
    .option('--session <S>', "one client session's turns, oldest first: worker, tokens, cost, status, tool calls, and the totals per worker")
    .addOption(named('--limit <n>', 'at most this many rows (1 to 10000; default 50, with --session 10000)', (v, f) => limit(v, f)))
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
  if (opts.session !== undefined) return sessionCommand(db, opts, out);
  const rows = await listRequests(db, { ...(opts.key !== undefined && { key: opts.key }), ...(opts.since && { since: opts.since }), limit: opts.limit ?? 50 });
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
    ['session', r.session ?? '-'],
    ['route', r.route],
    ['model asked', r.model ?? '-'],
    ['worker', r.worker ?? '-'],
    ['stream', String(r.stream)],
    ['status', `${r.status}${r.errorCode ? ` (${r.errorCode})` : ''}`],
    ['top probabilities', r.topProbs ? r.topProbs.map((p) => `${p.worker} ${p.prob.toFixed(3)}`).join(', ') : '-'],
    ['fallbacks tried', r.fallbacks.join(', ') || '-'],
    ['tool calls', r.toolCalls?.join(', ') || '-'],
    ['tokens in/out', `${r.tokensIn} / ${r.tokensOut}`],
    ['cost', `$${formatUsd(r.cost)}`],
    ['routing ms', ms(r.routingMs)],
    ['provider ms', ms(r.providerMs)],
    ['total ms', ms(r.totalMs)],
  ];
  return lines.map(([k, v]) => `${k.padEnd(18)} ${v}\n`).join('');
}

/** A session's rows, oldest first (at most `limit`, default 10000), as the report's turns. */
export async function sessionTurns(db: Db, session: string, opts: { key?: string; since?: Date; limit?: number } = {}): Promise<SessionTurn[]> {
  const rows = await listRequests(db, { session, order: 'asc', limit: opts.limit ?? 10_000, ...(opts.key !== undefined && { key: opts.key }), ...(opts.since && { since: opts.since }) });
  return rows.map(turnOf);
}

/** `fugu report session:S`'s data. */
export async function sessionReportData(db: Db, session: string): Promise<SessionReportData> {
  return { session, turns: await sessionTurns(db, session) };
}

function turnOf(r: RequestRow): SessionTurn {
  return {
    at: r.createdAt.toISOString(),
    requestId: r.requestId,
    route: r.route,
    model: r.model,
    worker: r.worker,
    prob: r.topProbs?.find((p) => p.worker === r.worker)?.prob ?? null,
    fallbacks: r.fallbacks,
    tokensIn: r.tokensIn,
    tokensOut: r.tokensOut,
    cost: r.cost,
    status: r.status,
    errorCode: r.errorCode,
    toolCalls: r.toolCalls ?? [],
    workflowId: r.workflowId,
  };
}

/** `--session S`: the session's turns in order, then per worker (table), or the turns as JSON. */
async function sessionCommand(db: Db, opts: ListFlags, out: NodeJS.WritableStream): Promise<number> {
  const session = opts.session!;
  const turns = await sessionTurns(db, session, { ...(opts.key !== undefined && { key: opts.key }), ...(opts.since && { since: opts.since }), ...(opts.limit !== undefined && { limit: opts.limit }) });
  if (opts.json) {
    printJson(turns.map((t, i) => ({ turn: i + 1, ...t, cost: formatUsd(t.cost) })));
    return 0;
  }
  if (turns.length === 0) {
    out.write(`no requests recorded for session "${session}" (a request's session: x-fugu-session, or the session id its client sends: fugu requests show <id>)\n`);
    return 0;
  }
  const cost = turns.reduce((s, t) => s + t.cost, 0n);
  out.write(`session ${session}: ${turns.length} turn${turns.length === 1 ? '' : 's'}, ${workerSwitches(turns)} worker switch${workerSwitches(turns) === 1 ? '' : 'es'}, $${formatUsd(cost, 8)}\n`);
  out.write(
    columns(
      [
        ['turn', 'time', 'API', 'model', 'worker', 'tokens in/out', 'cost USD', 'status', 'tool calls'],
        ...turns.map((t, i) => [
          String(i + 1),
          t.at.slice(0, 23).replace('T', ' '),
          apiOf(t.route),
          t.model ?? '-',
          `${t.worker ?? '-'}${t.fallbacks.length > 0 ? ` (after ${t.fallbacks.join(',')})` : ''}`,
          `${t.tokensIn}/${t.tokensOut}`,
          formatUsd(t.cost, 8),
          `${t.status}${t.errorCode ? ` ${t.errorCode}` : ''}`,
          t.toolCalls.join(',') || '-',
        ]),
      ],
      [0, 5, 6],
    ),
  );
  out.write('\nper worker\n');
  out.write(
    columns(
      [['worker', 'turns', 'tokens in/out', 'cost USD'], ...workerTotals(turns).map((w) => [w.worker, String(w.turns), `${w.tokensIn}/${w.tokensOut}`, formatUsd(w.cost, 8)])],
      [1, 2, 3],
      '  ',
    ),
  );
  return 0;
}
