// A gateway with model fugu-ultra for tests: buildGateway with the ultraModel extra model over a
// stored pool, no router (model `fugu` answers 503), listening on a free port.
import type { FastifyInstance } from 'fastify';
import type { WorkerPool, WorkerSpec } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import type { Db, StoredWorker } from '@fugu/db';
import type { CallPipeline } from '@fugu/calls';
import { RouterUnavailableError, type RouteClient } from '@fugu/serving';
import type { Logger } from '@fugu/telemetry';
import type { WorkflowHolds } from '@fugu/ultra';
import { buildGateway } from '../../apps/gateway/src/server.ts';
import { RecordWriter } from '../../apps/gateway/src/record-writer.ts';
import { ultraModel, type UltraServingOptions } from '../../apps/gateway/src/ultra.ts';

/** A worker served by a stub OpenAI-compatible server at the given prices per million tokens (input, output). */
export const stubWorker = (name: string, stub: { baseURL: string }, price: [string, string] = ['1', '2']): WorkerSpec => ({
  name, provider: 'openai-compatible', model: `${name}-model`, baseUrl: stub.baseURL, settings: {}, prices: { inputPerMTok: price[0], outputPerMTok: price[1] },
});

/** Model "fugu" answers 503 router_unavailable, as a gateway without a live router does. */
export const noRouter: RouteClient = { route: async () => Promise.reject(new RouterUnavailableError('no router in this test')), ready: async () => false, close: async () => {} };

export async function startUltraGateway(o: {
  config: FuguConfig; db: Db; pool: WorkerPool; stored: { poolId: number; workers: StoredWorker[] }; secret: Buffer; log: Logger;
  /** the llm: Conductor's call pipeline (fixed and policy Conductors never call it) */
  pipeline?: CallPipeline;
  /** the deployment's reuse: its time, its subscription to publishes, its reader (default: the config's, getUltraDeployment) */
  ultra?: Pick<UltraServingOptions, 'cacheMs' | 'invalidations' | 'read'>;
  /** fugu-ultra's holds (default: the gateway's own, in its memory) */
  holds?: WorkflowHolds;
}): Promise<{ app: FastifyInstance; url: string; records: RecordWriter }> {
  // the rows written behind the answers: `records.flush()` waits for those of the answers received so far
  const records = new RecordWriter(o.db, o.log);
  const app = await buildGateway({
    config: o.config, pool: o.pool, routeClient: noRouter, db: o.db, writer: records, env: {}, log: o.log,
    extraModels: [
      (ctx) => ultraModel(ctx, {
        db: o.db, poolId: o.stored.poolId, workers: o.stored.workers,
        deps: { writer: { db: o.db, config: o.config, pipeline: o.pipeline ?? (undefined as never), log: o.log }, secret: o.secret, log: o.log, ...(o.holds && { holds: o.holds }) },
        // a test publishes and asks at once, and on a loaded machine the publish's message can reach the
        // gateway after the next request: test gateways read the deployment on every request, unless a
        // test of the reuse says otherwise (ultra-deployment-cache.test.ts)
        cacheMs: 0,
        ...o.ultra,
      }),
    ],
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url: `http://127.0.0.1:${(app.server.address() as { port: number }).port}/v1`, records };
}
