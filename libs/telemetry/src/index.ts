export * from './logger.ts';
export * from './ops-server.ts';
export { Registry, Counter, Histogram, Gauge } from 'prom-client';
export * from './tracing.ts';
