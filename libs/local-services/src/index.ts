// @fugu/local-services: the project's own Redis and Postgres for a workstation (start, stop,
// reachability), and the supervisor of local worker processes (provider workers, ES evaluators).
export * from './local-services.ts';
export { DEFAULT_PG_PORT, DEFAULT_REDIS_PORT, PG_APP_NAME, PG_SUPERUSER, postgresUrlFor, redisUrlFor, type Log } from './defaults.ts';
export { findExecutable, run, tail, waitUntil, type RunResult } from './processes.ts';
export { freePort, isPortOpen } from './ports.ts';
export { isReachable } from './reachability.ts';
export { findRedisServer, kill9Redis, redisPaths, runningRedisPid, startRedis, stopRedis, type RedisSpec } from './redis.ts';
export { findPostgresBinaries, type PostgresBinaries } from './postgres-binaries.ts';
export { kill9Postgres, postgresPaths, runningPostgresPid, startPostgres, stopPostgres, type PostgresSpec } from './postgres.ts';
export * from './redis-cluster.ts';
export * from './local-processes.ts';
export * from './local-workers.ts';
