// The SFT driver (`fugu router train`): SFT of the router on an evaluation run's rewards. Soft labels
// p_i(j) = softmax(rbar_ij / tau); loss KL(p_i || pi_theta) averaged over questions; Adam,
// minibatches, early stopping on a validation split; seeded. The split is by unique prompt, or the
// dataset's own (`--split-by dataset`, @fugu/datasets assignSplit); the checkpoint records which.
import { randomBytes } from 'node:crypto';
import { InputError, softLabels, type WorkerPool } from '@fugu/core';
import { splitLabel, splitScheme, type SplitScheme } from '@fugu/datasets';
import { saveCheckpoint, type Db } from '@fugu/db';
import { loadRouterModel, thetaLayout, trainSft, USE_LITE_BACKBONE, type SftEpoch } from '@fugu/router-model';
import { cachedFeatures, routingDataFromRun, SPLIT_FRACTIONS, splitIndices } from '../tasks/index.ts';
import { routingDataFromLabels } from './label-file.ts';

export type TrainOptions = {
  /** train on an evaluation run's rewards ... */
  run?: string;
  /** ... or on a label file (`fugu labels` output) for a worker pool */
  labels?: { file: string; pool: WorkerPool };
  tau: number;
  seed: number;
  splitSeed: number;
  /** the split: by unique prompt (default) or the dataset's own (items need their source split) */
  splitBy?: SplitScheme;
  epochs: number;
  batchSize: number;
  lr: number;
  patience: number;
  headOnly: boolean;
  /** decoupled weight decay on the head weights (AdamW) */
  weightDecay: number;
  /** early stopping keeps the best validation mean reward (default) or the lowest validation KL */
  selectBy: 'reward' | 'loss';
  home: string;
  log?: (line: string) => void;
};

/** `fugu router train`'s defaults (the demo trains with them too). */
export const TRAIN_DEFAULTS = {
  tau: 0.1, seed: 0, splitSeed: 0, epochs: 40, batchSize: 256, lr: 0.003, patience: 5, headOnly: false, weightDecay: 0, selectBy: 'reward',
} as const satisfies Partial<TrainOptions>;

export type TrainOutcome = { checkpointId: string; history: SftEpoch[]; bestEpoch: number; bestValLoss: number; items: number; split: { train: number; val: number; test: number } };

