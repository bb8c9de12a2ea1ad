// The Batch API's stack for tests: a database and queue prefix (createEvalEnv), the router
// deployed over the LLMRouter replay pool (one anchor per worker), API keys, and processes as a
// deployment runs them: gateways (`node apps/gateway/src/main.ts`) and provider workers.
import { fork } from 'node:child_process';
import path from 'node:path';
import OpenAI, { toFile } from 'openai';
import { serviceEnv } from '@fugu/config';
import { createApiKey, publishDeployment } from '@fugu/db';
import { defaultLlmRouterDir, loadLlmRouter } from '@fugu/datasets';
import { resolveWorkerPool } from '@fugu/evaluation';
import { saveAnchorCheckpoint } from '@fugu/serving/testing';
import { createEvalEnv, startWorkerProcess, waitFor, type EvalEnv } from './eval-env.ts';
import { watchApp, type AppProcess } from './app-process.ts';

const gatewayMain = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../apps/gateway/src/main.ts');

export type BatchStack = {
  env: EvalEnv;
  workers: string[];
  prompts: string[];
  full: { key: string; id: string };
  narrow: { key: string; id: string };
  startGateway(extra?: Record<string, string>): Promise<{ url: string; app: AppProcess }>;
  /** stops every gateway and worker started so far (a test that needs its own gateway to take a batch starts from none) */
  stopProcesses(): Promise<void>;
  /** a provider worker process (`node`: flags for its Node, its stdout piped) */
  startWorker(extra?: Record<string, string>, node?: { execArgv?: string[]; stdout?: 'pipe' | 'ignore' }): Promise<AppProcess>;
  close(): Promise<void>;
};

export async function startBatchStack(): Promise<BatchStack> {
  const env = await createEvalEnv();
  const pool = await resolveWorkerPool('llmrouter', defaultLlmRouterDir());
  const workers = pool.workers.map((w) => w.name);
  const ds = await loadLlmRouter(defaultLlmRouterDir());
  const prompts = ds.items.filter((i) => i.sourceSplit === 'test').map((i) => i.prompt);
  // a router: one anchor per worker (one of the test questions), deterministic
  const anchors = Object.fromEntries(workers.map((w, i) => [w, prompts[i * 7]!]));
  const ckpt = await saveAnchorCheckpoint(env.database.db, { home: env.config.home, anchors, id: 'batch-anchors' });
  await publishDeployment(env.database.db, env.config.router.deployment, ckpt.id);
  const f = await createApiKey(env.database.db, { name: 'batch-full' });
  const n = await createApiKey(env.database.db, { name: 'batch-narrow', allowedWorkers: workers.slice(0, 3) });
  const procs: AppProcess[] = [];
  return {
    env,
    workers,
    prompts,
    full: { key: f.key, id: f.record.id },
    narrow: { key: n.key, id: n.record.id },
    // the gateway reads fugu-ultra's deployment on every request: a test publishes and asks at once, and a
    // publish's message can reach a loaded gateway after the next request
    async startGateway(extra = {}) {
      const child = fork(gatewayMain, [], {
        env: { PATH: process.env.PATH, ...serviceEnv(env.config), FUGU_LOG_LEVEL: 'warn', FUGU_GATEWAY_PORT: '0', FUGU_GATEWAY_AUTH: 'keys', FUGU_GATEWAY_POOL: 'llmrouter', FUGU_GATEWAY_ULTRA_CACHE_MS: '0', ...extra },
        stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      });
      const app = await watchApp(child, 'gateway');
      procs.push(app);
      return { url: `http://127.0.0.1:${app.ready.port}/v1`, app };
    },
    async startWorker(extra = {}, node = {}) {
      const w = await startWorkerProcess(env.config, { FUGU_WORKER_CONCURRENCY: '16', ...extra }, node);
      procs.push(w);
      return w;
    },
    async stopProcesses() {
      for (const p of procs.splice(0)) await p.kill9().catch(() => {});
    },
    async close() {
      for (const p of procs) await p.kill9().catch(() => {});
      await env.cleanup();
    },
  };
}

export const batchLine = (customId: string, body: Record<string, unknown>) => ({ custom_id: customId, method: 'POST', url: '/v1/chat/completions', body });
export const jsonl = (lines: unknown[]): string => lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n';
export const uploadBatchFile = async (client: OpenAI, text: string) => client.files.create({ file: await toFile(Buffer.from(text), 'batch.jsonl'), purpose: 'batch' });

/** Waits until the batch has ended (completed, failed, cancelled, expired). */
export const batchEnded = (client: OpenAI, id: string, timeoutMs = 600_000) =>
  waitFor(`batch ${id} to end`, async () => {
    const b = await client.batches.retrieve(id);
    return ['completed', 'failed', 'cancelled', 'expired'].includes(b.status) && b;
  }, timeoutMs, 250);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function fileLines(client: OpenAI, fileId: string | null | undefined): Promise<any[]> {
  if (!fileId) return [];
  const text = await (await client.files.content(fileId)).text();
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
}
