// The episode environment on hand-made reward tables (no model, no database).
import { describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import {
  baselinePolicies, bestSingleWorker, drawEpisodes, functionPolicies, runEpisodes, stateText, summariseEpisodes, Trajectory, type EpisodeEnv, type LiveTurn,
} from './episodes.ts';
import { sampleAt } from './task-data.ts';

const ctx = { seed: 3, generation: 0, replica: 0, split: 'test' as const };

/** 40 items; worker a solves the even ones for sure, b the odd ones; c solves nothing. */
function alternating(questions: number, turnBudget: number): EpisodeEnv {
  const n = 40;
  return {
    workers: ['a', 'b', 'c'],
    prompts: Array.from({ length: n }, (_, i) => `question ${i}`),
    rewards: Array.from({ length: n }, (_, i) => Float32Array.from(i % 2 === 0 ? [1, 0, 0] : [0, 1, 0])),
    questions,
    turnBudget,
  };
}
const rows = (env: EpisodeEnv) => env.prompts.map((_, i) => i);

describe('episodes', () => {
  it('are reproducible from their seed and differ between generations, replicas and seeds', () => {
    const env = alternating(3, 6);
    const a = drawEpisodes(rows(env), 8, env, ctx);
    expect(drawEpisodes(rows(env), 8, env, ctx)).toEqual(a);
    for (const other of [{ ...ctx, generation: 1 }, { ...ctx, replica: 1 }, { ...ctx, seed: 4 }]) {
      expect(drawEpisodes(rows(env), 8, env, other).map((e) => [...e.items])).not.toEqual(a.map((e) => [...e.items]));
    }
    for (const e of a) expect(new Set(e.items).size).toBe(3); // distinct questions
    expect(a[0]!.actionU).toHaveLength(3 * 6);
    expect(a[0]!.outcomeU).toHaveLength(3 * 3 * 6);
    expect(() => drawEpisodes([1, 2], 1, env, ctx)).toThrow(InputError);
  });

  it('retries a failed question, ends on solving all or on the turn budget, and draws outcomes from the recorded mean', () => {
    const env = alternating(2, 3);
    const [ep] = drawEpisodes(rows(env), 1, env, ctx);
    const first = ep!.items[0]! % 2; // the worker that solves question 0
    const t = new Trajectory(env);
    expect(t.step(1 - first, ep!, env)).toBe(false);
    expect(t.q).toBe(0);
    expect(t.step(first, ep!, env)).toBe(true);
    expect(t.q).toBe(1);
    expect(t.done).toBe(false);
    t.step(2, ep!, env); // c never solves: the budget of 3 turns is spent
    expect(t.done).toBe(true);
    expect(t.reward).toBe(0);
    expect(() => t.step(0, ep!, env)).toThrow(/finished/);

    // a worker with mean 0.3 solves about 30% of first tries
    const p: EpisodeEnv = { ...env, rewards: env.rewards.map(() => Float32Array.from([0.3, 0, 0])), questions: 1, turnBudget: 1 };
    const eps = drawEpisodes(rows(p), 4000, p, ctx);
    const solved = eps.filter((e) => new Trajectory(p).step(0, e, p)).length / eps.length;
    expect(solved).toBeGreaterThan(0.27);
    expect(solved).toBeLessThan(0.33);
  });

  it('renders the state with the current question first, then feedback, then earlier questions newest first', () => {
    const env = alternating(3, 6);
    const [ep] = drawEpisodes(rows(env), 1, env, ctx);
    const t = new Trajectory(env);
    const q = (k: number) => env.prompts[ep!.items[k]!]!;
    expect(stateText(env, ep!, t)).toBe(q(0)); // the first turn: exactly the prompt
    const good = (k: number) => ep!.items[k]! % 2;
    t.step(2, ep!, env);
    expect(stateText(env, ep!, t)).toBe(`${q(0)}\nfeedback: worker c failed`);
    t.step(good(0), ep!, env);
    t.step(good(1), ep!, env);
    expect(stateText(env, ep!, t)).toBe(
      `${q(2)}\nprevious question: ${q(1)} | worker ${env.workers[good(1)]} solved\nprevious question: ${q(0)} | worker c failed; worker ${env.workers[good(0)]} solved`,
    );
    const long: EpisodeEnv = { ...env, prompts: env.prompts.map((p) => `${p} ${'x'.repeat(500)}`) };
    const t2 = new Trajectory(long);
    t2.step(2, ep!, long);
    const s = stateText(long, ep!, t2);
    expect(s.split('\n')[0]).toHaveLength(240); // clipped so the feedback stays within USE-lite's 128 tokens
    expect(s.endsWith('feedback: worker c failed')).toBe(true);
  });

  it('switching workers after a failure beats repeating the same worker', async () => {
    const env = alternating(4, 8);
    const episodes = drawEpisodes(rows(env), 200, env, ctx);
    const repeat = baselinePolicies.fixed(0);
    // try a first; after a failure on this question, the next worker not yet tried on it
    const switcher = (t: LiveTurn, e: EpisodeEnv) => {
      const tried = new Set(t.traj.attempts[t.traj.q]!.map((a) => a.worker));
      const j = [0, 1, 2].find((w) => !tried.has(w)) ?? 0;
      return Float64Array.from(e.workers, (_, k) => (k === j ? 1 : 0));
    };
    const [rep, sw] = await runEpisodes(env, episodes, functionPolicies([repeat, switcher]));
    const r = summariseEpisodes(env, rep!);
    const s = summariseEpisodes(env, sw!);
    expect(r.fitness).toBe(episodes.filter((e) => [...e.items].every((i) => i % 2 === 0)).length / 200); // only all-even chains
    expect(s.fitness).toBe(1); // at most 2 turns a question, 8 turns for 4
    expect(s.summary.switchRate).toBe(1);
    expect(r.summary.switchRate).toBe(0);
  });

  it('gives every policy the same random streams, and the oracle does best', async () => {
    const env: EpisodeEnv = {
      workers: ['a', 'b', 'c'],
      prompts: Array.from({ length: 30 }, (_, i) => `q${i}`),
      rewards: Array.from({ length: 30 }, (_, i) => Float32Array.from([0.2 + 0.02 * i, 0.5, 0.9 - 0.02 * i])),
      questions: 3,
      turnBudget: 5,
    };
    const episodes = drawEpisodes(rows(env), 300, env, ctx);
    const group = functionPolicies([baselinePolicies.random(), baselinePolicies.random(), baselinePolicies.oracle(), baselinePolicies.fixed(1)]);
    const [r1, r2, oracle, fixed] = (await runEpisodes(env, episodes, group)).map((t) => summariseEpisodes(env, t));
    expect(r1).toEqual(r2); // identical policies, identical results
    expect(oracle!.fitness).toBeGreaterThan(fixed!.fitness);
    expect(oracle!.fitness).toBeGreaterThan(r1!.fitness);
    expect(bestSingleWorker(env.rewards, rows(env), 3)).toBe(2); // c: mean 0.61
  });

  it('samples by inverse CDF', () => {
    const p = Float64Array.from([0, 0.25, 0, 0.75]);
    expect(sampleAt(p, 0, 4, 0)).toBe(1);
    expect(sampleAt(p, 0, 4, 0.2499)).toBe(1);
    expect(sampleAt(p, 0, 4, 0.25)).toBe(3);
    expect(sampleAt(p, 0, 4, 0.999999999)).toBe(3);
  });
});
