// The shipped scripted pool (data/pools/scripted.yaml) as tests use it: its workers that never
// fail (sim-flaky left out), answering at once (latency_ms 0), so a test waits on nothing but fugu.
import type { WorkerSpec } from '@fugu/core';
import { resolvePool } from '@fugu/datasets';

export async function instantScriptedWorkers(): Promise<WorkerSpec[]> {
  const shipped = await resolvePool('scripted');
  return shipped.workers.filter((w) => w.name !== 'sim-flaky').map((w) => ({ ...w, script: { ...w.script, latencyMs: 0 } }));
}
