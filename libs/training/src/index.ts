// Training stages beyond SFT: the ES fitness tasks (and the routing data and feature cache they
// share with SFT), the ES coordinator and evaluators.
export * from './tasks/index.ts';
export * from './coordinator/run-config.ts';
export * from './coordinator/loop.ts';
export * from './coordinator/es-driver.ts';
export * from './coordinator/coordinator.ts';
export * from './coordinator/create-run.ts';
export * from './evaluator/evaluator.ts';
