// Which split scheme (`--split-by prompt | dataset`, @fugu/datasets assignSplit) a stored
// checkpoint was made with, so that a later command defaults to it and refuses another
// (resolveSplitScheme): a router checkpoint records it in `training.splitBy`; a policy at the
// initialisation (or a GRPO run's start) in `training.rankedBy.splitBy`; a GRPO run's policies in
// their run's config (`splitBy`). Records made before the scheme existed were by prompt.
import type { ConductorSpec } from '@fugu/conductor';
import { splitScheme, type SplitScheme } from '@fugu/datasets';
import { getCheckpoint, getConductorCheckpoint, getGrpoRun, type Db } from '@fugu/db';

const schemeOf = (v: unknown, what: string): SplitScheme | undefined => (v === undefined || v === null ? undefined : splitScheme(v, what));

/** A router checkpoint's scheme, from its training record (by prompt when it has none). */
export function routerCheckpointScheme(training: Record<string, unknown>, id = 'router checkpoint'): SplitScheme {
  return schemeOf(training.splitBy, `checkpoint ${id}`) ?? 'prompt';
}

/** A stored router checkpoint's scheme; undefined when there is no such checkpoint. */
export async function routerSplitScheme(db: Db, id: string): Promise<SplitScheme | undefined> {
  const c = await getCheckpoint(db, id);
  return c && routerCheckpointScheme(c.training, id);
}

/** A stored policy checkpoint's scheme; undefined when there is no such checkpoint. */
export async function policySplitScheme(db: Db, id: string): Promise<SplitScheme | undefined> {
  const c = await getConductorCheckpoint(db, id);
  if (!c) return undefined;
  const t = c.training;
  const own = schemeOf(t.splitBy, `checkpoint ${id}`) ?? schemeOf((t.rankedBy as Record<string, unknown> | undefined)?.splitBy, `checkpoint ${id}`);
  if (own) return own;
  if (typeof t.run === 'string') {
    const run = await getGrpoRun(db, t.run);
    const by = run && schemeOf(run.config.splitBy, `GRPO run ${t.run}`);
    if (by) return by;
  }
  return 'prompt';
}

/** What the conductor specs' checkpoints were made with (policies and routers; the other specs carry no split). */
export async function specsSplitMade(db: Db, specs: readonly ConductorSpec[]): Promise<Array<{ what: string; by: SplitScheme }>> {
  const out: Array<{ what: string; by: SplitScheme }> = [];
  for (const s of specs) {
    if (s.kind === 'policy') {
      const by = await policySplitScheme(db, s.checkpoint);
      if (by) out.push({ what: `policy checkpoint ${s.checkpoint}`, by });
    } else if (s.kind === 'fixed' && s.topology === 'router') {
      const by = await routerSplitScheme(db, s.checkpoint);
      if (by) out.push({ what: `router checkpoint ${s.checkpoint}`, by });
    }
  }
  return out;
}
