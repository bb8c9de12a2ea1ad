// `fugu router route`: one routing decision with a checkpoint, with the inference options a user
// needs: restrict to an allowed worker pool, cost-aware selection (maximise pi_j minus lambda times
// the normalised price), and sampling from pi_theta (seeded) or the argmax.
import { InputError } from '@fugu/core';
import { getCheckpoint, type Db } from '@fugu/db';
import { RouterPolicy, type Decision } from '@fugu/router-model';
import { loadRouterModel } from './model.ts';

export type RouteOptions = { checkpoint: string; texts: string[]; allowed?: string[]; lambda: number; sample: boolean; seed: number; home: string };

export async function routeTexts(db: Db, opts: RouteOptions): Promise<{ workers: string[]; decisions: Array<Decision & { text: string }> }> {
  const ckpt = await getCheckpoint(db, opts.checkpoint);
  if (!ckpt) throw new InputError(`no router checkpoint "${opts.checkpoint}"`, { field: 'checkpoint' });
  const names = ckpt.workers.map((w) => w.name);
  const policy = new RouterPolicy({
    workers: names,
    ...(opts.allowed && { allowed: opts.allowed }),
    mode: opts.sample ? 'sample' : 'argmax',
    lambda: opts.lambda,
    prices: Object.fromEntries(ckpt.workers.map((w) => [w.name, { inputPerMTok: w.inputPerMTok, outputPerMTok: w.outputPerMTok }])),
    seed: opts.seed,
  });
  const model = await loadRouterModel(opts.home, names.length);
  try {
    if (ckpt.backboneId !== model.backboneId) {
      throw new InputError(`checkpoint ${ckpt.id} was trained on backbone ${ckpt.backboneId}, not ${model.backboneId}`, { field: 'checkpoint' });
    }
    const feats = await model.encoder.encode(opts.texts);
    const x = new Float32Array(feats.length * 512);
    feats.forEach((f, i) => x.set(f, i * 512));
    const logits = (await model.head.logits(x, ckpt.theta)).data;
    return { workers: names, decisions: opts.texts.map((text, i) => ({ text, ...policy.decide(logits.subarray(i * names.length, (i + 1) * names.length)) })) };
  } finally {
    await model.release();
  }
}
