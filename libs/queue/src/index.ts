export * from './connection.ts';
export * from './names.ts';
export * from './slots.ts';
export * from './contracts.ts';
export * from './token-bucket.ts';
export * from './producer.ts';
export * from './shutdown.ts';
