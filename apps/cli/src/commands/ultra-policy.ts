// `fugu ultra policy ...`: the embedded Conductor's checkpoints (init, list, show, export,
// import). The logic is in @fugu/ultra (policy-store.ts) and @fugu/conductor (src/policy/).
import type { Command } from 'commander';
import { InputError } from '@fugu/core';
import type { SplitScheme } from '@fugu/datasets';
import { policyThetaSize, resolveMaxSteps } from '@fugu/conductor';
import { listConductorCheckpoints } from '@fugu/db';
import { resolveDataset, resolveWorkerPool } from '@fugu/evaluation';
import { loadUseLite, useLiteHeadDims } from '@fugu/router-model';
import { exportPolicyCheckpoint, getPolicyCheckpoint, importPolicyCheckpoint, initPolicyCheckpoint, trainingRanking } from '@fugu/ultra';
import { action, intOption, jsonOption, printJson, type Cli } from '../cli.ts';
import { checkpointFileCommands, withDb } from '../checkpoints.ts';
import { splitByOption } from '../split-by.ts';

type InitFlags = { pool?: string; dataset?: string; seed: number; maxSteps: number; id?: string; splitSeed: number; splitBy?: SplitScheme };

export function registerUltraPolicy(ultra: Command, cli: Cli): void {
  const policy = ultra.command('policy').description('the embedded Conductor (policy:<checkpoint>): make, list, show and move its checkpoints');

  policy
    .command('init')
    .description('a policy checkpoint at the documented initialisation for a pool (prints its id)')
    .option('--pool <P>', 'the worker pool: llmrouter | <file>')
    .option('--dataset <D>', "rank the workers by their training-split mean recorded score on this dataset (default: pool order)")
    .addOption(intOption('--seed <n>', 'the seed of the initialisation', 0))
    .addOption(intOption('--max-steps <n>', 'the most steps a workflow of this policy has (1 to 10)', 5))
    .addOption(intOption('--split-seed <n>', 'seed of the split by prompt (the router\'s: train 80%, val 10%, test 10%)', 0))
    .addOption(splitByOption('default prompt; the ranking is over its train part, recorded in the checkpoint'))
    .option('--id <id>', 'the checkpoint id (default: policy-<time>-<seed>)')
    .action(action(async (f: InitFlags) => {
      if (f.pool === undefined) throw new InputError('give the worker pool the policy chooses from: --pool llmrouter|<file>', { field: '--pool' });
      try {
        resolveMaxSteps(f.maxSteps);
      } catch (e) {
        throw new InputError((e as Error).message.replace(/^field maxSteps: /, ''), { field: '--max-steps' });
      }
      const config = cli.config();
      const pool = await resolveWorkerPool(f.pool, config.llmrouterDir);
      const workers = pool.workers.map((w) => w.name);
      let ranking: string[] | undefined;
      let rankedBy: Record<string, unknown> = { by: 'pool order', pool: pool.name };
      if (f.dataset !== undefined) {
        const dataset = await resolveDataset(f.dataset, config.llmrouterDir);
        const splitBy = f.splitBy ?? 'prompt';
        const r = trainingRanking(dataset.items, workers, { splitSeed: f.splitSeed, splitBy, datasetName: dataset.name });
        ranking = r.ranking;
        rankedBy = {
          by: 'training-split mean recorded score', pool: pool.name, dataset: dataset.name, datasetHash: dataset.contentHash,
          split: splitBy === 'prompt' ? 'router split by prompt (train)' : "the dataset's own split (train)", splitBy, splitSeed: f.splitSeed, means: r.means,
        };
      }
      // the features the policy reads: the router backbone's (USE-lite), as `fugu router train` uses them
      const backbone = await loadUseLite();
      const featureDim = useLiteHeadDims(workers.length).dim;
      const c = await withDb(config, (db) => initPolicyCheckpoint(db, {
        workers, backboneId: backbone.backboneId, featureDim, seed: f.seed, maxSteps: f.maxSteps, rankedBy,
        ...(ranking && { ranking }),
        ...(f.id !== undefined && { id: f.id }),
      }));
      process.stderr.write(`policy checkpoint ${c.id}: ${workers.length} workers (ranked ${(ranking ?? workers).join(' > ')}), features ${featureDim} of use-lite ${c.backboneId}, at most ${f.maxSteps} steps\n`);
      process.stdout.write(`${c.id}\n`);
    }));

  policy
    .command('list')
    .description('the stored policy checkpoints, newest first')
    .addOption(jsonOption())
    .action(action(async (f: { json?: boolean }) => withDb(cli.config(), async (db) => {
      const rows = await listConductorCheckpoints(db);
      if (f.json) return printJson(rows);
      if (rows.length === 0) process.stdout.write('no policy checkpoints yet (fugu ultra policy init --pool <pool>)\n');
      for (const c of rows) {
        const maxSteps = typeof c.config.maxSteps === 'number' ? c.config.maxSteps : '?';
        process.stdout.write(`${c.id}  parent ${(c.parentId ?? '-').padEnd(28)}  ${c.workers.length} workers  max ${maxSteps} steps  ${c.createdAt?.toISOString() ?? ''}\n`);
      }
    })));

  policy
    .command('show')
    .description('one policy checkpoint: workers, backbone, config, theta layout, training and metrics')
    .argument('<checkpoint>', 'the policy checkpoint id')
    .addOption(jsonOption())
    .action(action(async (id: string, f: { json?: boolean }) => withDb(cli.config(), async (db) => {
      const { theta, ...c } = await getPolicyCheckpoint(db, id);
      const info = { ...c, thetaSize: theta.length };
      if (f.json) return printJson(info);
      const lines = [
        `policy checkpoint ${c.id} (parent ${c.parentId ?? '-'})`,
        `workers (ordinal ids): ${c.workers.map((w, i) => `${i} ${w}`).join(', ')}`,
        `backbone: use-lite ${c.backboneId}, features ${c.featureDim}`,
        `config: ${JSON.stringify(c.config)}`,
        `theta (${theta.length} floats${theta.length === policyThetaSize(c.thetaLayout) ? '' : ', does not match its layout'}): ${c.thetaLayout.map((b) => `${b.name} [${b.shape.join('x')}] @${b.offset}`).join(' | ')}`,
        `training: ${JSON.stringify(c.training)}`,
        `metrics: ${JSON.stringify(c.metrics)}`,
      ];
      process.stdout.write(`${lines.join('\n')}\n`);
    })));

  checkpointFileCommands(policy, cli, {
    noun: 'a policy checkpoint', checkpointArg: 'the policy checkpoint id', exportCommand: 'ultra policy export',
    exportTo: exportPolicyCheckpoint, importFrom: importPolicyCheckpoint,
  });
}
