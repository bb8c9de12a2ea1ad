// `fugu ultra eval`: the batch driver, the run summary (the Conductor report's data).
export * from './run.ts';
export * from './summary.ts';
export * from './question.ts';
