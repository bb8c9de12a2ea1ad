// policy:<checkpoint>: the embedded Conductor. The checkpoint is loaded once per process (and
// refused when its pool is not the workflow's), the question's backbone features come from the
// Postgres feature cache (computed and stored when missing), and the policy samples its decisions
// with the workflow's seed.
import { InputError } from '@fugu/core';
import { policyConductor, type Conductor, type ConductorPolicy } from '@fugu/conductor';
import type { Db } from '@fugu/db';
import { loadRouterModel, type RouterModel } from '@fugu/router-model';
import { cachedFeatures } from '@fugu/training';
import { loadPolicy } from '../policy-store.ts';
import type { PolicyConductorFactory } from './execute.ts';

/** Policies kept loaded per process (the most recently loaded). */
const MAX_CACHED_POLICIES = 8;

export function policyWriter(db: Db, home: string): PolicyConductorFactory & { release(): Promise<void> } {
  let model: Promise<RouterModel> | undefined;
  const encoder = (): Promise<RouterModel> => {
    // the encoder is what is needed; the router model's loader gives it with its backbone id
    model ??= loadRouterModel(home, 1);
    model.catch(() => (model = undefined));
    return model;
  };
  const policies = new Map<string, Promise<{ policy: ConductorPolicy; backboneId: string }>>();
  const factory: PolicyConductorFactory = async (spec, ctx) => {
    const names = ctx.workers.map((w) => w.name);
    // a pool whose worker names or order differ from the checkpoint's is refused here
    const key = JSON.stringify([spec.checkpoint, names]);
    let p = policies.get(key);
    if (!p) {
      p = loadPolicy(db, spec.checkpoint, { workers: names }).then(({ policy, checkpoint }) => ({ policy, backboneId: checkpoint.backboneId }));
      p.catch(() => policies.delete(key));
      policies.set(key, p);
      // a GRPO run names a new checkpoint every iteration: keep the most recent few, not all
      while (policies.size > MAX_CACHED_POLICIES) policies.delete(policies.keys().next().value!);
    }
    const { policy, backboneId } = await p;
    const inner = policyConductor(policy, spec);
    const conductor: Conductor = {
      spec: spec.spec,
      async write(input) {
        const m = await encoder();
        if (m.backboneId !== backboneId) throw new InputError(`${spec.spec}: the checkpoint reads features of backbone ${backboneId}, this process has ${m.backboneId}`, { field: 'conductor' });
        const { features } = await cachedFeatures(db, m.encoder, [input.question]);
        return inner.write({ ...input, features: features[0]! });
      },
    };
    return conductor;
  };
  return Object.assign(factory, {
    release: async () => {
      if (model) await model.then((m) => m.release()).catch(() => {});
      model = undefined;
      policies.clear();
    },
  });
}