export async function trainRouter(db: Db, opts: TrainOptions): Promise<TrainOutcome> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  if (!(opts.tau > 0)) throw new InputError(`tau must be > 0, got ${opts.tau}`, { field: '--tau' });
  if (!opts.run === !opts.labels) throw new InputError('give either an evaluation run (--run) or a label file with its pool (--labels, --pool)', { field: '--run' });
  const data = opts.labels ? await routingDataFromLabels(opts.labels.file, opts.labels.pool) : await routingDataFromRun(db, opts.run!);
  const K = data.workers.length;
  const model = await loadRouterModel(opts.home, K);
  try {
    log(`routing data: ${data.items.length} items x ${K} workers from ${opts.run ? `run ${opts.run}` : opts.labels!.file}; backbone use-lite ${model.backboneId}`);
    const { features, stats } = await cachedFeatures(db, model.encoder, data.items.map((i) => i.prompt), {
      onProgress: (done, total) => log(`features: ${done}/${total} encoded`),
    });
    log(`features: ${stats.cached} cached, ${stats.computed} computed`);
    const labels = data.rewards.map((r) => Float32Array.from(softLabels([...r], opts.tau)));
    const splitBy = splitScheme(opts.splitBy ?? 'prompt');
    const split = splitIndices(data, { by: splitBy, seed: opts.splitSeed });
    log(`the router's split, ${splitLabel({ by: splitBy, seed: opts.splitSeed })}: ${split.train.length} train, ${split.val.length} val, ${split.test.length} test`);
    const started = Date.now();
    const result = await trainSft({
      head: model.head,
      features,
      labels,
      split: { train: split.train, val: split.val },
      seed: opts.seed,
      epochs: opts.epochs,
      batchSize: opts.batchSize,
      lr: opts.lr,
      patience: opts.patience,
      trainZ: !opts.headOnly,
      rewards: data.rewards,
      weightDecay: opts.weightDecay,
      selectBy: opts.selectBy,
      onEpoch: (e) => log(`epoch ${String(e.epoch).padStart(3)}/${opts.epochs}  train KL ${e.trainLoss.toFixed(5)}  val KL ${e.valLoss.toFixed(5)}  val reward ${e.valReward?.toFixed(4)}  (${((Date.now() - started) / 1000).toFixed(1)} s)`),
    });
    const checkpointId = `ckpt_${new Date().toISOString().replace(/[-:T]/g, '').slice(0, 14)}_${randomBytes(3).toString('hex')}`;
    await saveCheckpoint(db, {
      id: checkpointId,
      stage: 'sft',
      backboneId: model.backboneId,
      backbone: { ...USE_LITE_BACKBONE, dims: model.head.dims },
      workers: data.workers,
      theta: result.theta,
      thetaLayout: thetaLayout(model.head.dims).map(({ name, offset, shape }) => ({ name, offset, shape })),
      tau: opts.tau,
      training: {
        run: opts.run ?? null, ...(opts.labels && { labels: opts.labels.file }), splitBy, splitSeed: opts.splitSeed, ...(splitBy === 'prompt' && { fractions: SPLIT_FRACTIONS }), seed: opts.seed, epochs: opts.epochs, batchSize: opts.batchSize,
        lr: opts.lr, patience: opts.patience, headOnly: opts.headOnly, weightDecay: opts.weightDecay, selectBy: opts.selectBy, seconds: (Date.now() - started) / 1000,
      },
      metrics: { history: result.history, bestEpoch: result.bestEpoch, bestValLoss: result.bestValLoss },
      parentId: null,
    });
    log(`${sftOutcomeText(result, opts)}; saved checkpoint ${checkpointId}`);
    return {
      checkpointId, history: result.history, bestEpoch: result.bestEpoch, bestValLoss: result.bestValLoss, items: data.items.length,
      split: { train: split.train.length, val: split.val.length, test: split.test.length },
    };
  } finally {
    await model.release();
  }
}

/**
 * What SFT kept and why it stopped, as one line: the epoch early stopping kept and the quantity it
 * was kept by (the validation mean reward by default, else the validation KL), that epoch's other
 * figure and, where the lowest validation KL came at another epoch, that one too; then where
 * training stopped: every epoch, or early (no better figure for `patience` epochs).
 */
export function sftOutcomeText(r: { history: readonly SftEpoch[]; bestEpoch: number; bestValLoss: number }, o: { epochs: number; patience: number; selectBy: 'reward' | 'loss' }): string {
  const last = r.history.at(-1)?.epoch ?? 0;
  const best = r.history.find((e) => e.epoch === r.bestEpoch);
  const byReward = o.selectBy === 'reward';
  const lowest = r.history.reduce<SftEpoch | undefined>((a, e) => (a === undefined || e.valLoss < a.valLoss ? e : a), undefined);
  const kept = r.bestEpoch === 0
    ? `kept the starting theta (no epoch improved its val ${byReward ? 'reward' : 'KL'})`
    : byReward
      ? `best epoch ${r.bestEpoch} by val reward ${best?.valReward?.toFixed(4) ?? '-'} (its val KL ${r.bestValLoss.toFixed(5)}${lowest && lowest.epoch !== r.bestEpoch ? `; the lowest val KL, ${lowest.valLoss.toFixed(5)}, at epoch ${lowest.epoch}` : ''})`
      : `best epoch ${r.bestEpoch} by val KL ${r.bestValLoss.toFixed(5)}${best?.valReward !== undefined ? ` (its val reward ${best.valReward.toFixed(4)})` : ''}`;
  const stopped = last < o.epochs
    ? `stopped at epoch ${last} of ${o.epochs}: early stopping, no better val ${byReward ? 'reward' : 'KL'} in the ${o.patience} epochs after epoch ${r.bestEpoch} (patience ${o.patience})`
    : `ran all ${o.epochs} epochs`;
  return `${kept}; ${stopped}`;
}
