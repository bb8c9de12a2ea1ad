// The workflow engine: submit workflows, execute one (the conduct job), wait for them.
export * from './options.ts';
export * from './stop-rules.ts';
export * from './plan.ts';
export * from './executor.ts';
export * from './submit.ts';
export * from './execute.ts';
export * from './router-pick.ts';
export * from './policy-writer.ts';
export * from './given.ts';
