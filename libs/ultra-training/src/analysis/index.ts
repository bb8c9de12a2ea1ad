export * from './inputs.ts';
export * from './exact.ts';
export * from './planner.ts';
export * from './run.ts';
export * from './format.ts';
