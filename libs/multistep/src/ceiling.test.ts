import { describe, expect, it } from 'vitest';
import { fixedWorkflowCeilings } from './ceiling.ts';

describe("the fixed-workflow ceiling on LLMRouter's test split", () => {
  it('reproduces the README figure under the presets (+2.54 points) and finds no gain where reading others changes nothing', async () => {
    const nothing = { keep: 1, misled: 0, adopt: 0, fix: 0, herd: 2 };
    const everything = { keep: 1, misled: 0, adopt: 1, fix: 0, herd: 2 };
    const [presets, inert, perfect] = await fixedWorkflowCeilings([
      ['presets', {}],
      ['inert', { presets: { large: nothing, small: nothing } }],
      ['perfect', { presets: { large: everything, small: everything } }],
    ]);
    expect(presets!.bestSingle).toMatchObject({ worker: 'llama-3.1-nemotron-51b-instruct' });
    expect(presets!.gain).toBeCloseTo(0.0254, 3);
    expect(inert!.gain).toBe(0);
    expect(inert!.best.sources).toEqual([]);
    // a step right whenever it or a source is right: the gain is the top-5 oracle's over the best single
    expect(perfect!.gain).toBeGreaterThan(0.09);
  });
});
