// @fugu/evaluation: evaluation batches: resolve the inputs, plan, enqueue, follow, summarise,
// soft labels; and the services context (config, Postgres, Redis queues) drivers run in.
export * from './context.ts';
export * from './inputs.ts';
export * from './plan.ts';
export * from './run.ts';
export * from './summary.ts';
export * from './report-data.ts';
