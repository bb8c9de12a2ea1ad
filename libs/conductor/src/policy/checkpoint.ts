// The policy as a checkpoint (what Postgres and the export file hold), and the policy as a
// Conductor (`policy:<checkpoint>`).

import { InputError } from '@fugu/core';
import type { Conductor } from '../conductor.ts';
import type { ConductorSpec } from '../spec.ts';
import { ACCESS_CHOICES, ConductorPolicy, POLICY_ENCODING_VERSION, policyThetaLayout, type PolicyConfig, type ThetaBlock } from './policy.ts';
import { isPolicyTemplateVersion, POLICY_TEMPLATE_VERSIONS, SUBTASK_KINDS } from './templates.ts';

export type PolicyCheckpoint = {
  id: string;
  /** pool worker names in ordinal-id order */
  workers: string[];
  /** the router backbone whose features the policy reads */
  backboneId: string;
  featureDim: number;
  config: PolicyConfig;
  theta: Float32Array;
  thetaLayout: ThetaBlock[];
  training: Record<string, unknown>;
  metrics: Record<string, unknown>;
  parentId: string | null;
};

/** The checkpoint of a policy. */
export function policyCheckpoint(
  policy: ConductorPolicy,
  meta: { id: string; backboneId: string; training?: Record<string, unknown>; metrics?: Record<string, unknown>; parentId?: string | null },
): PolicyCheckpoint {
  if (typeof meta.id !== 'string' || meta.id.trim() === '' || /[\s,]/.test(meta.id)) throw new InputError(`checkpoint id ${JSON.stringify(meta.id)} must be non-empty without whitespace or commas`, { field: 'id' });
  if (typeof meta.backboneId !== 'string' || meta.backboneId === '') throw new InputError('the checkpoint needs the backbone id', { field: 'backboneId' });
  return {
    id: meta.id,
    workers: [...policy.workers],
    backboneId: meta.backboneId,
    featureDim: policy.featureDim,
    config: { ...policy.config, kinds: [...policy.config.kinds], access: [...policy.config.access] },
    theta: Float32Array.from(policy.theta),
    thetaLayout: policy.layout.map((b) => ({ name: b.name, offset: b.offset, shape: [...b.shape] })),
    training: meta.training ?? {},
    metrics: meta.metrics ?? {},
    parentId: meta.parentId ?? null,
  };
}

const sameList = (a: readonly unknown[], b: readonly unknown[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * The policy of a checkpoint, for a pool: the pool's worker names, in order, must be the
 * checkpoint's (else an InputError naming the checkpoint, the expected and the given names,
 * field `pool`). The config (kinds, access choices, template and encoding versions, maxSteps,
 * rank) and the layout must be this code's (InputError, field `checkpoint`): an older-layout
 * (policy-enc-v1) checkpoint is refused.
 */
export function policyFromCheckpoint(c: PolicyCheckpoint, opts: { workers: readonly string[] }): ConductorPolicy {
  const label = `policy checkpoint ${JSON.stringify(c.id)}`;
  const given = [...opts.workers];
  if (!sameList(given, c.workers)) {
    throw new InputError(`${label} was made for the pool ${c.workers.join(', ')} (in this order); the pool given has ${given.join(', ') || 'no workers'}`, { field: 'pool' });
  }
  const bad = (why: string): InputError => new InputError(`${label}: ${why}`, { field: 'checkpoint' });
  const cfg = c.config;
  if (!cfg || typeof cfg !== 'object') throw bad('no config');
  if (!Array.isArray(cfg.kinds) || !sameList(cfg.kinds, SUBTASK_KINDS)) throw bad(`subtask kinds ${JSON.stringify(cfg.kinds)} are not this version's (${SUBTASK_KINDS.join(', ')})`);
  if (!Array.isArray(cfg.access) || !sameList(cfg.access, ACCESS_CHOICES)) throw bad(`access choices ${JSON.stringify(cfg.access)} are not this version's (${ACCESS_CHOICES.join(', ')})`);
  if (!isPolicyTemplateVersion(cfg.templateVersion)) throw bad(`template version ${JSON.stringify(cfg.templateVersion)} is unknown (known: ${Object.keys(POLICY_TEMPLATE_VERSIONS).join(', ')})`);
  if (cfg.encodingVersion !== POLICY_ENCODING_VERSION) {
    const old = cfg.encodingVersion === 'policy-enc-v1' ? ': a policy-enc-v1 checkpoint has the older layout without the bilinear blocks U, V, P, so make a new one (fugu ultra policy init)' : '';
    throw bad(`encoding version ${JSON.stringify(cfg.encodingVersion)} is unknown (known: ${POLICY_ENCODING_VERSION})${old}`);
  }
  if (typeof cfg.rank !== 'number' || !Number.isInteger(cfg.rank) || cfg.rank < 1) throw bad(`its config has no bilinear rank (a positive integer), got ${JSON.stringify(cfg.rank)}`);
  let layout: ThetaBlock[];
  try {
    layout = policyThetaLayout({ workers: c.workers.length, featureDim: c.featureDim, maxSteps: cfg.maxSteps, rank: cfg.rank });
  } catch (e) {
    throw bad((e as Error).message);
  }
  const same = layout.length === c.thetaLayout.length && layout.every((b, i) => {
    const d = c.thetaLayout[i]!;
    return d && b.name === d.name && b.offset === d.offset && sameList(b.shape, d.shape);
  });
  if (!same) throw bad('its theta layout is not the one this code expects for its workers, feature dimension, maxSteps and rank');
  try {
    return new ConductorPolicy({ workers: c.workers, featureDim: c.featureDim, maxSteps: cfg.maxSteps, rank: cfg.rank, theta: c.theta, templateVersion: cfg.templateVersion });
  } catch (e) {
    throw bad((e as Error).message);
  }
}

/**
 * A `policy:<checkpoint>` Conductor: write() reads `input.features` (InputError naming
 * `features` when missing or of the wrong dimension), samples with `input.seed` (or takes the
 * argmax with `argmax: true`), and returns the text, the exact log-probability and the decisions.
 */
export function policyConductor(policy: ConductorPolicy, spec: string | Extract<ConductorSpec, { kind: 'policy' }>, opts: { argmax?: boolean } = {}): Conductor {
  const label = typeof spec === 'string' ? spec : spec.spec;
  return {
    spec: label,
    async write(input) {
      policy.checkPool(input.pool, label);
      const features = policy.checkFeatures(input.features);
      const out = policy.write({
        features,
        question: input.question,
        pool: input.pool,
        ...(opts.argmax || input.argmax ? { argmax: true } : { seed: input.sampleKey !== undefined ? `${input.seed}/${input.sampleKey}` : input.seed }),
        ...(input.maxSteps !== undefined && { maxSteps: input.maxSteps }),
      });
      return { text: out.text, logprob: out.logprob, promptVersion: policy.config.templateVersion, decisions: out.decisions };
    },
  };
}
