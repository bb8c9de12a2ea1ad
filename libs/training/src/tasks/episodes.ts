// The multi-turn episode environment, built from an evaluation run's recorded rewards (see
// ../../README.md "Episodes" for the definition). Pure computation: the policies that act in it
// (router thetas, baselines) are PolicyGroups.
//
// An episode is a chain of `questions` distinct items of the split. Each turn the policy sees the
// state s_t as text and picks a worker a_t ~ pi(.|s_t) by inverse CDF with the episode's action
// uniform for (question, attempt); the outcome is solved iff the episode's outcome uniform for
// (question, worker, how often that worker already tried it) is below the worker's recorded mean
// reward on the item, i.e. Bernoulli(rbar). A failed question is retried next turn; the episode
// ends when every question is solved (terminal reward 1) or after `turnBudget` turns (reward 0).
// All random numbers of an episode come from its own seed (seed, split, generation, replica,
// episode index), drawn before any policy acts: every policy meets the same questions and the
// same random streams (common random numbers).
import { InputError, rng } from '@fugu/core';
import { sampleAt } from './task-data.ts';
import type { CandidateResult, EvalContext } from './types.ts';

export type EpisodeEnv = {
  /** worker names in head order (K) */
  workers: readonly string[];
  /** prompt per item row */
  prompts: readonly string[];
  /** recorded mean reward per item row, [K] each, in [0, 1] */
  rewards: readonly ArrayLike<number>[];
  questions: number;
  turnBudget: number;
};

export type Episode = {
  index: number;
  /** the item rows of the questions, in order */
  items: Int32Array;
  /** [Q * B]: uniform of attempt a on question q at q * B + a */
  actionU: Float64Array;
  /** [Q * K * B]: uniform of the n-th try of worker j on question q at (q * K + j) * B + n */
  outcomeU: Float64Array;
};

/** `count` episodes of the split's rows for an evaluation context (see the file comment). */
export function drawEpisodes(rows: readonly number[], count: number, env: Pick<EpisodeEnv, 'questions' | 'turnBudget' | 'workers'>, ctx: EvalContext): Episode[] {
  const Q = env.questions, B = env.turnBudget, K = env.workers.length;
  if (rows.length < Q) throw new InputError(`an episode needs ${Q} distinct questions but the ${ctx.split} split has ${rows.length} items`, { field: 'spec.questions' });
  return Array.from({ length: count }, (_, e) => {
    const r = rng('fugu-episode', ctx.seed, ctx.split, ctx.generation, ctx.replica, e);
    const picked = new Set<number>();
    const items = new Int32Array(Q);
    for (let q = 0; q < Q; q++) {
      let i: number;
      do i = r.int(rows.length);
      while (picked.has(i));
      picked.add(i);
      items[q] = rows[i]!;
    }
    const actionU = new Float64Array(Q * B);
    for (let i = 0; i < actionU.length; i++) actionU[i] = r.next();
    const outcomeU = new Float64Array(Q * K * B);
    for (let i = 0; i < outcomeU.length; i++) outcomeU[i] = r.next();
    return { index: e, items, actionU, outcomeU };
  });
}

export type Attempt = { worker: number; solved: boolean };

/** One policy's play of one episode. */
export class Trajectory {
  /** the question being answered (index into episode.items); = questions when all are solved */
  q = 0;
  turns = 0;
  done = false;
  reward = 0;
  /** attempts per question position, in turn order */
  readonly attempts: Attempt[][];
  private readonly tries: Int32Array;
  private readonly K: number;

  constructor(env: Pick<EpisodeEnv, 'questions' | 'workers'>) {
    this.K = env.workers.length;
    this.attempts = Array.from({ length: env.questions }, () => []);
    this.tries = new Int32Array(env.questions * this.K);
  }

  /** The attempt number on the current question (the action uniform's index within it). */
  get attempt(): number {
    return this.attempts[this.q]!.length;
  }

  /** Worker j answers the current question; returns whether it solved it. */
  step(j: number, episode: Episode, env: EpisodeEnv): boolean {
    if (this.done) throw new Error('step on a finished episode');
    if (!Number.isInteger(j) || j < 0 || j >= this.K) throw new InputError(`worker index ${j} out of range [0, ${this.K})`, { field: 'action' });
    const B = env.turnBudget;
    const n = this.tries[this.q * this.K + j]!++;
    const rbar = env.rewards[episode.items[this.q]!]![j]!;
    const solved = episode.outcomeU[(this.q * this.K + j) * B + n]! < rbar;
    this.attempts[this.q]!.push({ worker: j, solved });
    this.turns++;
    if (solved) this.q++;
    if (this.q === env.questions) {
      this.done = true;
      this.reward = 1;
    } else if (this.turns >= B) {
      this.done = true;
    }
    return solved;
  }
}

/** How the state is rendered as text (USE-lite reads only the first 128 tokens, so the question is clipped once there is feedback to show). */
export const STATE_TEXT = { questionChars: 240, previousChars: 80 } as const;

const oneLine = (s: string): string => s.replace(/\s+/g, ' ').trim();
const clip = (s: string, n: number): string => (s.length <= n ? s : `${s.slice(0, n - 1)}…`);

/**
 * The router's view of the state, newest first: the current question (exactly the prompt at the
 * episode's first turn, so it is the text SFT trained on; clipped to 240 characters once there is
 * anything after it), then the failed attempts on it, then the earlier questions with who
 * answered them and the environment's feedback:
 *
 *   <current question>
 *   feedback: worker beta failed; worker gamma failed
 *   previous question: <prompt, one line, clipped to 80> | worker alpha failed; worker beta solved
 */
