// `fugu ultra publish`: names the Conductor a deployment (default `fugu-ultra`) serves on a pool,
// with its options. Everything is checked before anything is stored: the spec against the pool
// (a fixed topology's workers, an llm: worker or endpoint, a policy checkpoint that chooses among
// exactly this pool's workers, a router checkpoint must exist), the options field by field, the
// ranking's names.
import { InputError, type WorkerPool } from '@fugu/core';
import { getUltraDeployment, publishUltraDeployment, type Db, type UltraDeployment } from '@fugu/db';
import { checkSpecCheckpoints, checkSpecs } from '../flags.ts';
import { validateInteractiveOptions } from './options.ts';

export type PublishUltraOptions = {
  /** the model name clients ask for (default fugu-ultra) */
  name?: string;
  conductor: string;
  pool: WorkerPool;
  /** InteractiveOptions as given (defaults filled in at use) */
  options: Record<string, unknown>;
  /** names of the configured llm: endpoints */
  endpoints?: readonly string[];
};

/** Stores the deployment; returns it and the one it replaced. */
export async function publishUltra(db: Db, o: PublishUltraOptions): Promise<{ deployment: UltraDeployment; previous?: UltraDeployment }> {
  const name = o.name ?? 'fugu-ultra';
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(name)) throw new InputError(`a deployment name is 1 to 64 letters, digits, _ . -, got ${JSON.stringify(name)}`, { field: '--name' });
  const workers = o.pool.workers.map((w) => w.name);
  if (workers.includes(name)) throw new InputError(`the pool "${o.pool.name}" has a worker named "${name}": the deployment would hide it`, { field: '--name' });
  const options = validateInteractiveOptions(o.options, 'options');
  const specs = checkSpecs(o.conductor, workers, options.workflow.maxSteps, o.endpoints ?? []);
  if (specs.length !== 1) throw new InputError(`a deployment serves one Conductor, got ${specs.length} specs`, { field: '--conductor' });
  const spec = specs[0]!;
  // a policy checkpoint must choose among exactly this pool's workers; a router checkpoint must exist
  await checkSpecCheckpoints(db, specs, workers);
  const unknown = (options.workflow.ranking ?? []).filter((w) => !workers.includes(w));
  if (unknown.length > 0) throw new InputError(`the ranking names ${unknown.join(', ')}, not in the pool "${o.pool.name}"`, { field: '--ranking' });
  const previous = await getUltraDeployment(db, name);
  const deployment = await publishUltraDeployment(db, { name, conductor: spec.spec, pool: o.pool.name, options: o.options });
  return { deployment, ...(previous && { previous }) };
}
