// Flag checks a driver shares (`fugu ultra eval`, `fugu ultra run`): conductor specs parsed and
// checked against the pool, the checkpoints they name, and errors that name the flag. A leaf: it
// imports nothing from libs/ultra.
import { InputError } from '@fugu/core';
import { checkConductorSpec, parseConductorSpecs, type ConductorSpec } from '@fugu/conductor';
import { conductorCheckpointWorkers, getCheckpoint, type Db } from '@fugu/db';

/** Runs `fn`; an InputError it throws is thrown again naming `flag` as its field. */
export function asFlag<T>(flag: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof InputError) throw new InputError(e.message.replace(/^field [^:]+: /, ''), { field: flag }, { cause: e });
    throw e;
  }
}

/** The conductor specs of `--conductor`, parsed and checked against the pool (InputError naming --conductor). */
export function checkSpecs(text: string | undefined, workers: readonly string[], maxSteps: number, endpoints: readonly string[] = []): ConductorSpec[] {
  if (text === undefined) throw new InputError('give one or more conductor specs', { field: '--conductor' });
  const specs = asFlag('--conductor', () => parseConductorSpecs(text));
  for (const s of specs) asFlag('--conductor', () => checkConductorSpec(s, { workers, maxSteps, endpoints }));
  return specs;
}

/** Checkpoints the specs name must exist (and a policy's must choose from this pool). */
export async function checkSpecCheckpoints(db: Db, specs: readonly ConductorSpec[], workers: readonly string[]): Promise<void> {
  for (const s of specs) {
    if (s.kind === 'policy') {
      const w = await conductorCheckpointWorkers(db, s.checkpoint);
      if (!w) throw new InputError(`conductor spec "${s.spec}": no Conductor policy checkpoint "${s.checkpoint}"`, { field: '--conductor' });
      if (w.length !== workers.length || w.some((n, i) => n !== workers[i])) {
        throw new InputError(`conductor spec "${s.spec}": checkpoint ${s.checkpoint} chooses from [${w.join(', ')}] but the pool has [${workers.join(', ')}]`, { field: '--conductor' });
      }
    } else if (s.kind === 'fixed' && s.topology === 'router') {
      if (!(await getCheckpoint(db, s.checkpoint))) throw new InputError(`conductor spec "${s.spec}": no router checkpoint "${s.checkpoint}"`, { field: '--conductor' });
    }
  }
}
