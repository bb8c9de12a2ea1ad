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
  const pick = async ({ checkpoint, question, workers }: { checkpoint: string; question: string; workers: readonly string[] }): Promise<string> => {
    const { ckpt, model } = await load(checkpoint);
    const names = ckpt.workers.map((w) => w.name);
    if (names.length !== workers.length || names.some((n, i) => n !== workers[i])) {
      throw new InputError(`router checkpoint ${checkpoint} routes over [${names.join(', ')}], not the pool's [${workers.join(', ')}]`, { field: 'conductor' });
    }
    const { features } = await cachedFeatures(db, model.encoder, [question]);
    const out = await model.head.logits(features[0]!, ckpt.theta);
    let best = 0;
    for (let j = 1; j < names.length; j++) if (out.data[j]! > out.data[best]!) best = j;
    return names[best]!;
  };
  return Object.assign(pick, {
    release: async () => {
      for (const p of loaded.values()) await p.then((x) => x.model.release()).catch(() => {});
      loaded.clear();
    },
  });
}

/** The router checkpoint's pick (a worker index in `workers`) for each question, in one batch: what fixed:router runs for them. */
export async function routerChoices(db: Db, home: string, checkpoint: string, questions: readonly string[], workers: readonly string[]): Promise<number[]> {
  const ckpt = await getCheckpoint(db, checkpoint);
  if (!ckpt) throw new InputError(`no router checkpoint "${checkpoint}"`, { field: 'checkpoint' });
  const names = ckpt.workers.map((w) => w.name);
  if (names.length !== workers.length || names.some((n, i) => n !== workers[i])) {
    throw new InputError(`router checkpoint ${checkpoint} routes over [${names.join(', ')}], not the pool's [${workers.join(', ')}]`, { field: 'checkpoint' });
  }
  const model = await loadRouterModel(home, ckpt.workers.length);
  try {
    if (model.backboneId !== ckpt.backboneId) throw new InputError(`checkpoint ${checkpoint} was trained on backbone ${ckpt.backboneId}, not ${model.backboneId}`, { field: 'checkpoint' });
    const { features } = await cachedFeatures(db, model.encoder, questions);
    const out: number[] = [];
    for (const f of features) {
      const l = await model.head.logits(f, ckpt.theta);
      let best = 0;
      for (let j = 1; j < names.length; j++) if (l.data[j]! > l.data[best]!) best = j;
      out.push(best);
    }
    return out;
  } finally {
    await model.release();
  }
}
