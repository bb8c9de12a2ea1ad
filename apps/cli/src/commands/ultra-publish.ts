// `fugu ultra publish`: the Conductor that model `fugu-ultra` (or --name) serves on a pool, with
// its workflow bounds, tool-loop bounds and shared-memory limits (@fugu/ultra interactive/publish.ts).
// Stored in Postgres, then announced on Redis (`<prefix>:ultra:published`): every gateway drops the
// deployment it reuses and serves the new one from its next request, without a restart (Redis
// unreachable: within their FUGU_GATEWAY_ULTRA_CACHE_MS).
import type { Command } from 'commander';
import type { FuguConfig } from '@fugu/config';
import { loadLlmRouter } from '@fugu/datasets';
import { openContext, resolveWorkerPool } from '@fugu/evaluation';
import { createRedis } from '@fugu/queue';
import { INTERACTIVE_DEFAULTS, publishUltra, trainSplitRanking } from '@fugu/ultra';
import { action, EXIT, intOption, listOption, usdOption, type Cli } from '../cli.ts';

export type UltraPublishFlags = {
  conductor: string; pool?: string; name: string; maxSteps: number; maxUsd?: string; maxTokensPerStep?: number; ranking?: string[]; argmax?: boolean;
  maxToolTurns: number; maxToolTurnsWorkflow: number; toolTimeoutS: number; sharedMemory: boolean; memoryEntries: number; memoryChars: number;
};

/** The flags' defaults (what `fugu ultra publish --conductor X` means). */
export const ULTRA_PUBLISH_DEFAULTS: Omit<UltraPublishFlags, 'conductor'> = {
  name: 'fugu-ultra', maxSteps: 5, maxToolTurns: INTERACTIVE_DEFAULTS.maxToolTurnsPerAgent, maxToolTurnsWorkflow: INTERACTIVE_DEFAULTS.maxToolTurnsPerWorkflow,
  toolTimeoutS: INTERACTIVE_DEFAULTS.toolResultTimeoutMs / 1000, sharedMemory: INTERACTIVE_DEFAULTS.sharedMemory, memoryEntries: INTERACTIVE_DEFAULTS.memoryMaxEntries,
  memoryChars: INTERACTIVE_DEFAULTS.memoryMaxChars,
};

export function registerUltraPublish(ultra: Command, cli: Cli): void {
  ultra
    .command('publish')
    .description('serve a Conductor as model fugu-ultra on the gateway\'s pool (policy:<ckpt>, llm:<worker or endpoint>, fixed:...): gateways use it from their next request')
    .requiredOption('--conductor <spec>', 'who writes the workflows: policy:<ckpt>, llm:<worker or endpoint>, fixed:single:<w>, fixed:router:<ckpt>, fixed:moa:<n>, fixed:chain')
    .option('--pool <P>', "llmrouter | <pool.yaml> (default: the gateway's pool, FUGU_GATEWAY_POOL)")
    .option('--name <model>', 'the model name clients ask for', ULTRA_PUBLISH_DEFAULTS.name)
    .addOption(intOption('--max-steps <n>', 'most steps of a workflow', ULTRA_PUBLISH_DEFAULTS.maxSteps))
    .addOption(usdOption('--max-usd <usd>', 'budget of one workflow in USD'))
    .addOption(intOption('--max-tokens-per-step <n>', 'most output tokens of a step'))
    .option('--argmax', 'policy: take the most probable decisions instead of sampling with the request\'s seed (a trained policy)')
    .addOption(listOption('--ranking <a,b>', "fixed topologies' workers, best first (default: the LLMRouter training split's ranking on its pool, else pool order)"))
    .addOption(intOption('--max-tool-turns <n>', 'tool-call turns of one agent, at most', ULTRA_PUBLISH_DEFAULTS.maxToolTurns))
    .addOption(intOption('--max-tool-turns-workflow <n>', 'tool-call turns of all agents of a workflow, at most', ULTRA_PUBLISH_DEFAULTS.maxToolTurnsWorkflow))
    .addOption(intOption('--tool-timeout-s <n>', "seconds the client has to send a workflow's tool results", ULTRA_PUBLISH_DEFAULTS.toolTimeoutS))
    .option('--no-shared-memory', "later workflows of a conversation don't see the earlier ones' tool calls and results")
    .addOption(intOption('--memory-entries <n>', 'shared memory: the newest tool results an agent is shown', ULTRA_PUBLISH_DEFAULTS.memoryEntries))
    .addOption(intOption('--memory-chars <n>', 'shared memory: characters an agent is shown, at most', ULTRA_PUBLISH_DEFAULTS.memoryChars))
    .action(action(async (f: UltraPublishFlags) => {
      process.stdout.write(`${await cmdUltraPublish(cli.config(), f)}\n`);
      return EXIT.ok;
    }));
}

/** Publishes; returns the line to show. */
export async function cmdUltraPublish(config: FuguConfig, f: UltraPublishFlags): Promise<string> {
  const poolSpec = f.pool ?? config.gateway.pool;
  const pool = await resolveWorkerPool(poolSpec, config.llmrouterDir);
  const names = pool.workers.map((w) => w.name);
  let ranking = f.ranking;
  if (ranking === undefined && (poolSpec === 'llmrouter' || poolSpec.startsWith('llmrouter:'))) {
    const dir = poolSpec === 'llmrouter' ? config.llmrouterDir : poolSpec.slice('llmrouter:'.length);
    ranking = trainSplitRanking(names, (await loadLlmRouter(dir)).items, 0);
  }
  const options: Record<string, unknown> = {
    workflow: {
      maxSteps: f.maxSteps,
      ...(f.maxUsd !== undefined && { maxUsd: f.maxUsd }),
      ...(f.maxTokensPerStep !== undefined && { maxTokensPerStep: f.maxTokensPerStep }),
      ...(ranking !== undefined && { ranking }),
      ...(f.argmax && { argmax: true }),
    },
    maxToolTurnsPerAgent: f.maxToolTurns,
    maxToolTurnsPerWorkflow: f.maxToolTurnsWorkflow,
    toolResultTimeoutMs: f.toolTimeoutS * 1000,
    sharedMemory: f.sharedMemory,
    memoryMaxEntries: f.memoryEntries,
    memoryMaxChars: f.memoryChars,
  };
  const ctx = await openContext({ redis: false, config });
  // the message to the gateways: one try (Redis unreachable: they read it within their ultraCacheMs)
  const redis = createRedis(config.redisUrl, 'producer', { retryStrategy: () => null });
  try {
    const { deployment, previous, told } = await publishUltra(ctx.db, {
      name: f.name, conductor: f.conductor, pool, options, endpoints: config.conductor.endpoints.map((e) => e.name), announce: { redis, queuePrefix: config.queuePrefix },
    });
    return (
      `${deployment.name}: ${previous ? `${previous.conductor} -> ` : ''}${deployment.conductor} on pool ${deployment.pool}` +
      (told ? '' : ` (Redis unreachable: gateways serve it within FUGU_GATEWAY_ULTRA_CACHE_MS = ${config.gateway.ultraCacheMs} ms)`)
    );
  } finally {
    redis.disconnect();
    await ctx.close();
  }
}
