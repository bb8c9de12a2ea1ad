export * from './config.ts';
export * from './redis-url.ts';
