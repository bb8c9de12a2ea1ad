import { describe, expect, it } from 'vitest';
import * as sdk from '@opentelemetry/sdk-trace';
import { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace';
import { bullTelemetry, inSpan, samplerFromEnv, sdkDiagnostics, startTracing, tracesUrl, tracingConfigured, tracingOn } from './tracing.ts';

describe('tracing configuration (the OTEL_* variables)', () => {
  it('is on with an OTLP endpoint only, and off when the SDK or the traces exporter is disabled', () => {
    expect(tracingConfigured({})).toBe(false);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' })).toBe(false);
    expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  });

  it("the traces URL: the traces endpoint as given, else the base endpoint's /v1/traces; not a URL names the variable", () => {
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })).toBe('http://collector:4318/v1/traces');
    expect(tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9999/otlp' })).toBe('http://b:9999/otlp');
    expect(() => tracesUrl({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector 4318' })).toThrow(/^invalid configuration: OTEL_EXPORTER_OTLP_ENDPOINT: not a URL/);
  });

  it('samplers by the spec names; a bad name or ratio is an error naming the variable', () => {
    expect(samplerFromEnv(sdk, {})).toBeInstanceOf(ParentBasedSampler);
    expect(samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'always_on' })).toBeInstanceOf(AlwaysOnSampler);
    expect(samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'always_off' })).toBeInstanceOf(AlwaysOffSampler);
    expect(samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }).toString()).toBe(new TraceIdRatioBasedSampler(0.25).toString());
    expect(samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' }).toString()).toMatch(/TraceIdRatioBased\{0\.1\}/);
    expect(() => samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/^invalid configuration: OTEL_TRACES_SAMPLER: unknown sampler "sometimes"/);
    expect(() => samplerFromEnv(sdk, { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' })).toThrow(/^invalid configuration: OTEL_TRACES_SAMPLER_ARG: a sampling ratio from 0 to 1, got "1.5"/);
  });

  it('off: startTracing starts nothing, queues get no telemetry, and inSpan runs the function alone', async () => {
    expect(await startTracing('fugu-test', {})).toBeUndefined();
    expect(tracingOn()).toBe(false);
    expect(bullTelemetry()).toEqual({});
    await expect(inSpan('x', {}, async (span) => span)).resolves.toBeUndefined();
    await expect(inSpan('x', {}, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });

  it('a bad batch setting stops the start with the variable named', async () => {
    await expect(startTracing('fugu-test', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:1', OTEL_BSP_SCHEDULE_DELAY: 'soon' })).rejects.toThrow(/^invalid configuration: OTEL_BSP_SCHEDULE_DELAY: a positive integer, got "soon"/);
    expect(tracingOn()).toBe(false);
  });

  it("the SDK's errors: a warning with the error's message (not its stack), then at most one a window, counting the rest", async () => {
    const lines: Array<[Record<string, unknown>, string]> = [];
    const d = sdkDiagnostics({ warn: (o, m) => void lines.push([o, m]) }, 200);
    const refused = JSON.stringify({ stack: 'Error: connect ECONNREFUSED 127.0.0.1:4318\n    at TCPConnectWrap', message: 'connect ECONNREFUSED 127.0.0.1:4318', code: 'ECONNREFUSED' });
    d.error(refused);
    d.error(refused);
    d.warn('export failed with key sk-abcdefghijklmnopqrstuvwxyz');
    expect(lines).toEqual([[{}, 'tracing: connect ECONNREFUSED 127.0.0.1:4318']]);
    await new Promise((r) => setTimeout(r, 250));
    d.warn('export failed with key sk-abcdefghijklmnopqrstuvwxyz');
    expect(lines[1]).toEqual([{ skipped: 2 }, 'tracing: export failed with key sk-abcdef***']);
  });
});
