export * from './schema.ts';
export * from './connection.ts';
export * from './repositories.ts';
