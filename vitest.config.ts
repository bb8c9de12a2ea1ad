import { defineConfig } from 'vitest/config';

// One config for the whole workspace: unit tests live beside the code (libs/*/src, apps/*/src),
// integration, fault and end-to-end tests in test/. They talk to real Redis and real Postgres.
export default defineConfig({
  test: {
    include: ['libs/*/src/**/*.test.ts', 'apps/*/src/**/*.test.ts', 'test/**/*.test.ts'],
    // the multi-host tests need root and their own hosts: `npm run test:cluster` (vitest.cluster.config.ts);
    // the container tests a Docker daemon: `npm run test:images` (vitest.images.config.ts); the
    // coding harnesses their npm packages: `npm run test:harnesses` (vitest.harness.config.ts)
    exclude: ['test/cluster/**', 'test/images/**', 'test/harness/**', '**/node_modules/**'],
    // Both a safety net against a hung test or hook, not a speed assertion: the heavy tests
    // (thousands of calls, child processes, the TF.js parity forward) take 60 s and more on a
    // machine whose cores are busy with other work, and must still pass there. Tests give no
    // shorter timeout of their own.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    // the same for expect.poll (vitest's default gives up after 1 s): what a test polls for (a row
    // written behind an answer, a queue's count) comes within ms on an idle machine, seconds on a busy one
    expect: { poll: { timeout: 30_000 } },
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