export function stateText(env: EpisodeEnv, episode: Episode, traj: Trajectory): string {
  const prompt = env.prompts[episode.items[traj.q]!]!;
  if (traj.turns === 0) return prompt;
  const name = (a: Attempt) => `worker ${env.workers[a.worker]} ${a.solved ? 'solved' : 'failed'}`;
  const lines = [clip(prompt, STATE_TEXT.questionChars)];
  const current = traj.attempts[traj.q]!;
  if (current.length > 0) lines.push(`feedback: ${current.map(name).join('; ')}`);
  for (let p = traj.q - 1; p >= 0; p--) {
    lines.push(`previous question: ${clip(oneLine(env.prompts[episode.items[p]!]!), STATE_TEXT.previousChars)} | ${traj.attempts[p]!.map(name).join('; ')}`);
  }
  return lines.join('\n');
}

/** A live (policy, episode) pair at the current turn. */
export type LiveTurn = { policy: number; episode: Episode; traj: Trajectory };

/** A batch of policies acting together: pi(.|s) for every live pair of a turn. */
export interface PolicyGroup {
  readonly size: number;
  /** [L * K]: the distribution over workers for each live pair, in order */
  probs(live: readonly LiveTurn[], env: EpisodeEnv): Promise<Float64Array>;
}

/** Plays every policy of the group on every episode, all live pairs of a turn at once; [policy][episode]. */
export async function runEpisodes(env: EpisodeEnv, episodes: readonly Episode[], group: PolicyGroup): Promise<Trajectory[][]> {
  const K = env.workers.length, B = env.turnBudget;
  const trajs = Array.from({ length: group.size }, () => episodes.map(() => new Trajectory(env)));
  for (let turn = 0; turn < B; turn++) {
    const live: LiveTurn[] = [];
    trajs.forEach((row, policy) => row.forEach((traj, e) => { if (!traj.done) live.push({ policy, episode: episodes[e]!, traj }); }));
    if (live.length === 0) break;
    const p = await group.probs(live, env);
    if (p.length !== live.length * K) throw new Error(`policy group returned ${p.length} probabilities for ${live.length} x ${K}`);
    live.forEach(({ episode, traj }, i) => {
      const u = episode.actionU[traj.q * B + traj.attempt]!;
      traj.step(sampleAt(p, i * K, K, u), episode, env);
    });
  }
  return trajs;
}

/** Fitness (mean terminal reward) and a small summary of one policy's trajectories. */
export function summariseEpisodes(env: EpisodeEnv, trajs: readonly Trajectory[]): CandidateResult {
  const K = env.workers.length;
  const picks = new Array<number>(K).fill(0);
  let solved = 0, turns = 0, questions = 0, afterFailure = 0, switched = 0;
  for (const t of trajs) {
    solved += t.reward;
    turns += t.turns;
    questions += t.q;
    for (const attempts of t.attempts) {
      attempts.forEach((a, i) => {
        picks[a.worker]!++;
        if (i > 0) {
          afterFailure++;
          if (a.worker !== attempts[i - 1]!.worker) switched++;
        }
      });
    }
  }
  const n = Math.max(1, trajs.length);
  return {
    fitness: solved / n,
    summary: {
      episodes: trajs.length,
      solved,
      meanTurns: round(turns / n),
      meanQuestionsSolved: round(questions / n),
      retries: afterFailure,
      switchRate: afterFailure > 0 ? round(switched / afterFailure) : null,
      picks: Object.fromEntries(env.workers.map((w, j) => [w, picks[j]!])),
    },
  };
}

const round = (x: number): number => Math.round(x * 1e6) / 1e6;

/** A group of policies that do not read the state text: pi from a function of the live pair. */
export function functionPolicies(fns: ReadonlyArray<(t: LiveTurn, env: EpisodeEnv) => ArrayLike<number>>): PolicyGroup {
  return {
    size: fns.length,
    async probs(live, env) {
      const K = env.workers.length;
      const out = new Float64Array(live.length * K);
      live.forEach((t, i) => out.set(fns[t.policy]!(t, env), i * K));
      return out;
    },
  };
}

const oneHot = (K: number, j: number): Float64Array => {
  const p = new Float64Array(K);
  p[j] = 1;
  return p;
};

/** Baseline policies (README "Baselines"). */
export const baselinePolicies = {
  /** always worker j */
  fixed: (j: number) => (_t: LiveTurn, env: EpisodeEnv) => oneHot(env.workers.length, j),
  /** uniform over the workers */
  random: () => (_t: LiveTurn, env: EpisodeEnv) => new Float64Array(env.workers.length).fill(1 / env.workers.length),
  /**
   * the worker with the highest recorded mean reward on the current question (the lowest index on
   * ties), on every attempt: the policy that maximises the expected terminal reward when the
   * per-question means are known (each turn it maximises the chance of solving the question).
   */
  oracle: () => (t: LiveTurn, env: EpisodeEnv) => {
    const r = env.rewards[t.episode.items[t.traj.q]!]!;
    let best = 0;
    for (let j = 1; j < env.workers.length; j++) if (r[j]! > r[best]!) best = j;
    return oneHot(env.workers.length, best);
  },
};

/** The worker with the best mean recorded reward over the rows (the lowest index on ties). */
export function bestSingleWorker(rewards: readonly ArrayLike<number>[], rows: readonly number[], K: number): number {
  const sum = new Float64Array(K);
  for (const i of rows) for (let j = 0; j < K; j++) sum[j]! += rewards[i]![j]!;
  let best = 0;
  for (let j = 1; j < K; j++) if (sum[j]! > sum[best]!) best = j;
  return best;
}
