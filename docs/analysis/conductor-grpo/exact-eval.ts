// Exact expected accuracy of policy checkpoints on a split, in the replay model: each item's
// argmax workflow (or K seeded samples), scored by expectedWorkflowCorrect over every draw. A
// simulation from recorded outcomes (libs/conductor/src/replay), for comparing trained policies
// quickly; the main table runs through `fugu ultra eval` on the cluster.
//   FUGU_DATABASE_URL=... node docs/analysis/conductor-grpo/exact-eval.ts <checkpoint|router:<checkpoint>,...> [split] [samples] [workers]
// `workers` (comma separated): a restricted pool, as `fugu ultra eval --workers`: the policy's
// choice masked to them, the router's pick among them, the best single of them.
import { conductorPool, expectedWorkflowCorrect, replayItemOf, visibleSteps } from '../../../libs/conductor/src/index.ts';
import { loadPolicy, routerChoices, trainSplitRanking, workerReplayParams } from '../../../libs/ultra/src/index.ts';
import { backboneFeatures } from '../../../libs/ultra-training/src/index.ts';
import { openLlmrouter } from './llmrouter-db.ts';

const [ids, split = 'test', samplesArg = '0', workersArg] = process.argv.slice(2);
const { config, db, workers, names, stored, items } = await openLlmrouter(split);
const feats = await backboneFeatures(db, config.home);
const x = await feats.features(items.map((i) => i.prompt));
const params = (w: string) => workerReplayParams(undefined, workers.find((k) => k.name === w)!);
const allowed = workersArg ? names.filter((n) => workersArg.split(',').includes(n)) : names;
if (workersArg && allowed.length !== workersArg.split(',').length) throw new Error(`unknown workers in ${workersArg}`);
const pool = conductorPool(workers.filter((w) => allowed.includes(w.name)).map((w) => ({ name: w.name, description: w.description ?? w.name })));
const ranking = trainSplitRanking(names, stored, 0).filter((n) => allowed.includes(n));
const samples = Number(samplesArg);
const best = items.reduce((a, it) => a + (it.recorded![ranking[0]!]!.score), 0) / items.length;
console.log(`${split}: ${items.length} items${workersArg ? `, pool ${allowed.length} of ${names.length}` : ''}; best single by train mean (${ranking[0]}) ${best.toFixed(4)}`);
for (const id of ids!.split(',')) {
  if (id.startsWith('router:')) {
    const picks = await routerChoices(db, config.home, id.slice('router:'.length), items.map((i) => i.prompt), names, workersArg ? allowed : undefined);
    const acc = items.reduce((a, it, i) => a + it.recorded![names[picks[i]!]!]!.score, 0) / items.length;
    console.log(`${id}: expected accuracy ${acc.toFixed(4)} (reward ${(0.5 + 0.5 * acc).toFixed(4)}), 1.00 steps`);
    continue;
  }
  const { policy } = await loadPolicy(db, id, { workers: names });
  let acc = 0, steps = 0;
  const shapes = new Map<string, number>();
  const draws = samples > 0 ? samples : 1;
  items.forEach((it, i) => {
    for (let s = 0; s < draws; s++) {
      const out = policy.write({ features: x[i]!, question: it.prompt, pool, ...(samples > 0 ? { seed: `eval/${s}/${it.id}` } : { argmax: true }) });
      const wf = out.workflow.steps.map((st, j) => ({ worker: pool.workers[st.worker]!.name, sees: visibleSteps(out.workflow, j) }));
      acc += expectedWorkflowCorrect({ params, item: replayItemOf(it), steps: wf });
      steps += wf.length;
      const key = wf.map((st) => `${st.worker.replace(/-instruct|-it|-v\d.*$/g, '')}${st.sees.length ? `<-[${st.sees.join(',')}]` : ''}`).join(' ; ');
      shapes.set(key, (shapes.get(key) ?? 0) + 1);
    }
  });
  const n = items.length * draws;
  console.log(`${id}: expected accuracy ${(acc / n).toFixed(4)} (reward ${(0.5 + 0.5 * acc / n).toFixed(4)}), ${(steps / n).toFixed(2)} steps; top workflows: ${[...shapes.entries()].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([k, v]) => `${v}x ${k}`).join(' | ')}`);
}
await feats.release();
await db.destroy();
