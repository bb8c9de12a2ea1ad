import { Counter, Histogram, Registry } from '@fugu/telemetry';

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

export function createWorkerMetrics(registry: Registry) {
  const labelNames = ['provider'] as const;
  return {
    calls: new Counter({ name: 'fugu_provider_calls_total', help: 'Calls finished, by provider, worker and status (ok, error, cached)', labelNames: ['provider', 'worker', 'status'], registers: [registry] }),
    errors: new Counter({ name: 'fugu_provider_errors_total', help: 'Provider errors by kind (rate-limit, server, timeout, ...), retried or not', labelNames: ['provider', 'kind'], registers: [registry] }),
    latency: new Histogram({ name: 'fugu_provider_call_seconds', help: 'Latency of provider calls', labelNames, buckets: [0.001, 0.005, 0.02, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120], registers: [registry] }),
    tokens: new Counter({ name: 'fugu_provider_tokens_total', help: 'Tokens by provider and direction (in, out)', labelNames: ['provider', 'direction'], registers: [registry] }),
    spend: new Counter({ name: 'fugu_provider_spend_usd_total', help: 'Spend in USD by provider (exact figures are in Postgres)', labelNames, registers: [registry] }),
    skipped: new Counter({ name: 'fugu_provider_jobs_skipped_total', help: 'Jobs skipped because their run is paused or cancelled', labelNames, registers: [registry] }),
    invalid: new Counter({ name: 'fugu_provider_jobs_invalid_total', help: 'Jobs whose payload failed validation', labelNames, registers: [registry] }),
  };
}
