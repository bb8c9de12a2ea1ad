import { defineConfig } from 'vitest/config';

// `npm run test:harnesses`: Codex CLI, Claude Code and OpenCode against a gateway on the harness
// pool (test/harness). The harnesses are installed into a cache outside the repository on first
// use; one file, its runs one at a time (each is a harness process and a gateway on two cores).
export default defineConfig({
  test: {
    include: ['test/harness/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 900_000,
    expect: { poll: { timeout: 30_000 } },
    pool: 'forks',
    fileParallelism: false,
    reporters: ['default'],
  },
});
