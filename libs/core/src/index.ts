export * from './messages.ts';
export * from './random.ts';
export * from './money.ts';
export * from './workers.ts';
export * from './items.ts';
export * from './errors.ts';
export * from './labels.ts';
export * from './chat-model.ts';
