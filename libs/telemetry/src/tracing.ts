// OpenTelemetry tracing: off unless an OTLP endpoint is configured, with the standard variables
// (https://opentelemetry.io/docs/specs/otel/configuration/sdk-environment-variables/):
//
//   OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   where spans go (OTLP over
//       HTTP, JSON; the exporter reads its own variables: headers, timeout, ...)
//   OTEL_SERVICE_NAME                                                  default: the app's name
//   OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG                       default parentbased_always_on
//   OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE                   export every 5 s, 2048 spans kept
//   OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none                  off
//
// Started, it registers the W3C trace-context propagator and an AsyncLocalStorage context manager,
// so a span is the parent of what its code does, in this process and across the queues: BullMQ
// carries the context in each job (`bullTelemetry`, BullMQ's own telemetry interface through
// bullmq-otel), and a worker's job span continues the trace of the code that added the job.
// Spans carry names, ids, models, token counts and costs; never a prompt, an answer or a secret.
//
// Only the API is loaded with this module; the SDK, the exporter and bullmq-otel (about 150 ms and
// 18 MiB) are imported by startTracing when tracing is on.
import { context, diag, DiagLogLevel, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import type { Sampler } from '@opentelemetry/sdk-trace';
import type { BullMQOtel } from 'bullmq-otel';
import { scrub } from './logger.ts';

/** Where the SDK's warnings go: a pino logger, or anything with its `warn(fields, message)`. */
export type WarnLog = { warn(fields: Record<string, unknown>, message: string): void };

type TraceSdk = typeof import('@opentelemetry/sdk-trace');

export { SpanKind, SpanStatusCode, type Attributes, type Span };

export type Tracing = {
  /** exports the spans still buffered (a process that exits on its own calls it, or shutdown) */
  flush(): Promise<void>;
  /** flushes, then stops exporting */
  shutdown(): Promise<void>;
};

let started: { tracing: Tracing; bull: BullMQOtel } | undefined;

const TRACER = 'fugu';

/** Whether tracing is configured by these variables (an OTLP endpoint, not disabled). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  if (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER.split(',').map((s) => s.trim()).includes('none')) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * The sampler OTEL_TRACES_SAMPLER names (the spec's values; default parentbased_always_on). An
 * unknown name or an argument outside [0, 1] is an error naming the variable.
 */
export function samplerFromEnv(sdk: TraceSdk, env: NodeJS.ProcessEnv = process.env): Sampler {
  const { AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler } = sdk;
  const name = (env.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on').trim().toLowerCase();
  const ratio = (): number => {
    const raw = env.OTEL_TRACES_SAMPLER_ARG;
    if (raw === undefined || raw.trim() === '') return 1;
    const r = Number(raw);
    if (!Number.isFinite(r) || r < 0 || r > 1) throw new Error(`invalid configuration: OTEL_TRACES_SAMPLER_ARG: a sampling ratio from 0 to 1, got ${JSON.stringify(raw)}`);
    return r;
  };
  switch (name) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      throw new Error(
        `invalid configuration: OTEL_TRACES_SAMPLER: unknown sampler ${JSON.stringify(env.OTEL_TRACES_SAMPLER)} (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio)`,
      );
  }
}

/** OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces (the spec's rule). */
export function tracesUrl(env: NodeJS.ProcessEnv): string {
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  const raw = traces || `${env.OTEL_EXPORTER_OTLP_ENDPOINT!.trim().replace(/\/+$/, '')}/v1/traces`;
  try {
    new URL(raw);
  } catch {
    throw new Error(`invalid configuration: ${traces ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT'}: not a URL (${JSON.stringify(raw)})`);
  }
  return raw;
}

function batchOptions(env: NodeJS.ProcessEnv): { scheduledDelayMillis?: number; maxQueueSize?: number } {
  const int = (name: 'OTEL_BSP_SCHEDULE_DELAY' | 'OTEL_BSP_MAX_QUEUE_SIZE'): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new Error(`invalid configuration: ${name}: a positive integer, got ${JSON.stringify(raw)}`);
    return n;
  };
  const delay = int('OTEL_BSP_SCHEDULE_DELAY');
  const queue = int('OTEL_BSP_MAX_QUEUE_SIZE');
  return { ...(delay !== undefined && { scheduledDelayMillis: delay }), ...(queue !== undefined && { maxQueueSize: queue }) };
}

/** The SDK reports an exception as its JSON (stack and all): its message is what a reader needs. */
function errorText(message: string): string {
  try {
    const o = JSON.parse(message) as { message?: unknown };
    if (o && typeof o.message === 'string') return o.message;
  } catch {
    // plain text
  }
  return message;
}

/**
 * The SDK's own errors and warnings (an export the collector refused or never answered) as
 * warnings in `log`: the first at once, then at most one a minute, counting the ones left out.
 */
