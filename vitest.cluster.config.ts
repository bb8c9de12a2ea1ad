import { defineConfig } from 'vitest/config';

// `npm run test:cluster`: fugu across hosts made of network namespaces (test/cluster). Needs root;
// one file at a time, since the hosts share the machine's two cores.
export default defineConfig({
  test: {
    include: ['test/cluster/**/*.test.ts'],
    testTimeout: 600_000,
    hookTimeout: 180_000,
    pool: 'forks',
    fileParallelism: false,
    reporters: ['default'],
  },
});
