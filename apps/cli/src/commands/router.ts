// `fugu router ...`: the router model's commands (drivers in @fugu/training, reports in @fugu/report).
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { InputError } from '@fugu/core';
import type { SplitScheme } from '@fugu/datasets';
import type { FuguConfig } from '@fugu/config';
import { getCheckpoint, getDeployment, listCheckpoints, type Db } from '@fugu/db';
import { resolveWorkerPool } from '@fugu/evaluation';
import { createRedis } from '@fugu/queue';
import { renderRouterReport } from '@fugu/report';
import { describeThetaLayout, loadUseLite, thetaSize, useLiteHeadDims } from '@fugu/router-model';
import { publishRouter } from '@fugu/serving';
import {
  evaluateRouter, exportCheckpoint, formatRouterEval, formatStudy, importCheckpoint, routerStudy, trainRouter, TRAIN_DEFAULTS, type RouterEvaluation,
} from '@fugu/training';
import { action, choiceOption, defaultOut, intOption, jsonOption, listOption, numOption, printJson, type Cli, type CommandGroup } from '../cli.ts';
import { checkpointFileCommands, withDb } from '../checkpoints.ts';
import { splitByOption } from '../split-by.ts';
import { routeTexts } from './route.ts';

const D = TRAIN_DEFAULTS;

/** The SFT options `router train` and `router study` share. */
function sftOptions(c: Command): Command {
  return c
    .addOption(numOption('--tau <t>', 'soft-label temperature', D.tau))
    .addOption(intOption('--seed <n>', 'training seed', D.seed))
    .addOption(intOption('--epochs <n>', 'at most this many epochs', D.epochs))
    .addOption(intOption('--batch <n>', 'minibatch size', D.batchSize))
    .addOption(numOption('--lr <x>', 'Adam learning rate', D.lr))
    .addOption(intOption('--patience <n>', 'epochs without improvement before stopping', D.patience))
    .addOption(numOption('--weight-decay <x>', 'decoupled weight decay on the head (AdamW)', D.weightDecay));
}

type SftFlags = { tau: number; seed: number; epochs: number; batch: number; lr: number; patience: number; weightDecay: number };

async function writeRouterReport(config: FuguConfig, r: RouterEvaluation, out: string | undefined, name: string, json: boolean): Promise<string> {
  const file = out ?? defaultOut(config, 'reports', name);
  await mkdir(path.dirname(path.resolve(file)), { recursive: true });
  await writeFile(file, renderRouterReport(r, { generatedAt: new Date().toISOString() }));
  (json ? process.stderr : process.stdout).write(`wrote the report to ${file}\n`);
  return file;
}