export function sdkDiagnostics(log: WarnLog, everyMs = 60_000): { error(message: string, ...args: unknown[]): void; warn(message: string, ...args: unknown[]): void } {
  let last = -Infinity;
  let skipped = 0;
  const say = (message: string, args: unknown[]): void => {
    const now = Date.now();
    if (now - last < everyMs) {
      skipped++;
      return;
    }
    last = now;
    const detail = args.map((a) => (a instanceof Error ? a.message : typeof a === 'string' ? a : JSON.stringify(a))).join(' ');
    log.warn({ ...(detail && { detail: scrub(detail).slice(0, 500) }), ...(skipped > 0 && { skipped }) }, `tracing: ${scrub(errorText(message))}`);
    skipped = 0;
  };
  return { error: (m, ...a) => say(m, a), warn: (m, ...a) => say(m, a) };
}

/**
 * Starts tracing for this process when the environment configures it (see the header); once per
 * process (a second call returns the first). Undefined: tracing is off, and the helpers below
 * cost nothing. A bad setting is an error naming the variable, and starts nothing. `log` gets
 * the SDK's errors (sdkDiagnostics): a collector that cannot be reached is a warning, not silence.
 */
export async function startTracing(service: string, env: NodeJS.ProcessEnv = process.env, log?: WarnLog): Promise<Tracing | undefined> {
  if (started) return started.tracing;
  if (!tracingConfigured(env)) return undefined;
  const [sdk, { AsyncLocalStorageContextManager }, { W3CTraceContextPropagator }, { OTLPTraceExporter }, { resourceFromAttributes }, { BullMQOtel }] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/context-async-hooks'),
    import('@opentelemetry/core'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('bullmq-otel'),
  ]);
  const name = env.OTEL_SERVICE_NAME?.trim() || service;
  const provider = new sdk.TracerProvider({
    resource: resourceFromAttributes({ 'service.name': name, 'service.namespace': 'fugu' }),
    sampler: samplerFromEnv(sdk, env),
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: tracesUrl(env) }), ...batchOptions(env) })],
  });
  if (log) {
    const d = sdkDiagnostics(log);
    diag.setLogger({ ...d, info: () => {}, debug: () => {}, verbose: () => {} }, { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true });
  }
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  const tracing: Tracing = {
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
  started = { tracing, bull: new BullMQOtel({ tracerName: 'bullmq' }) };
  return tracing;
}

/** Whether this process traces (startTracing found an endpoint). */
export function tracingOn(): boolean {
  return started !== undefined;
}

/**
 * BullMQ's telemetry option for a Queue, Worker, FlowProducer or QueueEvents: with tracing on, a
 * job carries the context it was added in and its worker's span continues it; off, nothing.
 */
export function bullTelemetry(): { telemetry?: BullMQOtel } {
  return started ? { telemetry: started.bull } : {};
}

/**
 * Runs `fn` in a new span (a child of the active one), ended when `fn` settles; a rejection is
 * recorded on it (type and message, secrets scrubbed) and rethrown. With tracing off, `fn`
 * runs alone (its span argument is undefined).
 */
export async function inSpan<T>(name: string, opts: { kind?: SpanKind; attributes?: Attributes }, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!started) return fn(undefined);
  const tracer = trace.getTracer(TRACER);
  return tracer.startActiveSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, ...(opts.attributes && { attributes: opts.attributes }) }, async (span) => {
    try {
      const r = await fn(span);
      endSpan(span);
      return r;
    } catch (e) {
      endSpan(span, e);
      throw e;
    }
  });
}

/**
 * A span (a child of the active one) that its caller ends with `endSpan`, for work that ends later
 * than the function that starts it (a stream). Undefined when tracing is off.
 */
export function startSpan(name: string, opts: { kind?: SpanKind; attributes?: Attributes }): Span | undefined {
  if (!started) return undefined;
  return trace.getTracer(TRACER).startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, ...(opts.attributes && { attributes: opts.attributes }) });
}

/** Ends a span; with an error, as failed (its type, and its message with secrets scrubbed). */
export function endSpan(span: Span, error?: unknown): void {
  if (error !== undefined) {
    span.setStatus({ code: SpanStatusCode.ERROR, message: scrub((error as Error)?.message ?? String(error)) });
    span.setAttribute('error.type', (error as Error)?.name || 'Error');
  }
  span.end();
}

/**
 * A span for a request served over HTTP (kind SERVER), continuing the caller's trace from its
 * `traceparent` header, and the context to run the request's code in (`withContext`). Undefined
 * when tracing is off. The caller ends it.
 */
export function startServerSpan(name: string, headers: Record<string, string | string[] | undefined>, attributes: Attributes): { span: Span; context: Context } | undefined {
  if (!started) return undefined;
  const parent = propagation.extract(context.active(), headers);
  const span = trace.getTracer(TRACER).startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/** Runs `fn` in a context (a server span's), so the spans its code starts are children. */
export function withContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, fn);
}
