import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError } from '@fugu/core';
import { loadConfig, redactUrl } from './config.ts';

describe('loadConfig', () => {
  it('has working defaults with no environment at all', () => {
    const c = loadConfig({});
    expect(c.redisUrl).toBe('redis://127.0.0.1:6390');
    expect(c.databaseUrl).toMatch(/^postgres:\/\/.*:5440\/fugu$/);
    expect(c.worker.concurrency).toBe(256);
    expect(c.worker.providers).toContain('replay');
    expect(c.rateLimits).toEqual({});
  });

  it('takes environment variables over the file, and the file over defaults', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'fugu-config-'));
    const file = path.join(dir, 'fugu.yaml');
    writeFileSync(file, 'queuePrefix: fromfile\nworker:\n  concurrency: 8\nrateLimits:\n  openai:\n    requestsPerMinute: 600\n');
    const c = loadConfig({ FUGU_CONFIG: file, FUGU_WORKER_CONCURRENCY: '16', FUGU_TPM_OPENAI: '90000', FUGU_WORKER_PROVIDERS: 'openai, replay' });
    expect(c.queuePrefix).toBe('fromfile');
    expect(c.worker.concurrency).toBe(16);
    expect(c.worker.providers).toEqual(['openai', 'replay']);
    expect(c.rateLimits.openai).toEqual({ requestsPerMinute: 600, tokensPerMinute: 90000 });
  });

  it('names the variable to set when a value is wrong', () => {
    expect(() => loadConfig({ FUGU_REDIS_URL: 'localhost:6379' })).toThrowError(/FUGU_REDIS_URL/);
    expect(() => loadConfig({ FUGU_WORKER_CONCURRENCY: 'many' })).toThrowError(/FUGU_WORKER_CONCURRENCY/);
    expect(() => loadConfig({ FUGU_RPM_OPENAI_COMPATIBLE: '-1' })).toThrowError(/FUGU_RPM_OPENAI_COMPATIBLE/);
    expect(() => loadConfig({ FUGU_WORKER_PROVIDERS: 'openai,cohere' })).toThrowError(ConfigError);
  });

  it('reads per-worker rate limits from FUGU_WORKER_RATE_LIMITS (JSON) or the file, and names a wrong one', () => {
    expect(loadConfig({}).workerRateLimits).toEqual({});
    const c = loadConfig({ FUGU_WORKER_RATE_LIMITS: '{"gpt-4o":{"requestsPerMinute":60}}' });
    expect(c.workerRateLimits).toEqual({ 'gpt-4o': { requestsPerMinute: 60, tokensPerMinute: 0 } });
    expect(() => loadConfig({ FUGU_WORKER_RATE_LIMITS: '{nope' })).toThrowError(/FUGU_WORKER_RATE_LIMITS: not valid JSON/);
    expect(() => loadConfig({ FUGU_WORKER_RATE_LIMITS: '{"w":{"requestsPerMinute":-1}}' })).toThrowError(/FUGU_WORKER_RATE_LIMITS \(worker "w", requestsPerMinute\)/);
  });

  it('names the file when it cannot be read or parsed', () => {
    expect(() => loadConfig({ FUGU_CONFIG: '/nonexistent/fugu.yaml' })).toThrowError(/FUGU_CONFIG=\/nonexistent\/fugu.yaml/);
    const dir = mkdtempSync(path.join(tmpdir(), 'fugu-config-'));
    const file = path.join(dir, 'bad.json');
    writeFileSync(file, '{ nope');
    expect(() => loadConfig({ FUGU_CONFIG: file })).toThrowError(/not valid JSON/);
    writeFileSync(path.join(dir, 'unknown.yaml'), 'redisURL: redis://x\n');
    expect(() => loadConfig({ FUGU_CONFIG: path.join(dir, 'unknown.yaml') })).toThrowError(ConfigError);
  });

  it('reads the router serving settings, with defaults, and names a wrong one', () => {
    expect(loadConfig({}).router).toEqual({ deployment: 'fugu', threads: 1, maxBatch: 16, maxWaitMs: 2, executionProvider: 'auto', lockDurationMs: 3000, pollMs: 5000, port: 9465, timeoutMs: 5000 });
    const c = loadConfig({ FUGU_ROUTER_THREADS: '4', FUGU_ROUTER_MAX_BATCH: '32', FUGU_ROUTER_MAX_WAIT_MS: '0', FUGU_ROUTER_EXECUTION_PROVIDER: 'cpu', FUGU_ROUTER_DEPLOYMENT: 'canary' });
    expect(c.router).toMatchObject({ threads: 4, maxBatch: 32, maxWaitMs: 0, executionProvider: 'cpu', deployment: 'canary' });
    expect(() => loadConfig({ FUGU_ROUTER_EXECUTION_PROVIDER: 'tpu' })).toThrowError(/FUGU_ROUTER_EXECUTION_PROVIDER/);
  });

  it('redacts passwords in URLs', () => {
    expect(redactUrl('postgres://u:secret@h:5432/db')).not.toContain('secret');
    expect(redactUrl('redis://:hunter2@h:6379')).not.toContain('hunter2');
  });
});