export const routerCommands: CommandGroup = (program, cli) => {
  const router = program.command('router').description('the router model: train, evaluate, route, publish, move checkpoints');

  router
    .command('list')
    .description('the stored router checkpoints')
    .addOption(jsonOption())
    .action(action(async (f: { json?: boolean }) => withDb(cli.config(), async (db) => {
      const rows = await listCheckpoints(db);
      if (f.json) return printJson(rows);
      if (rows.length === 0) process.stdout.write('no router checkpoints yet (fugu router train --run <run>)\n');
      for (const c of rows) {
        process.stdout.write(`${c.id}  ${c.stage.padEnd(6)}  parent ${(c.parentId ?? '-').padEnd(28)}  ${c.workers.length} workers  ${c.createdAt?.toISOString() ?? ''}\n`);
      }
    })));

  router
    .command('info')
    .description('the backbone, the adapted matrices and the flat theta layout and size')
    .argument('[checkpoint]', 'a stored checkpoint (default: shown for 9 workers)')
    .action(action((id: string | undefined) => routerInfo(cli, id)));

  sftOptions(
    router
      .command('train')
      .description("SFT of the router on a run's rewards (features cached per backbone), or on a label file")
      .option('--run <run>', 'the evaluation run to train on')
      .option('--labels <file>', 'a label file (fugu labels) instead of a run; needs --pool')
      .option('--pool <P>', 'the worker pool of the label file: llmrouter | <file>')
      .addOption(intOption('--split-seed <n>', 'seed of the train/val/test split by prompt', D.splitSeed))
      .addOption(splitByOption('default prompt; stored in the checkpoint'))
      .addOption(choiceOption('--select-by <what>', 'early stopping keeps the best validation reward or the lowest validation KL', ['reward', 'loss'], D.selectBy))
      .option('--head-only', 'train the head only (no SVF adaptation of the backbone)'),
  ).action(action(async (f: SftFlags & { run?: string; labels?: string; pool?: string; splitSeed: number; splitBy?: SplitScheme; selectBy: 'reward' | 'loss'; headOnly?: boolean }) => {
    const config = cli.config();
    if (f.run === undefined && f.labels === undefined) throw new InputError('give the evaluation run to train on (--run <run>) or a label file and its pool (--labels FILE --pool P)', { field: '--run' });
    if (f.labels !== undefined && f.pool === undefined) throw new InputError('a label file needs the worker pool it routes to: --pool llmrouter|<file>', { field: '--pool' });
    const out = await withDb(config, async (db) => trainRouter(db, {
      ...(f.run !== undefined && { run: f.run }),
      ...(f.labels !== undefined && { labels: { file: f.labels, pool: await resolveWorkerPool(f.pool!, config.llmrouterDir) } }),
      tau: f.tau, seed: f.seed, splitSeed: f.splitSeed, ...(f.splitBy !== undefined && { splitBy: f.splitBy }), epochs: f.epochs, batchSize: f.batch, lr: f.lr, patience: f.patience, headOnly: Boolean(f.headOnly),
      home: config.home, selectBy: f.selectBy, weightDecay: f.weightDecay,
    }));
    process.stdout.write(`${out.checkpointId}\n`);
  }));

  for (const sub of ['eval', 'sweep'] as const) {
    const c = router
      .command(sub)
      .description(sub === 'eval'
        ? 'the router on a held-out split beside best single, best per task, kNN, random and oracle (and an HTML report)'
        : 'the cost-quality curve over lambda (printed and plotted)')
      .argument('<checkpoint>', 'the router checkpoint')
      .addOption(choiceOption('--split <split>', 'the held-out split', ['test', 'val'], 'test'))
      .option('--run <run>', "the evaluation run (default: the checkpoint's training run)")
      .addOption(intOption('--split-seed <n>', "seed of the split (default: the checkpoint's; another is refused: its held-out part would hold training questions)"))
      .addOption(splitByOption("default: the checkpoint's; another is refused"))
      .addOption(intOption('--k <n>', 'neighbours of the kNN baseline', 10))
      .option('--out <file>', 'the HTML report (default: FUGU_HOME/reports/<checkpoint>-<split>.html)');
    if (sub === 'eval') c.addOption(jsonOption());
    c.action(action(async (checkpoint: string, f: { split: 'test' | 'val'; run?: string; splitSeed?: number; splitBy?: SplitScheme; k: number; out?: string; json?: boolean }) => {
      const config = cli.config();
      await withDb(config, async (db) => {
        const r = await evaluateRouter(db, {
          checkpoint, split: f.split, k: f.k, home: config.home,
          ...(f.run !== undefined && { run: f.run }),
          ...(f.splitSeed !== undefined && { splitSeed: f.splitSeed }),
          ...(f.splitBy !== undefined && { splitBy: f.splitBy }),
        });
        if (sub === 'sweep') process.stdout.write(formatSweep(r));
        else if (!f.json) process.stdout.write(formatRouterEval(r));
        const report = await writeRouterReport(config, r, f.out, `${r.checkpoint.id}-${f.split}.html`, Boolean(f.json));
        if (f.json) printJson({ ...r, report });
      });
    }));
  }

  router
    .command('route')
    .description('the worker chosen for each text (cost-aware with --lambda)')
    .argument('<checkpoint>', 'the router checkpoint')
    .argument('<text...>', 'one or more texts')
    .addOption(listOption('--allowed <a,b>', 'choose only among these workers'))
    .addOption(numOption('--lambda <x>', 'cost preference: maximise pi_j - lambda * normalised price_j', 0))
    .option('--sample', 'sample from pi_theta (seeded) instead of the argmax')
    .addOption(intOption('--seed <n>', 'seed of --sample', 0))
    .action(action(async (checkpoint: string, texts: string[], f: { allowed?: string[]; lambda: number; sample?: boolean; seed: number }) => {
      const config = cli.config();
      await withDb(config, async (db) => {
        const { workers, decisions } = await routeTexts(db, {
          checkpoint, texts, lambda: f.lambda, sample: Boolean(f.sample), seed: f.seed, home: config.home, ...(f.allowed && { allowed: f.allowed }),
        });
        for (const d of decisions) {
          const top = [...d.probs].map((p, j) => ({ p, j })).sort((a, b) => b.p - a.p).slice(0, 3);
          process.stdout.write(`${d.worker}\t(pi: ${top.map(({ p, j }) => `${workers[j]} ${p.toFixed(3)}`).join(', ')})\t${d.text.slice(0, 60)}\n`);
        }
      });
    }));

  router
    .command('publish')
    .description('serve this checkpoint (router workers and gateways swap to it at once)')
    .argument('<checkpoint>', 'the router checkpoint')
    .option('--deployment <name>', 'the deployment (default: config router.deployment, "fugu")')
    .action(action(async (checkpoint: string, f: { deployment?: string }) => {
      const config = cli.config();
      const deployment = f.deployment || config.router.deployment;
      await withDb(config, async (db) => void process.stdout.write(`${await publishCheckpoint(config, db, deployment, checkpoint)}\n`));
    }));

  sftOptions(
    router
      .command('study')
      .description('router, head-only ablation and baselines, mean +- sd over split seeds')
      .option('--run <run>', 'the evaluation run')
      .addOption(intOption('--seeds <n>', 'split seeds 0..n-1', 5))
      .addOption(intOption('--k <n>', 'neighbours of the kNN baseline', 10))
      .option('--out <file>', "the HTML report of the last seed (default: FUGU_HOME/reports/router-study-<run>.html)")
      .addOption(jsonOption()),
  ).action(action(async (f: SftFlags & { run?: string; seeds: number; k: number; out?: string; json?: boolean }) => {
    if (f.run === undefined) throw new InputError('give the evaluation run: --run <run>', { field: '--run' });
    const config = cli.config();
    await withDb(config, async (db) => {
      const s = await routerStudy(db, {
        run: f.run!, seeds: f.seeds, tau: f.tau, seed: f.seed, epochs: f.epochs, batchSize: f.batch, lr: f.lr, patience: f.patience, weightDecay: f.weightDecay,
        selectBy: 'reward', k: f.k, home: config.home,
      });
      if (!f.json) process.stdout.write(formatStudy(s));
      const report = await writeRouterReport(config, s.last, f.out, `router-study-${f.run}.html`, Boolean(f.json));
      if (f.json) printJson({ ...s, report });
    });
  }));

  checkpointFileCommands(router, cli, {
    noun: 'a checkpoint', checkpointArg: 'the router checkpoint', exportCommand: 'router export', exportTo: exportCheckpoint, importFrom: importCheckpoint,
  });
};

