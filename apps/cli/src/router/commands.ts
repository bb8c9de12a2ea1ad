// `fugu router ...`: the router model's commands.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { getCheckpoint, getDeployment, listCheckpoints, type Db } from '@fugu/db';
import { createRedis } from '@fugu/queue';
import { publishRouter } from '@fugu/serving';
import { describeThetaLayout, loadUseLite, thetaSize, useLiteHeadDims } from '@fugu/router-model';
import { defaultOut, int, num, parse } from '../args.ts';
import { openContext, resolveWorkerPool } from '@fugu/evaluation';
import { renderRouterReport } from '@fugu/report';
import { evaluateRouter, exportCheckpoint, formatRouterEval, formatStudy, importCheckpoint, routerStudy, trainRouter, TRAIN_DEFAULTS } from '@fugu/training';
import { routeTexts } from './route.ts';

export async function cmdRouter(config: FuguConfig, args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  switch (sub) {
    case 'list': {
      const ctx = await openContext({ redis: false, config });
      try {
        const rows = await listCheckpoints(ctx.db);
        if (rows.length === 0) process.stdout.write('no router checkpoints yet (fugu router train --run <run>)\n');
        for (const c of rows) {
          process.stdout.write(`${c.id}  ${c.stage.padEnd(6)}  parent ${(c.parentId ?? '-').padEnd(28)}  ${c.workers.length} workers  ${c.createdAt?.toISOString() ?? ''}\n`);
        }
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'info': {
      const { positionals } = parse(rest, {});
      const ctx = positionals[0] ? await openContext({ redis: false, config }) : undefined;
      try {
        const ckpt = positionals[0] ? await getCheckpoint(ctx!.db, positionals[0]) : undefined;
        if (positionals[0] && !ckpt) throw new InputError(`no router checkpoint "${positionals[0]}"`, { field: 'checkpoint' });
        const backbone = await loadUseLite();
        const K = ckpt ? ckpt.workers.length : 9;
        process.stdout.write(`backbone: use-lite ${backbone.backboneId} (feature 512, SVF-adapted: tanh_layer_0 512x512)\n`);
        if (ckpt) process.stdout.write(`checkpoint ${ckpt.id} (${ckpt.stage}, parent ${ckpt.parentId ?? '-'}), workers: ${ckpt.workers.map((w) => w.name).join(', ')}\n`);
        else process.stdout.write(`(no checkpoint given: shown for K = ${K} workers)\n`);
        process.stdout.write(`${describeThetaLayout(useLiteHeadDims(K))}\n`);
        process.stdout.write(`theta size: ${thetaSize(useLiteHeadDims(K))}\n`);
      } finally {
        await ctx?.close();
      }
      return 0;
    }
    case 'train': {
      const { flags, positionals } = parse(rest, {
        run: { type: 'string' }, tau: { type: 'string' }, seed: { type: 'string' }, 'split-seed': { type: 'string' }, epochs: { type: 'string' },
        batch: { type: 'string' }, lr: { type: 'string' }, patience: { type: 'string' }, 'head-only': { type: 'boolean' }, 'select-by': { type: 'string' }, 'weight-decay': { type: 'string' },
        labels: { type: 'string' }, pool: { type: 'string' },
      });
      if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
      if (typeof flags.run !== 'string' && typeof flags.labels !== 'string') throw new InputError('give the evaluation run to train on (--run <run>) or a label file and its pool (--labels FILE --pool P)', { field: '--run' });
      if (typeof flags.labels === 'string' && typeof flags.pool !== 'string') throw new InputError('a label file needs the worker pool it routes to: --pool llmrouter|<file>', { field: '--pool' });
      const ctx = await openContext({ redis: false, config });
      const D = TRAIN_DEFAULTS;
      try {
        const out = await trainRouter(ctx.db, {
          ...(typeof flags.run === 'string' && { run: flags.run }),
          ...(typeof flags.labels === 'string' && { labels: { file: flags.labels, pool: await resolveWorkerPool(flags.pool as string, config.llmrouterDir) } }),
          tau: num(flags.tau, '--tau', D.tau), seed: int(flags.seed, '--seed', D.seed), splitSeed: int(flags['split-seed'], '--split-seed', D.splitSeed),
          epochs: int(flags.epochs, '--epochs', D.epochs), batchSize: int(flags.batch, '--batch', D.batchSize), lr: num(flags.lr, '--lr', D.lr),
          patience: int(flags.patience, '--patience', D.patience), headOnly: Boolean(flags['head-only']), home: config.home,
          selectBy: flags['select-by'] === 'loss' ? 'loss' : D.selectBy, weightDecay: num(flags['weight-decay'], '--weight-decay', D.weightDecay),
        });
        process.stdout.write(`${out.checkpointId}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'sweep':
    case 'eval': {
      const { flags, positionals } = parse(rest, { run: { type: 'string' }, split: { type: 'string' }, 'split-seed': { type: 'string' }, k: { type: 'string' }, out: { type: 'string' } });
      if (!positionals[0]) throw new InputError('give the checkpoint: fugu router eval <checkpoint>', { field: 'checkpoint' });
      const split = (flags.split as string | undefined) ?? 'test';
      if (split !== 'test' && split !== 'val') throw new InputError(`must be test or val, got "${split}"`, { field: '--split' });
      const ctx = await openContext({ redis: false, config });
      try {
        const r = await evaluateRouter(ctx.db, {
          checkpoint: positionals[0], split, k: int(flags.k, '--k', 10), home: config.home,
          ...(typeof flags.run === 'string' && { run: flags.run }),
          ...(flags['split-seed'] !== undefined && { splitSeed: int(flags['split-seed'], '--split-seed', 0) }),
        });
        if (sub === 'sweep') {
          // the cost-quality curve over lambda: decision = argmax_j (pi_j - lambda * normalised price_j)
          process.stdout.write(`cost-quality sweep of ${r.checkpoint.id} on the ${split} split (${r.sweep.points.length} values of lambda; * on the hull):\n${'lambda'.padStart(10)}${'USD/call'.padStart(12)}${'mean reward'.padStart(13)}\n`);
          const hull = new Set(r.sweep.hull.map((h) => `${h.cost}:${h.reward}`));
          let last = '';
          for (const p of r.sweep.points) {
            const row = `${p.cost.toExponential(3).padStart(12)}${p.reward.toFixed(4).padStart(13)}`;
            if (row !== last) process.stdout.write(`${p.lambda.toPrecision(3).padStart(10)}${row}${hull.has(`${p.cost}:${p.reward}`) ? ' *' : ''}\n`);
            last = row;
          }
          process.stdout.write(`AIQ ${r.aiq.toFixed(4)}\n`);
        } else {
          process.stdout.write(formatRouterEval(r));
        }
        const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'reports', `${r.checkpoint.id}-${split}.html`);
        await mkdir(path.dirname(path.resolve(out)), { recursive: true });
        await writeFile(out, renderRouterReport(r, { generatedAt: new Date().toISOString() }));
        process.stdout.write(`wrote the report to ${out}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'study': {
      const { flags } = parse(rest, {
        run: { type: 'string' }, seeds: { type: 'string' }, tau: { type: 'string' }, seed: { type: 'string' }, epochs: { type: 'string' },
        batch: { type: 'string' }, lr: { type: 'string' }, patience: { type: 'string' }, 'weight-decay': { type: 'string' }, k: { type: 'string' }, out: { type: 'string' },
      });
      if (typeof flags.run !== 'string') throw new InputError('give the evaluation run: --run <run>', { field: '--run' });
      const ctx = await openContext({ redis: false, config });
      try {
        const s = await routerStudy(ctx.db, {
          run: flags.run, seeds: int(flags.seeds, '--seeds', 5), tau: num(flags.tau, '--tau', 0.1), seed: int(flags.seed, '--seed', 0),
          epochs: int(flags.epochs, '--epochs', 40), batchSize: int(flags.batch, '--batch', 256), lr: num(flags.lr, '--lr', 0.003),
          patience: int(flags.patience, '--patience', 5), weightDecay: num(flags['weight-decay'], '--weight-decay', 0), selectBy: 'reward',
          k: int(flags.k, '--k', 10), home: config.home,
        });
        process.stdout.write(formatStudy(s));
        const out = typeof flags.out === 'string' ? flags.out : defaultOut(config, 'reports', `router-study-${flags.run}.html`);
        await mkdir(path.dirname(path.resolve(out)), { recursive: true });
        await writeFile(out, renderRouterReport(s.last, { generatedAt: new Date().toISOString() }));
        process.stdout.write(`wrote the report to ${out}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'route': {
      const { flags, positionals } = parse(rest, { allowed: { type: 'string' }, lambda: { type: 'string' }, sample: { type: 'boolean' }, seed: { type: 'string' } });
      const [checkpoint, ...texts] = positionals;
      if (!checkpoint || texts.length === 0) throw new InputError('give a checkpoint and one or more texts: fugu router route <checkpoint> "text" ...', { field: 'arguments' });
      const ctx = await openContext({ redis: false, config });
      try {
        const { workers, decisions } = await routeTexts(ctx.db, {
          checkpoint, texts, lambda: num(flags.lambda, '--lambda', 0), sample: Boolean(flags.sample), seed: int(flags.seed, '--seed', 0), home: config.home,
          ...(typeof flags.allowed === 'string' && { allowed: flags.allowed.split(',').map((x) => x.trim()).filter(Boolean) }),
        });
        for (const d of decisions) {
          const top = [...d.probs].map((p, j) => ({ p, j })).sort((a, b) => b.p - a.p).slice(0, 3);
          process.stdout.write(`${d.worker}\t(pi: ${top.map(({ p, j }) => `${workers[j]} ${p.toFixed(3)}`).join(', ')})\t${d.text.slice(0, 60)}\n`);
        }
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'publish': {
      const { flags, positionals } = parse(rest, { deployment: { type: 'string' } });
      if (!positionals[0]) throw new InputError('give the checkpoint: fugu router publish <checkpoint> [--deployment fugu]', { field: 'checkpoint' });
      const deployment = typeof flags.deployment === 'string' && flags.deployment ? flags.deployment : config.router.deployment;
      const ctx = await openContext({ redis: false, config });
      try {
        process.stdout.write(`${await publishCheckpoint(config, ctx.db, deployment, positionals[0])}\n`);
      } finally {
        await ctx.close();
      }
      return 0;
    }
    case 'export':
    case 'import': {
      const { flags, positionals } = parse(rest, { out: { type: 'string' } });
      if (!positionals[0]) throw new InputError(sub === 'export' ? 'give the checkpoint: fugu router export <checkpoint> [--out FILE]' : 'give the file: fugu router import <file>', { field: 'arguments' });
      const ctx = await openContext({ redis: false, config });
      try {
        if (sub === 'export') {
          const out = typeof flags.out === 'string' ? flags.out : `${positionals[0]}.json`;
          await exportCheckpoint(ctx.db, positionals[0], out);
          process.stdout.write(`wrote ${positionals[0]} to ${out}\n`);
        } else {
          process.stdout.write(`${await importCheckpoint(ctx.db, positionals[0])}\n`);
        }
      } finally {
        await ctx.close();
      }
      return 0;
    }
    default:
      throw new InputError(`unknown router command "${sub ?? ''}" (list, info, train, eval, sweep, route, publish, study, export, import)`, { field: 'command' });
  }
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
