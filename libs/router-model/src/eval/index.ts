// Router evaluation: the evaluation table, baselines, metrics (RouteLLM APGR/CPT, RouterBench AIQ)
// and the cost-quality sweep. Pure computation on @fugu/core.
export * from './types.ts';
export * from './baselines.ts';
export * from './metrics.ts';
export * from './sweep.ts';
