// @fugu/local-services: the project's own Redis and Postgres for a workstation (start, stop,
// reachability), and the supervisor of local worker processes (provider workers, ES evaluators).
export * from './local-services.ts';
export * from './redis-cluster.ts';
export * from './local-processes.ts';
export * from './local-workers.ts';
