// The reward service for external RL engines (POST /v1/rewards; README.md beside this file).
export * from './protocol.ts';
export * from './service.ts';
export * from './prompts.ts';
