// fixed:router: the fugu router's pick for a question, from a stored router checkpoint: the
// backbone's features of the question (the feature cache applies), the head's logits, argmax,
// as `fugu router eval` decides. The model is loaded once per process and checkpoint.
import { InputError } from '@fugu/core';
import { getCheckpoint, type CheckpointRecord, type Db } from '@fugu/db';
import { loadRouterModel, type RouterModel } from '@fugu/router-model';
import { cachedFeatures } from '@fugu/training';
import type { RouterPick } from './execute.ts';

export function routerPicker(db: Db, home: string): RouterPick & { release(): Promise<void> } {
  const loaded = new Map<string, Promise<{ ckpt: CheckpointRecord; model: RouterModel }>>();
  const load = (id: string) => {
    let p = loaded.get(id);
    if (!p) {
      p = (async () => {
        const ckpt = await getCheckpoint(db, id);
        if (!ckpt) throw new InputError(`no router checkpoint "${id}"`, { field: 'conductor' });
        const model = await loadRouterModel(home, ckpt.workers.length);
        if (model.backboneId !== ckpt.backboneId) throw new InputError(`checkpoint ${id} was trained on backbone ${ckpt.backboneId}, not ${model.backboneId}`, { field: 'conductor' });
        return { ckpt, model };
      })();
      p.catch(() => loaded.delete(id));
      loaded.set(id, p);
    }
    return p;
  };
  const pick: RouterPick = async ({ checkpoint, question, workers, allowed }) => {
    const { ckpt, model } = await load(checkpoint);
    const names = routerWorkers(ckpt, checkpoint, workers, 'conductor');
    const { features } = await cachedFeatures(db, model.encoder, [question]);
    const out = await model.head.logits(features[0]!, ckpt.theta);
    return names[argmaxAllowed(out.data, names, allowed)]!;
  };
  return Object.assign(pick, {
    release: async () => {
      for (const p of loaded.values()) await p.then((x) => x.model.release()).catch(() => {});
      loaded.clear();
    },
  });
}

/** The checkpoint's worker names, which must be the pool's in order (an InputError naming `field`). */
function routerWorkers(ckpt: CheckpointRecord, id: string, workers: readonly string[], field: string): string[] {
  const names = ckpt.workers.map((w) => w.name);
  if (names.length !== workers.length || names.some((n, i) => n !== workers[i])) {
    throw new InputError(`router checkpoint ${id} routes over [${names.join(', ')}], not the pool's [${workers.join(', ')}]`, { field });
  }
  return names;
}

/**
 * The index of the largest logit among the `allowed` names (all when undefined): the router
 * restricted to a pool's subset picks the best of its workers (an InputError when none is the router's).
 */
export function argmaxAllowed(logits: ArrayLike<number>, names: readonly string[], allowed?: readonly string[]): number {
  const ok = allowed === undefined ? undefined : new Set(allowed);
  let best = -1;
  for (let j = 0; j < names.length; j++) if ((!ok || ok.has(names[j]!)) && (best < 0 || logits[j]! > logits[best]!)) best = j;
  if (best < 0) throw new InputError(`none of the allowed workers (${allowed!.join(', ')}) is one the router picks among`, { field: 'workers' });
  return best;
}

/** The router checkpoint's pick (a worker index in `workers`) for each question, in one batch: what fixed:router runs for them (`allowed`: among those names only). */
export async function routerChoices(db: Db, home: string, checkpoint: string, questions: readonly string[], workers: readonly string[], allowed?: readonly string[]): Promise<number[]> {
  const ckpt = await getCheckpoint(db, checkpoint);
  if (!ckpt) throw new InputError(`no router checkpoint "${checkpoint}"`, { field: 'checkpoint' });
  const names = routerWorkers(ckpt, checkpoint, workers, 'checkpoint');
  const model = await loadRouterModel(home, ckpt.workers.length);
  try {
    if (model.backboneId !== ckpt.backboneId) throw new InputError(`checkpoint ${checkpoint} was trained on backbone ${ckpt.backboneId}, not ${model.backboneId}`, { field: 'checkpoint' });
    const { features } = await cachedFeatures(db, model.encoder, questions);
    const out: number[] = [];
    for (const f of features) {
      const l = await model.head.logits(f, ckpt.theta);
      out.push(argmaxAllowed(l.data, names, allowed));
    }
    return out;
  } finally {
    await model.release();
  }
}
