// The worker pool the gateway calls (config gateway.pool): a pool file, or `llmrouter[:<dir>]`,
// the replay pool of the LLMRouter data answering from its recorded outcomes (the same
// resolvePool / loadLlmRouter / replayStoreFor that `fugu eval` and the provider workers use).
// One ChatModel per worker, made once.
import { ConfigError, InputError, type WorkerPool, type WorkerSpec } from '@fugu/core';
import { loadLlmRouter, promptIndex, replayStoreFor, resolvePool, type Dataset } from '@fugu/datasets';
import { createChatModel, type ChatModel, type Env, type ReplayStore, type ReplayStoreSource } from '@fugu/providers';
import { answerReplayRequest, REPLAY_STEP_METADATA } from '@fugu/conductor';

/**
 * `example`: a question the replay workers can answer (for the curl line printed at start);
 * `itemOf`: the dataset item a question is (fugu-ultra's replay steps name it), found as the
 * replay workers find it (promptIndex: the exact text, else case, whitespace and trailing
 * punctuation forgiven; the first item of a prompt)
 */
export type GatewayWorkers = { pool: WorkerPool; replayStore?: ReplayStoreSource; example?: string; itemOf?: (question: string) => string | undefined };

/** `spec`: `llmrouter`, `llmrouter:<dir>` or a pool file (YAML/JSON). */
export async function loadGatewayWorkers(spec: string, llmrouterDir: string): Promise<GatewayWorkers> {
  if (spec === 'llmrouter' || spec.startsWith('llmrouter:')) {
    const dir = spec === 'llmrouter' ? llmrouterDir : spec.slice('llmrouter:'.length);
    const pool = await resolvePool(`llmrouter:${dir}`);
    const dataset = await loadLlmRouter(dir);
    // the shortest test question that is not a one-liner fragment: easy to paste
    const example = dataset.items
      .filter((i) => i.sourceSplit === 'test' && i.prompt.length >= 40)
      .reduce<string | undefined>((best, i) => (best === undefined || i.prompt.length < best.length ? i.prompt : best), undefined);
    const byPrompt = promptIndex(dataset.items);
    return { pool, replayStore: replayStores(dataset), itemOf: (q) => byPrompt(q)?.id, ...(example !== undefined && { example }) };
  }
  return { pool: await resolvePool(spec) };
}

/**
 * Each replay worker's store over a dataset's recorded outcomes, built on first use. A fugu-ultra
 * step (metadata `replayStep`, the item by its dataset id) is answered by the replay step model,
 * as the provider workers answer the Conductor's steps.
 */
export function replayStores(dataset: Dataset): (worker: string) => ReplayStore | undefined {
  const stores = new Map<string, ReplayStore>();
  const items = new Map(dataset.items.map((i) => [i.id, i]));
  return (worker) => {
    let s = stores.get(worker);
    if (!s) {
      let recorded: ReplayStore;
      try {
        recorded = replayStoreFor(dataset, worker);
      } catch (e) {
        if (e instanceof InputError) return undefined;
        throw e;
      }
      s = {
        lookup: (prompt, itemId, metadata) => {
          if (metadata?.[REPLAY_STEP_METADATA] === undefined || itemId === undefined) return recorded.lookup(prompt, itemId, metadata);
          const item = items.get(itemId);
          const a = item && answerReplayRequest(worker, item, prompt, metadata);
          return a && { itemId, ...a };
        },
      };
      stores.set(worker, s);
    }
    return s;
  };
}

/** A ChatModel per worker of the pool; a missing API key or base URL fails here, naming it. */
export function createWorkerModels(pool: WorkerPool, env: Env, opts: { replayStore?: ReplayStoreSource; timeoutMs?: number } = {}): Map<string, ChatModel> {
  const models = new Map<string, ChatModel>();
  for (const w of pool.workers) {
    if (w.name === 'fugu') throw new ConfigError(`pool "${pool.name}": a worker may not be named "fugu" (that is the router's model name)`);
    models.set(w.name, createChatModel(w, env, { replayStore: opts.replayStore, timeoutMs: opts.timeoutMs }));
  }
  return models;
}

/** The router's workers must all be in the pool the gateway calls. */
export function checkRouterWorkers(checkpointId: string, routerWorkers: readonly string[], pool: WorkerPool): void {
  const names = new Set(pool.workers.map((w: WorkerSpec) => w.name));
  const missing = routerWorkers.filter((w) => !names.has(w));
  if (missing.length > 0) {
    throw new ConfigError(
      `router checkpoint ${checkpointId} chooses among [${routerWorkers.join(', ')}], but the gateway's pool "${pool.name}" has no worker ${missing.map((m) => `"${m}"`).join(', ')} ` +
        `(pool workers: ${[...names].join(', ')}); set FUGU_GATEWAY_POOL to a pool with every worker of the checkpoint`,
      'FUGU_GATEWAY_POOL',
    );
  }
}
