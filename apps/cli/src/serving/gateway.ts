// `fugu gateway`: starts the OpenAI-compatible gateway (the same command as its container,
// `node apps/gateway/src/main.ts`) in the foreground, with flags as FUGU_GATEWAY_* overrides,
// and prints a curl line to try it once it listens. Ctrl-C stops it gracefully.
import { fork } from 'node:child_process';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { int, parse } from '../args.ts';

import { gatewayMain } from '@fugu/local-services';

const OPTIONS = { port: { type: 'string' }, host: { type: 'string' }, mode: { type: 'string' }, pool: { type: 'string' }, auth: { type: 'string' } } as const;

export async function cmdGateway(config: FuguConfig, args: string[]): Promise<number> {
  const { flags, positionals } = parse(args, OPTIONS);
  if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
  const env: Record<string, string | undefined> = { ...process.env };
  if (flags.port !== undefined) env.FUGU_GATEWAY_PORT = String(int(flags.port, '--port', 0));
  if (typeof flags.host === 'string') env.FUGU_GATEWAY_HOST = flags.host;
  if (typeof flags.mode === 'string') {
    if (!['in-process', 'pool'].includes(flags.mode)) throw new InputError(`must be in-process or pool, got "${flags.mode}"`, { field: '--mode' });
    env.FUGU_GATEWAY_MODE = flags.mode;
  }
  if (typeof flags.pool === 'string') env.FUGU_GATEWAY_POOL = flags.pool;
  if (typeof flags.auth === 'string') {
    if (!['keys', 'none'].includes(flags.auth)) throw new InputError(`must be keys or none, got "${flags.auth}"`, { field: '--auth' });
    env.FUGU_GATEWAY_AUTH = flags.auth;
  }
  const auth = env.FUGU_GATEWAY_AUTH ?? config.gateway.auth;
  const child = fork(gatewayMain, [], { env, stdio: ['inherit', 'inherit', 'inherit', 'ipc'] });
  child.on('message', (m: { type?: string; port?: number; host?: string; example?: string }) => {
    if (m?.type !== 'ready') return;
    const host = !m.host || m.host === '0.0.0.0' ? '127.0.0.1' : m.host;
    const body = JSON.stringify({ model: 'fugu', messages: [{ role: 'user', content: m.example ?? 'Hello!' }] }).replace(/'/g, "'\\''");
    const authHeader = auth === 'none' ? '' : ` -H "Authorization: Bearer $FUGU_API_KEY"`;
    process.stderr.write(`\nthe gateway is up: OpenAI base URL http://${host}:${m.port}/v1 (model "fugu", or a worker's name)\n`);
    if (auth !== 'none') process.stderr.write('a key for it: export FUGU_API_KEY=$(npm run -s fugu -- keys create --name me)\n');
    process.stderr.write(`try:\n  curl -s http://${host}:${m.port}/v1/chat/completions${authHeader} -H 'Content-Type: application/json' -d '${body}'\n\n`);
  });
  // Ctrl-C reaches the child too (same process group): it drains and exits; wait for it
  const onSignal = (signal: NodeJS.Signals) => {
    if (child.exitCode === null) child.kill(signal);
  };
  process.on('SIGINT', () => {});
  process.on('SIGTERM', onSignal);
  return new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve(code ?? (signal === 'SIGINT' ? 130 : 1)));
  });
}
