import { defineConfig } from 'vitest/config';

// `npm run test:images`: fugu's image built and run as containers (test/images). Needs a Docker
// daemon; one file, its cases in order (they share the stack of containers).
export default defineConfig({
  test: {
    include: ['test/images/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 1_800_000,
    pool: 'forks',
    fileParallelism: false,
    reporters: ['default'],
  },
});
