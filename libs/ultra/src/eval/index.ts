// `fugu ultra eval`: the batch driver, the run summary (the Conductor report's data).
export * from './run.ts';
export * from './summary.ts';
export * from './question.ts';
export { submitWorkflows, waitForWorkflows, type NewWorkflow, type WorkflowOptions } from './engine-api.ts';
