// fugu-ultra served behind the OpenAI API: one request of a conversation as one turn of the
// interactive state machine (turn.ts), signed tool-call ids (ids.ts), deployment options
// (options.ts), the conversation's shared tool memory (memory.ts), the holds that let one request
// at a time advance a workflow (holds.ts).
export * from './holds.ts';
export * from './ids.ts';
export * from './options.ts';
export * from './memory.ts';
export * from './turn.ts';
export * from './publish.ts';
