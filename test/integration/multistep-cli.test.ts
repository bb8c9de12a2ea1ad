// `fugu multistep` as a user runs it on the shipped tables (data/multistep): no service needed.
// fit (JSON, the smallest table), review, ceiling (the shipped ReplayConfigs), adas, and bad input
// (exit 2 naming the flag).
import { describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../../apps/cli/src/main.ts', import.meta.url));

function fugu(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [main, ...args], { env: { PATH: process.env.PATH }, timeout: 120_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('fugu multistep on the shipped tables', () => {
  it('fit: the parameters with bootstrap intervals and the three out-of-sample variants, as JSON', { timeout: 120_000 }, async () => {
    const r = await fugu(['multistep', 'fit', '--tables', 'dylan-mmlu-optimal7-7', '--samples', '20', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const [fit] = JSON.parse(r.stdout);
    expect(fit).toMatchObject({ source: 'dylan-mmlu-optimal7-7', questions: 800 });
    expect(fit.groups[0].estimate.bootstrap.samples).toBe(20);
    for (const k of ['pooled', 'correlated']) expect(Object.keys(fit[k].predictions)).toEqual(['all']);
    expect(fit.correlated.rho.all).toBeGreaterThan(0);
  });

  it('review, ceiling and adas print their tables', { timeout: 120_000 }, async () => {
    const review = await fugu(['multistep', 'review', '--json']);
    expect(review.code, review.stderr).toBe(0);
    expect(JSON.parse(review.stdout).map((m: { benchmark: string }) => m.benchmark)).toEqual(['humaneval-py', 'leetcodehard-py', 'mbpp-py']);
    const ceiling = await fugu(['multistep', 'ceiling', '--json']);
    expect(ceiling.code, ceiling.stderr).toBe(0);
    const cs = JSON.parse(ceiling.stdout) as Array<{ config: string; gain: number }>;
    // the presets, then three configs per table with a second round and three for the MMLU teams by number of sources
    expect(cs.length).toBe(1 + 3 * 6 + 3);
    expect(cs[0]!.gain).toBeCloseTo(0.0254, 3);
    const adas = await fugu(['multistep', 'adas', '--samples', '20']);
    expect(adas.code, adas.stderr).toBe(0);
    expect(adas.stdout).toMatch(/ADAS \(gpt-3\.5, MMLU\): Chain-of-Thought 65\.4%, LLM Debate 65\.6%: gain \+0\.2 points/);
  });

  it('bad input names the flag', async () => {
    const r = await fugu(['multistep', 'fit', '--tables', 'no-such-table']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--tables.*no table "no-such-table"/);
    // DyLAN's MMLU runs take their gold letters from the MMLU test set
    const c = await fugu(['multistep', 'convert', '--dylan', 'no-such-dir', '--out', 'no-such-out']);
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/--mmlu.*do not hold the gold letters/);
  });
});
