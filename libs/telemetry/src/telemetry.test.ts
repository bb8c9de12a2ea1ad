import { describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { Counter, Registry } from 'prom-client';
import { createLogger, scrub } from './logger.ts';
import { startOpsServer } from './ops-server.ts';

function capture(): { stream: Writable; lines: () => string[] } {
  const chunks: string[] = [];
  return {
    stream: new Writable({ write(c, _e, cb) { chunks.push(String(c)); cb(); } }),
    lines: () => chunks.join('').split('\n').filter(Boolean),
  };
}

describe('logger', () => {
  it('writes JSON and redacts secrets in fields, URLs and messages', async () => {
    const out = capture();
    const log = createLogger({ name: 't', level: 'info', destination: out.stream });
    log.info({ apiKey: 'sk-abcdefghijklmnopqrstuvwxyz', req: { headers: { authorization: 'Bearer abcdefghijklmnop' } } }, 'calling postgres://u:pw1234@h/db');
    log.error({ err: new Error('bad key sk-ant-abcdefghijklmnopqrstuvwxyz') }, 'failed');
    const text = out.lines().join('\n');
    expect(JSON.parse(out.lines()[0]!).level).toBe('info');
    expect(text).not.toContain('abcdefghijklmnopqrstuvwxyz');
    expect(text).not.toContain('pw1234');
    expect(text).not.toContain('Bearer abcdefghijklmnop');
    expect(scrub('key sk-proj-1234567890abcdefghij')).not.toContain('34567890abcdefghij');
  });
});

describe('ops server', () => {
  it('serves health, readiness and Prometheus metrics', async () => {
    const registry = new Registry();
    new Counter({ name: 'fugu_test_total', help: 'x', registers: [registry] }).inc(3);
    let ready = false;
    const s = await startOpsServer({ port: 0, host: '127.0.0.1', registry, ready: () => ready });
    try {
      const base = `http://127.0.0.1:${s.port}`;
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/readyz`)).status).toBe(503);
      ready = true;
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      expect(await (await fetch(`${base}/metrics`)).text()).toContain('fugu_test_total 3');
      expect((await fetch(`${base}/nope`)).status).toBe(404);
    } finally {
      await s.close();
    }
  });
});
