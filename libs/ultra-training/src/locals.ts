// Local processes for a driver (`fugu ultra eval`, `fugu ultra calibrate`):
// provider workers and conductor processes started from this process when the queues have none.
// A leaf: it imports nothing from libs/ultra or libs/ultra-training.
import { InputError, type ProviderKind } from '@fugu/core';
import type { Context, LocalWorkers } from '@fugu/evaluation';
import { conductQueue, providerCallQueues } from '@fugu/queue';

/** The local-process options a driver takes (the CLI's `--local-workers`, `--local-conductors`). */
export type LocalProcessOptions = {
  localConductors: number | 'auto';
  localWorkers: number | 'auto';
  startLocalWorkers?: (opts: { count: number; providers: string[]; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
  startLocalConductors?: (opts: { count: number; onEvent: (msg: string) => void }) => Promise<LocalWorkers>;
};

/**
 * Starts the local provider workers and conductor processes asked for ('auto': 2 of a kind when
 * none is connected to its queue), workers first; returns them, to stop in reverse order.
 */
export async function startLocals(
  ctx: Context,
  o: LocalProcessOptions & { providers: ProviderKind[]; log: (l: string) => void },
): Promise<LocalWorkers[]> {
  const locals: LocalWorkers[] = [];
  try {
    // provider workers first: conductors wait on their answers, and the stop is in reverse order,
    // so conductors drain their workflows while the workers still answer
    let nw = o.localWorkers;
    if (nw === 'auto') {
      const connected = await Promise.all(o.providers.flatMap((p) => providerCallQueues(p, ctx.config.providerQueueShards)).map((q) => ctx.queue(q).getWorkersCount()));
      nw = connected.every((n) => n > 0) ? 0 : 2;
    }
    if (nw > 0) {
      if (!o.startLocalWorkers) throw new InputError('no way to start local provider workers here: start some, or give 0', { field: '--local-workers' });
      const l = await o.startLocalWorkers({ count: nw, providers: o.providers, onEvent: o.log });
      locals.push(l);
      o.log(`started ${nw} local provider worker(s); logs in ${l.logDir}`);
    }
    let nc = o.localConductors;
    if (nc === 'auto') nc = (await ctx.queue(conductQueue).getWorkersCount()) > 0 ? 0 : 2;
    if (nc > 0) {
      if (!o.startLocalConductors) throw new InputError('no way to start local conductor processes here: start some, or give 0', { field: '--local-conductors' });
      const l = await o.startLocalConductors({ count: nc, onEvent: o.log });
      locals.push(l);
      o.log(`started ${nc} local conductor process(es); logs in ${l.logDir}`);
    }
    return locals;
  } catch (e) {
    for (const l of locals.reverse()) await l.stop();
    throw e;
  }
}
