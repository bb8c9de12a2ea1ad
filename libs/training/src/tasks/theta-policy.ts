// Router policies pi_theta acting in the episode environment, many thetas at once.
//
// Each turn: the state texts of all live (candidate, episode) pairs are rendered; the distinct
// ones not yet seen are encoded by USE-lite in one pass and projected (y = x U), and kept in an
// in-memory cache by text hash (prompts come from the Postgres feature cache); then the head runs
// in one of two layouts, whichever computes fewer (candidate, row) pairs:
//   shared   one candidate-batched run of all live candidates over the union of the turn's
//            distinct rows (early turns: every candidate sees the same few texts);
//   paired   one run per candidate over its own rows (later turns: histories diverge, so the
//            union is up to P times larger than what each candidate needs).
// A row's logits do not depend on which other rows or candidates share the run (checked: bit
// for bit), and a text's features do not depend on which other texts were encoded with it (each
// is encoded alone; prompts come from Postgres), so a candidate's result is the same alone or in
// any batch, in any evaluator process with the same ONNX Runtime settings.
import { textHash, type RouterHead, type UseLiteEncoder, ProjectedFeatures } from '@fugu/router-model';
import { argmaxAt, softmaxInto } from './task-data.ts';
import { stateText, type EpisodeEnv, type LiveTurn, type PolicyGroup } from './episodes.ts';
import { MAX_PAIRS_PER_RUN } from './single-step.ts';

export type StateFeatureStats = { lookups: number; hits: number; encoded: number; encodeMs: number };

/** Projected features y of state texts by text hash: fixed entries (prompts) and a bounded cache of the rest. */
export class StateFeatures {
  readonly stats: StateFeatureStats = { lookups: 0, hits: 0, encoded: 0, encodeMs: 0 };
  private readonly fixed = new Map<string, Float32Array>();
  private readonly dynamic = new Map<string, Float32Array>();
  private readonly encoder: UseLiteEncoder;
  private readonly head: RouterHead;
  private readonly maxEntries: number;

  constructor(encoder: UseLiteEncoder, head: RouterHead, opts: { maxEntries?: number } = {}) {
    this.encoder = encoder;
    this.head = head;
    this.maxEntries = opts.maxEntries ?? 100_000;
  }

  /** A known text's y (e.g. a prompt's, from the Postgres feature cache); kept for the task's life. */
  pin(text: string, y: Float32Array): void {
    this.fixed.set(textHash(text), y);
  }

  /** y of each text, in order (equal texts get the same array); the unseen ones are encoded now. */
  async get(texts: readonly string[]): Promise<Float32Array[]> {
    const hashes = texts.map(textHash);
    const found = new Map<string, Float32Array>();
    const missing = new Map<string, string>();
    for (let i = 0; i < texts.length; i++) {
      const h = hashes[i]!;
      if (found.has(h) || missing.has(h)) continue;
      this.stats.lookups++;
      const y = this.fixed.get(h) ?? this.dynamic.get(h);
      if (y) {
        found.set(h, y);
        this.stats.hits++;
      } else missing.set(h, texts[i]!);
    }
    if (missing.size > 0) {
      const t0 = performance.now();
      const encoded = await this.encode([...missing.values()]);
      this.stats.encodeMs += performance.now() - t0;
      this.stats.encoded += missing.size;
      if (this.dynamic.size + missing.size > this.maxEntries) this.dynamic.clear();
      [...missing.keys()].forEach((h, i) => {
        found.set(h, encoded[i]!);
        this.dynamic.set(h, encoded[i]!);
      });
    }
    return hashes.map((h) => found.get(h)!);
  }

