// fugu-ultra served behind the OpenAI API: one request of a conversation as one turn of the
// interactive state machine (turn.ts), signed tool-call ids (ids.ts), deployment options
// (options.ts), the conversation's shared tool memory (memory.ts).
export * from './ids.ts';
export * from './options.ts';
export * from './memory.ts';
export * from './turn.ts';
export * from './publish.ts';