async function routerInfo(cli: Cli, id: string | undefined): Promise<void> {
  const ckpt = id ? await withDb(cli.config(), (db) => getCheckpoint(db, id)) : undefined;
  if (id && !ckpt) throw new InputError(`no router checkpoint "${id}"`, { field: 'checkpoint' });
  const backbone = await loadUseLite();
  const K = ckpt ? ckpt.workers.length : 9;
  process.stdout.write(`backbone: use-lite ${backbone.backboneId} (feature 512, SVF-adapted: tanh_layer_0 512x512)\n`);
  if (ckpt) process.stdout.write(`checkpoint ${ckpt.id} (${ckpt.stage}, parent ${ckpt.parentId ?? '-'}), workers: ${ckpt.workers.map((w) => w.name).join(', ')}\n`);
  else process.stdout.write(`(no checkpoint given: shown for K = ${K} workers)\n`);
  process.stdout.write(`${describeThetaLayout(useLiteHeadDims(K))}\n`);
  process.stdout.write(`theta size: ${thetaSize(useLiteHeadDims(K))}\n`);
}

/** The cost-quality curve over lambda: decision = argmax_j (pi_j - lambda * normalised price_j). */
function formatSweep(r: RouterEvaluation): string {
  const lines = [`cost-quality sweep of ${r.checkpoint.id} on the ${r.data.split} split (${r.sweep.points.length} values of lambda; * on the hull):`, `${'lambda'.padStart(10)}${'USD/call'.padStart(12)}${'mean reward'.padStart(13)}`];
  const hull = new Set(r.sweep.hull.map((h) => `${h.cost}:${h.reward}`));
  let last = '';
  for (const p of r.sweep.points) {
    const row = `${p.cost.toExponential(3).padStart(12)}${p.reward.toFixed(4).padStart(13)}`;
    if (row !== last) lines.push(`${p.lambda.toPrecision(3).padStart(10)}${row}${hull.has(`${p.cost}:${p.reward}`) ? ' *' : ''}`);
    last = row;
  }
  lines.push(`AIQ ${r.aiq.toFixed(4)}`);
  return `${lines.join('\n')}\n`;
}

/**
 * Makes `checkpointId` the deployment's router: Postgres first (the truth serving processes
 * poll), then the Redis message that makes them swap at once. Returns the line to show.
 */
export async function publishCheckpoint(config: FuguConfig, db: Db, deployment: string, checkpointId: string): Promise<string> {
  const redis = createRedis(config.redisUrl, 'producer', { retryStrategy: () => null });
  try {
    const before = await getDeployment(db, deployment);
    const { told } = await publishRouter(db, redis, { queuePrefix: config.queuePrefix, deployment, checkpointId });
    return (
      `router deployment ${deployment}: ${before ? `${before.checkpointId} -> ` : ''}${checkpointId}` +
      (told ? '' : ` (Redis unreachable: serving processes pick it up within router.pollMs = ${config.router.pollMs} ms)`)
    );
  } finally {
    redis.disconnect();
  }
}
