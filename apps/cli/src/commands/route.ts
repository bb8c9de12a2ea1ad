// `fugu router route`: one routing decision with a checkpoint, with the inference options a user
// needs: restrict to an allowed worker pool, cost-aware selection (maximise pi_j minus lambda times
// the normalised price), and sampling from pi_theta (seeded) or the argmax. The decisions come from
// @fugu/serving's Router, the same code the gateway and the router workers run.
import type { Db } from '@fugu/db';
import { loadCheckpoint, loadRouterModel, Router, type RouterDecision } from '@fugu/serving';

export type RouteOptions = { checkpoint: string; texts: string[]; allowed?: string[]; lambda: number; sample: boolean; seed: number; home: string };

export async function routeTexts(db: Db, opts: RouteOptions): Promise<{ workers: string[]; decisions: Array<RouterDecision & { text: string }> }> {
  const ckpt = await loadCheckpoint(db, opts.checkpoint);
  const model = await loadRouterModel(opts.home, ckpt.workers.length);
  try {
    const router = new Router(model, ckpt);
    const decisions = await router.decide(opts.texts, {
      ...(opts.allowed && { allowed: opts.allowed }),
      lambda: opts.lambda,
      sample: opts.sample,
      seed: opts.seed,
    });
    return { workers: router.workers, decisions: decisions.map((d, i) => ({ text: opts.texts[i]!, ...d })) };
  } finally {
    await model.release();
  }
}
