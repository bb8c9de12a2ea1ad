// Test helpers (`@fugu/router-model/testing`): a cheap router checkpoint whose decisions are
// predictable, without training.
//
// Each worker gets one or more anchor texts. theta = [z = 1 | W_h | b_h = 0] with column k of W_h
// = scale * (the normalised USE-lite embedding of worker k's anchors). With z = 1 the SVF layer is
// the backbone's own tanh layer, so the head's normalised embedding e(text) is the package's
// embedding and logit_k = scale * cos(e(text), anchor_k): each text goes to the worker whose
// anchor is nearest, and a text equal to an anchor goes to its worker with pi close to 1.
//
// The record has the shape of @fugu/db's CheckpointRecord (this lib depends on core only, so the
// type is written out here; it is assignable to CheckpointRecord).
import { randomBytes } from 'node:crypto';
import { thetaLayout, thetaSize, unpackTheta } from './head/index.ts';
import { loadRouterModel, USE_LITE_BACKBONE, type RouterModel } from './runtime/index.ts';

export type AnchorCheckpointOptions = {
  /** worker name -> anchor text(s), in head order */
  anchors: Record<string, string | readonly string[]>;
  /** USD per 1M tokens by worker (default "0" / "0"); needed for cost-aware tests */
  prices?: Record<string, { input: string; output: string }>;
  /** default `anchor-<random>` */
  id?: string;
  /** logit scale (sharpness), default 50 */
  scale?: number;
  /** FUGU_HOME (the SVD cache); needed unless `model` is given */
  home?: string;
  /** an already loaded model (its encoder makes the anchor embeddings) */
  model?: RouterModel;
};

export type AnchorCheckpointRecord = {
  id: string;
  stage: 'init' | 'sft' | 'es' | 'import';
  backboneId: string;
  backbone: Record<string, unknown>;
  workers: Array<{ name: string; inputPerMTok: string; outputPerMTok: string }>;
  theta: Float32Array;
  thetaLayout: Array<{ name: string; offset: number; shape: number[] }>;
  tau: number | null;
  training: Record<string, unknown>;
  metrics: Record<string, unknown>;
  parentId: string | null;
};

/** theta and the checkpoint record (not saved) for anchor texts; see the file comment. */
export async function anchorCheckpoint(opts: AnchorCheckpointOptions): Promise<AnchorCheckpointRecord> {
  const names = Object.keys(opts.anchors);
  if (names.length === 0) throw new Error('anchorCheckpoint: give at least one worker with anchor texts');
  const K = names.length;
  const model = opts.model ?? (await loadRouterModel(opts.home ?? '.fugu', K));
  try {
    const dims = model.headFor(K).dims;
    const theta = new Float32Array(thetaSize(dims));
    const parts = unpackTheta(theta, dims);
    parts.z.fill(1);
    const scale = opts.scale ?? 50;
    for (let k = 0; k < K; k++) {
      const texts = ([] as string[]).concat(opts.anchors[names[k]!]!);
      const embs = await model.encoder.encode(texts, { output: 'embedding' });
      const mean = new Float32Array(dims.dim);
      for (const e of embs) for (let d = 0; d < dims.dim; d++) mean[d]! += e[d]!;
      const norm = Math.hypot(...mean) || 1;
      for (let d = 0; d < dims.dim; d++) parts.W_h[d * K + k] = (scale * mean[d]!) / norm;
    }
    return {
      id: opts.id ?? `anchor-${randomBytes(4).toString('hex')}`,
      stage: 'init',
      backboneId: model.backboneId,
      backbone: { ...USE_LITE_BACKBONE, dims },
      workers: names.map((name) => ({ name, inputPerMTok: opts.prices?.[name]?.input ?? '0', outputPerMTok: opts.prices?.[name]?.output ?? '0' })),
      theta,
      thetaLayout: thetaLayout(dims).map(({ name, offset, shape }) => ({ name, offset, shape })),
      tau: null,
      training: { kind: 'anchors', anchors: opts.anchors },
      metrics: {},
      parentId: null,
    };
  } finally {
    if (!opts.model) await model.release();
  }
}
