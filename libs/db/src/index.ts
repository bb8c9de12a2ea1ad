export * from './schema.ts';
export * from './connection.ts';
export * from './repositories.ts';
export * from './router-repositories.ts';
