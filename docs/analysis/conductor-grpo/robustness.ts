// Robustness to the simulator: policies trained under the default replay parameters, scored in
// exact expectation on a split under perturbed ones (misled +0.1, fix -0.05, keep -0.05, herd
// halved, one at a time, in both size-class presets), beside a router checkpoint (one step: the
// step model does not touch it) and the best single worker. A simulation from recorded outcomes.
//   FUGU_DATABASE_URL=... node docs/analysis/conductor-grpo/robustness.ts <policy,...> <router checkpoint> [split]
import { conductorPool, expectedWorkflowCorrect, REPLAY_PRESETS, replayItemOf, visibleSteps, type ReplayConfig, type ReplayParams } from '../../../libs/conductor/src/index.ts';
import { loadPolicy, routerChoices, workerReplayParams } from '../../../libs/ultra/src/index.ts';
import { backboneFeatures } from '../../../libs/ultra-training/src/index.ts';
import { openLlmrouter } from './llmrouter-db.ts';

const [ids, router, split = 'test'] = process.argv.slice(2);
const { config, db, workers, names, items } = await openLlmrouter(split);
const feats = await backboneFeatures(db, config.home);
const x = await feats.features(items.map((i) => i.prompt));
const pool = conductorPool(workers.map((w) => ({ name: w.name, description: w.description ?? w.name })));
const both = (f: (p: ReplayParams) => Partial<ReplayParams>): ReplayConfig => ({ presets: { large: f(REPLAY_PRESETS.large), small: f(REPLAY_PRESETS.small) } });
const perturbations: Array<[string, ReplayConfig]> = [
  ['default', {}],
  ['misled +0.1', both((p) => ({ misled: Math.min(1, p.misled + 0.1) }))],
  ['fix -0.05', both((p) => ({ fix: Math.max(0, p.fix - 0.05) }))],
  ['keep -0.05', both((p) => ({ keep: p.keep - 0.05 }))],
  ['herd halved', both((p) => ({ herd: p.herd / 2 }))],
];
const picks = await routerChoices(db, config.home, router!, items.map((i) => i.prompt), names);
const routerAcc = items.reduce((a, it, i) => a + it.recorded![names[picks[i]!]!]!.score, 0) / items.length;
const policies = await Promise.all(ids!.split(',').map(async (id) => ({ id, policy: (await loadPolicy(db, id, { workers: names })).policy })));
const workflows = policies.map(({ policy }) => items.map((it, i) => {
  const out = policy.write({ features: x[i]!, question: it.prompt, pool, argmax: true });
  return out.workflow.steps.map((st, j) => ({ worker: names[st.worker]!, sees: visibleSteps(out.workflow, j) }));
}));
console.log(`${split}: ${items.length} items; router ${router} ${routerAcc.toFixed(4)} under every perturbation (one step); expected accuracy (argmax workflows), a simulation\n`);
console.log(`| replay parameters | ${policies.map((p) => p.id).join(' | ')} | router |`);
console.log(`|---|${policies.map(() => '---|').join('')}---|`);
for (const [name, cfg] of perturbations) {
  const params = (w: string) => workerReplayParams(cfg, workers.find((k) => k.name === w)!);
  const accs = workflows.map((wfs) => items.reduce((a, it, i) => a + expectedWorkflowCorrect({ params, item: replayItemOf(it), steps: wfs[i]! }), 0) / items.length);
  console.log(`| ${name} | ${accs.map((a) => `${a.toFixed(4)} (${a > routerAcc ? '+' : ''}${((a - routerAcc) * 100).toFixed(1)})`).join(' | ')} | ${routerAcc.toFixed(4)} |`);
}
await feats.release();
await db.destroy();
