import nx from '@nx/eslint-plugin';

// Module boundaries encode DESIGN.md's dependency direction:
// apps -> libs; core depends on nothing of ours; a lib never imports an app;
// providers knows nothing of queues and queue nothing of providers;
// the learning libs (es, grpo, router-model) are pure computation on core.
const lib = (scope, allowed) => ({
  sourceTag: `scope:${scope}`,
  onlyDependOnLibsWithTags: allowed.map((s) => `scope:${s}`),
});

export default [
  ...nx.configs['flat/base'],
  ...nx.configs['flat/typescript'],
  { ignores: ['**/node_modules', '**/.tools', '**/dist', '**/.nx', 'reports', '.fugu'] },
  {
    files: ['**/*.ts'],
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          enforceBuildableLibDependency: false,
          allow: [],
          depConstraints: [
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib'] },
            { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:lib'] },
            lib('core', []),
            lib('telemetry', ['core']),
            lib('config', ['core']),
            lib('datasets', ['core']),
            lib('providers', ['core', 'telemetry']),
            lib('queue', ['core', 'config', 'telemetry']),
            lib('db', ['core', 'config', 'telemetry']),
            lib('es', ['core']),
            lib('grpo', ['core']),
            lib('router-model', ['core']),
            lib('conductor', ['core']),
            // multistep: recorded multi-agent runs as per-question tables (converters, answer equivalence) and the step model measured on them
            lib('multistep', ['core', 'conductor', 'report']),
            // calls: the one call pipeline (cache, shared rate limits, provider, cost, call row)
            lib('calls', ['core', 'config', 'telemetry', 'providers', 'db', 'queue']),
            // evaluation: the evaluation-batch driver (plan, enqueue, follow, summary, labels)
            lib('evaluation', ['core', 'config', 'telemetry', 'db', 'queue', 'datasets', 'providers', 'report']),
            // report: HTML pages and charts from data handed to it (the drivers produce its input types)
            lib('report', ['core']),
            // local-services: a workstation's own Redis/Postgres and local processes (used by the CLI and infra/)
            lib('local-services', ['core', 'config']),
            // serving: the router behind a RouteClient (in-process threads or the route queue)
            lib('serving', ['core', 'config', 'telemetry', 'db', 'queue', 'router-model']),
            // training: ES fitness tasks, coordinator and evaluators (routing data, features, the router model); never serving
            lib('training', ['core', 'config', 'db', 'queue', 'datasets', 'router-model', 'es', 'telemetry', 'report']),
            // batch: the OpenAI Batch API's files, batches and their driver (lines as chat-call jobs)
            lib('batch', ['core', 'telemetry', 'db', 'queue', 'calls']),
            // ultra: the Conductor's executor and serving (conduct jobs, writers, steps as chat calls, fugu-ultra behind the
            // OpenAI API); never training-time code: no evaluation batches, reports or GRPO (training: the router's features)
            lib('ultra', ['core', 'config', 'telemetry', 'db', 'queue', 'calls', 'datasets', 'providers', 'conductor', 'router-model', 'training']),
            // ultra-training: the Conductor's training-time code on the executor (ultra eval/run, calibrate, GRPO, the reward
            // service); depends on ultra, never the reverse (apps/gateway imports it only in plugins/rewards.ts)
            lib('ultra-training', ['core', 'config', 'telemetry', 'db', 'queue', 'calls', 'datasets', 'providers', 'conductor', 'router-model', 'training', 'evaluation', 'report', 'grpo', 'ultra']),
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-non-null-assertion': 'off',
      // `.catch(() => {})` on best-effort cleanup is deliberate
      '@typescript-eslint/no-empty-function': 'off',
    },
  },
  {
    // the executor (apps/conductor) and the gateway's serving path carry no training-time code: in
    // apps/gateway only the reward service's route (plugins/rewards.ts) imports @fugu/ultra-training
    files: ['apps/conductor/**/*.ts', 'apps/gateway/**/*.ts'],
    ignores: ['apps/gateway/src/plugins/rewards.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        paths: [{ name: '@fugu/ultra-training', message: 'training-time code: only apps/gateway/src/plugins/rewards.ts (the reward service) imports @fugu/ultra-training in the gateway, and apps/conductor never does' }],
      }],
    },
  },
];
