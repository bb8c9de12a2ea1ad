export * from './format.ts';
export * from './llmrouter.ts';
export * from './pool.ts';
export * from './verifiers.ts';
export * from './splits.ts';
export * from './summary.ts';
export * from './replay.ts';
export { normalizePrompt } from './normalize.ts';
export { parsePythonLiteral, tryParsePythonLiteral, parseChoices, type PyValue, type Choices } from './pylit.ts';