  /**
   * Encodes each text on its own (a batch of one) and projects them. USE-lite's output for a text
   * depends, in the last bits, on the other texts of its batch (padding and GEMM blocking); alone,
   * it is a function of the text only, so a candidate's result never depends on the rest of the
   * batch or on what this process cached before. On the CPU it is also faster here than padded
   * batches of state texts of mixed lengths (4.1 vs 5.9 ms per 85-token text, 2 threads).
   */
  private async encode(texts: readonly string[]): Promise<Float32Array[]> {
    const I = this.head.layer.inDim, R = this.head.layer.rank;
    const x = new Float32Array(texts.length * I);
    for (let i = 0; i < texts.length; i++) x.set((await this.encoder.encode([texts[i]!]))[0]!, i * I);
    const y = (await this.head.project(x)).y;
    return texts.map((_, i) => y.slice(i * R, (i + 1) * R));
  }
}

export type ThetaPolicyMode = 'sample' | 'argmax';

export type LayoutStats = { shared: number; paired: number; pairs: number; headMs: number };

/**
 * Candidate router policies as a PolicyGroup. mode 'sample' (the ES objective): pi_theta(.|s);
 * mode 'argmax': all mass on the largest logit (what serving does).
 */
export function thetaPolicies(head: RouterHead, features: StateFeatures, thetas: readonly Float32Array[], opts: { mode?: ThetaPolicyMode; layoutStats?: LayoutStats } = {}): PolicyGroup {
  const mode = opts.mode ?? 'sample';
  const stats = opts.layoutStats;
  // a run costs about this many (candidate, row) pairs of work on top of its pairs (session call, copies)
  const RUN_OVERHEAD_PAIRS = 64;
  return {
    size: thetas.length,
    async probs(live: readonly LiveTurn[], env: EpisodeEnv): Promise<Float64Array> {
      const K = head.workers, R = head.layer.rank;
      const ys = await features.get(live.map((t) => stateText(env, t.episode, t.traj)));
      const logits = new Float32Array(live.length * K);
      const t0 = performance.now();
      // distinct rows overall, and the live pairs of each candidate
      const rowOf = new Map<Float32Array, number>();
      const rowIdx = ys.map((y) => {
        let r = rowOf.get(y);
        if (r === undefined) rowOf.set(y, (r = rowOf.size));
        return r;
      });
      const byPolicy = new Map<number, number[]>();
      live.forEach((t, i) => {
        let l = byPolicy.get(t.policy);
        if (!l) byPolicy.set(t.policy, (l = []));
        l.push(i);
      });
      const P = byPolicy.size, N = rowOf.size;
      const shared = P * N + RUN_OVERHEAD_PAIRS <= live.length + P * RUN_OVERHEAD_PAIRS;
      if (shared) {
        const y = new Float32Array(N * R);
        for (const [arr, r] of rowOf) y.set(arr, r * R);
        const feats = new ProjectedFeatures(y, N, R);
        const policies = [...byPolicy.keys()];
        const per = Math.max(1, Math.floor(MAX_PAIRS_PER_RUN / N));
        for (let p0 = 0; p0 < policies.length; p0 += per) {
          const part = policies.slice(p0, p0 + per);
          const out = (await head.candidateLogits(feats, part.map((p) => thetas[p]!))).data; // [P', N, K]
          part.forEach((p, pi) => {
            for (const i of byPolicy.get(p)!) logits.set(out.subarray((pi * N + rowIdx[i]!) * K, (pi * N + rowIdx[i]! + 1) * K), i * K);
          });
        }
        if (stats) { stats.shared++; stats.pairs += P * N; }
      } else {
        for (const [p, idx] of byPolicy) {
          const y = new Float32Array(idx.length * R);
          idx.forEach((i, k) => y.set(ys[i]!, k * R));
          const out = (await head.candidateLogits(new ProjectedFeatures(y, idx.length, R), [thetas[p]!])).data; // [1, n, K]
          idx.forEach((i, k) => logits.set(out.subarray(k * K, (k + 1) * K), i * K));
        }
        if (stats) { stats.paired++; stats.pairs += live.length; }
      }
      if (stats) stats.headMs += performance.now() - t0;
      const probs = new Float64Array(live.length * K);
      for (let i = 0; i < live.length; i++) {
        if (mode === 'argmax') probs[i * K + argmaxAt(logits, i * K, K)] = 1;
        else softmaxInto(logits, i * K, K, probs, i * K);
      }
      return probs;
    },
  };
}
