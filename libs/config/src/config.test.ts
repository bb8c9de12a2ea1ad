import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError } from '@fugu/core';
import { loadConfig, redactUrl } from './config.ts';
import { clusterUrlFor, isClusterUrl, parseRedisUrl } from './redis-url.ts';

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

describe('FUGU_REDIS_URL', () => {
  it('takes one Redis or a cluster by its seed nodes', () => {
    expect(parseRedisUrl('redis://127.0.0.1:6390')).toEqual({ kind: 'single', url: 'redis://127.0.0.1:6390' });
    expect(parseRedisUrl('redis+cluster://h1:7000,h2,[::1]:7002')).toEqual({
      kind: 'cluster',
      nodes: [{ host: 'h1', port: 7000 }, { host: 'h2', port: 6379 }, { host: '::1', port: 7002 }],
      tls: false,
    });
    expect(parseRedisUrl('rediss+cluster://user:p%40ss@h1:7000/0')).toEqual({ kind: 'cluster', nodes: [{ host: 'h1', port: 7000 }], username: 'user', password: 'p@ss', tls: true });
    expect(parseRedisUrl('redis+cluster://:secret@h1:7000')).toMatchObject({ password: 'secret' });
    expect(clusterUrlFor([{ host: '127.0.0.1', port: 7000 }, { host: '::1', port: 7001 }])).toBe('redis+cluster://127.0.0.1:7000,[::1]:7001');
    expect(isClusterUrl('redis+cluster://h:1')).toBe(true);
    expect(isClusterUrl('redis://h:1')).toBe(false);
    expect(loadConfig({ FUGU_REDIS_URL: 'redis+cluster://h1:7000,h2:7001' }).redisUrl).toBe('redis+cluster://h1:7000,h2:7001');
  });
  it('names what is wrong with a malformed one, never its password', () => {
    const bad = (url: string) => (() => { try { loadConfig({ FUGU_REDIS_URL: url }); } catch (e) { return e as ConfigError; } })();
    expect(bad('redis://h1:7000,h2:7001')?.message).toMatch(/^invalid configuration: FUGU_REDIS_URL: several hosts in a redis:\/\/ URL; a Redis Cluster is written redis\+cluster:\/\//);
    expect(bad('redis+cluster://h1:7000,h2:port')?.message).toMatch(/FUGU_REDIS_URL: seed node 2 \("h2:port"\) is not host\[:port\]/);
    expect(bad('redis+cluster://h1:0')?.message).toMatch(/seed node 1 \("h1:0"\) has no valid port/);
    expect(bad('redis+cluster://h1:7000/3')?.message).toMatch(/only database 0, not \/3/);
    expect(bad('redis+cluster://')?.message).toMatch(/no seed node/);
    expect(bad('http://h1')?.message).toMatch(/unsupported scheme http:/);
    expect(bad('redis+cluster://u:hunter2@h1:7000,h2:7001/9')?.message).not.toContain('hunter2');
    expect(bad('redis+cluster://u:hunter2@h1:7000,h2:7001/9')?.variable).toBe('FUGU_REDIS_URL');
  });
  it('FUGU_PROVIDER_QUEUE_SHARDS: 1 by default, a whole number from 1 to 256', () => {
    expect(loadConfig({}).providerQueueShards).toBe(1);
    expect(loadConfig({ FUGU_PROVIDER_QUEUE_SHARDS: '4' }).providerQueueShards).toBe(4);
    expect(() => loadConfig({ FUGU_PROVIDER_QUEUE_SHARDS: '0' })).toThrow(/FUGU_PROVIDER_QUEUE_SHARDS/);
    expect(() => loadConfig({ FUGU_PROVIDER_QUEUE_SHARDS: '2.5' })).toThrow(/FUGU_PROVIDER_QUEUE_SHARDS/);
  });
});
