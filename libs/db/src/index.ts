export * from './schema.ts';
export * from './connection.ts';
export * from './repositories.ts';
export * from './router-repositories.ts';
export * from './deployments.ts';
export * from './api-keys.ts';
export * from './es-repositories.ts';
export * from './requests.ts';
