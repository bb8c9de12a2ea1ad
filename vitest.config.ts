import { defineConfig } from 'vitest/config';

// One config for the whole workspace: unit tests live beside the code (libs/*/src, apps/*/src),
// integration, fault and end-to-end tests in test/. They talk to real Redis and real Postgres.
export default defineConfig({
  test: {
    include: ['libs/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    // the multi-host tests need root and their own hosts: `npm run test:cluster` (vitest.cluster.config.ts)
    exclude: ['test/cluster/**', '**/node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
