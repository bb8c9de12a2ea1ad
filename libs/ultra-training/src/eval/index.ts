// `fugu ultra eval`: the options, the batch driver, the run summary (the Conductor report's data),
// and `fugu ultra run` (one question).
export * from './options.ts';
export * from './run.ts';
export * from './summary.ts';
export * from './question.ts';
