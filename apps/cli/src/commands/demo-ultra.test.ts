import { describe, expect, it } from 'vitest';
import type { ConductorResult } from '@fugu/report';
import { pickUltraConductor } from './demo-ultra.ts';

const row = (name: string, kind: ConductorResult['kind'], meanReward: number, usd: number): ConductorResult => ({
  name, kind, workflows: 100, meanReward, accuracy: meanReward, parseFailureRate: 0, usdPerItem: { conductor: 0, workers: usd }, tokensPerItem: { conductor: 0, workers: 0 },
  latencyMs: null, stepsPerWorkflow: 1, topologies: {}, finishReasons: {},
});

describe("the demo's fugu-ultra", () => {
  it('is what wins on the validation run: the best single worker when it beats the workflows (the oracle is no candidate)', () => {
    const p = pickUltraConductor([
      row('fixed:router:ckpt_1', 'conductor', 0.83, 0.000362), row('fixed:moa:3', 'conductor', 0.88, 0.001837), row('fixed:chain', 'conductor', 0.8, 0.0012),
      row('best single (llama-3.1-nemotron-51b-instruct, by train mean)', 'reference', 0.9, 0.0002), row('oracle', 'reference', 0.99, 0.0001),
    ], 100);
    expect(p.spec).toBe('fixed:single:llama-3.1-nemotron-51b-instruct');
    expect(p.why).toMatch(/^the best mean reward on 100 validation questions .*: fixed:single:llama-3\.1-nemotron-51b-instruct 0\.900 .*, fixed:moa:3 0\.880/);
  });

  it('a workflow when it wins; a tie goes to the cheaper', () => {
    expect(pickUltraConductor([row('fixed:moa:3', 'conductor', 0.88, 0.0018), row('best single (w, by train mean)', 'reference', 0.85, 0.0002)], 100).spec).toBe('fixed:moa:3');
    expect(pickUltraConductor([row('fixed:moa:3', 'conductor', 0.85, 0.0018), row('best single (w, by train mean)', 'reference', 0.85, 0.0002)], 100).spec).toBe('fixed:single:w');
  });
});
