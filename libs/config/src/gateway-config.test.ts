import { describe, expect, it } from 'vitest';
import { ConfigError } from '@fugu/core';
import { loadConfig } from './config.ts';

describe('gateway configuration', () => {
  it('has the documented defaults', () => {
    expect(loadConfig({}).gateway).toEqual({
      port: 8080,
      host: '127.0.0.1',
      mode: 'in-process',
      pool: 'llmrouter',
      auth: 'keys',
      fallback: 'next-best',
      fallbackAttempts: 2,
      bodyLimitBytes: 1_048_576,
      callTimeoutMs: 120_000,
      responseCache: false,
      limitWaitMs: 2_000,
      logMessages: false,
      keyCacheMs: 1_000,
      ultraCacheMs: 1_000,
      recordLingerMs: 5,
      cooldownFails: 3,
      cooldownMs: 30_000,
      journalGraceMs: 30_000,
      filesMaxBytes: 536_870_912,
      batchMaxLines: 1_000_000,
      batchMaxInFlight: 20_000,
      batchMaxLocal: 8,
      batchDrivers: 4,
      batchLeaseMs: 30_000,
      batchLocalWorkers: 1,
      batchWorkerWaitMs: 5_000,
      batchLocalIdleMs: 60_000,
    });
  });

  it('reads FUGU_GATEWAY_* and names the variable of a bad value', () => {
    const g = loadConfig({ FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_MODE: 'pool', FUGU_GATEWAY_AUTH: 'none', FUGU_GATEWAY_FALLBACK_WORKER: 'w', FUGU_GATEWAY_FALLBACK_ATTEMPTS: '0' }).gateway;
    expect(g).toMatchObject({ port: 0, mode: 'pool', auth: 'none', fallbackWorker: 'w', fallbackAttempts: 0 });
    for (const [name, value] of [['FUGU_GATEWAY_MODE', 'cluster'], ['FUGU_GATEWAY_AUTH', 'maybe'], ['FUGU_GATEWAY_BODY_LIMIT_BYTES', '0'], ['FUGU_GATEWAY_FALLBACK', 'random']] as const) {
      const e = (() => {
        try {
          loadConfig({ [name]: value });
        } catch (x) {
          return x;
        }
      })();
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).variable).toBe(name);
    }
  });
});
