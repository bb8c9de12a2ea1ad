// Router: a loaded RouterModel + one checkpoint (theta, worker names, prices) -> routing decisions,
// and routingText, the text the router scores for a conversation.
import { InputError, messageText, type ChatMessage } from '@fugu/core';
import { getCheckpoint, type CheckpointRecord, type Db } from '@fugu/db';
import { RouterPolicy, type Decision, type WorkerPrices, type RouterModel } from '@fugu/router-model';

/**
 * The text the router scores for a conversation.
 *
 * - One user message (with or without a system message before it): the user's text alone,
 *   exactly what the router was trained on (a dataset prompt); the system message is left out.
 * - Several turns: the whole transcript, NEWEST turn first, one `role: text` line per message
 *   ("user: ...\nassistant: ...\ntool: ...\n...\nsystem: ..."), because the USE-lite backbone
 *   keeps only the first 128 tokens: the turn being answered must come first, and older context
 *   fills what is left. Each turn can so go to a different worker.
 *
 * Text parts are joined; a tool call is `name(arguments)`; images are left out. Messages without
 * text are skipped. A conversation without any text is an InputError naming `messages`.
 */
export function routingText(messages: readonly ChatMessage[]): string {
  if (!Array.isArray(messages) || messages.length === 0) throw new InputError('messages: give at least one message to route', { field: 'messages' });
  const turns = messages.filter((m) => m.role !== 'system');
  let text: string;
  if (turns.length === 1 && turns[0]!.role === 'user') {
    text = messageText(turns[0]!);
  } else {
    text = [...messages]
      .reverse()
      .map((m) => ({ role: m.role, text: messageText(m).trim() }))
      .filter((m) => m.text.length > 0)
      .map((m) => `${m.role}: ${m.text}`)
      .join('\n');
  }
  if (text.trim().length === 0) throw new InputError('messages: the conversation has no text to route on', { field: 'messages' });
  return text;
}

/** Per-request options of a decision. */
export type DecideOptions = {
  /** restrict the choice to these workers (default: all of the checkpoint's) */
  allowed?: readonly string[];
  /** cost weight >= 0 (default 0) */
  lambda?: number;
  /** draw from pi (seeded) instead of the argmax; lambda must be 0 */
  sample?: boolean;
  seed?: number;
};

export type RouterDecision = {
  /** the chosen worker and its index in `workers` (head order) */
  worker: string;
  index: number;
  workers: string[];
  /** pi restricted to the allowed set (0 elsewhere) */
  probs: number[];
  /** pi_j - lambda * normalised price_j; -Infinity outside the allowed set */
  scores: number[];
  checkpointId: string;
};

export type SettledDecision = { ok: true; decision: RouterDecision } | { ok: false; error: Error };

/** The part of a checkpoint the router needs (what travels to worker threads). */
export type RouterCheckpoint = Pick<CheckpointRecord, 'id' | 'backboneId' | 'workers' | 'theta'>;

export class Router {
  readonly model: RouterModel;
  readonly checkpoint: RouterCheckpoint;
  readonly workers: string[];
  private readonly prices: Record<string, WorkerPrices>;

  /** A checkpoint whose backbone differs from the model's is an InputError naming it. */
  constructor(model: RouterModel, checkpoint: RouterCheckpoint) {
    if (checkpoint.backboneId !== model.backboneId) {
      throw new InputError(`checkpoint ${checkpoint.id} was trained on backbone ${checkpoint.backboneId}, not ${model.backboneId}`, { field: 'checkpoint' });
    }
    this.workers = checkpoint.workers.map((w) => w.name);
    const head = model.headFor(this.workers.length);
    if (checkpoint.theta.length !== head.thetaSize) {
      throw new InputError(`checkpoint ${checkpoint.id}: theta has ${checkpoint.theta.length} floats, the head for ${this.workers.length} workers needs ${head.thetaSize}`, { field: 'checkpoint' });
    }
    this.model = model;
    this.checkpoint = checkpoint;
    this.prices = Object.fromEntries(checkpoint.workers.map((w) => [w.name, { inputPerMTok: w.inputPerMTok, outputPerMTok: w.outputPerMTok }]));
  }

  /** The same model with another checkpoint. */
  withCheckpoint(checkpoint: RouterCheckpoint): Router {
    return new Router(this.model, checkpoint);
  }

  /** Decisions for texts; `opts` is one for all or one per text. Throws the first error. */
  async decide(texts: readonly string[], opts: DecideOptions | readonly DecideOptions[] = {}): Promise<RouterDecision[]> {
    const settled = await this.decideSettled(texts, opts);
    return settled.map((s) => {
      if (!s.ok) throw s.error;
      return s.decision;
    });
  }

  /**
   * Decisions for texts, each settled on its own: an empty text or a bad option (unknown allowed
   * worker, negative lambda) fails that request only, not its batch.
   */
  async decideSettled(texts: readonly string[], opts: DecideOptions | readonly DecideOptions[] = {}): Promise<SettledDecision[]> {
    const optsOf = (i: number): DecideOptions => (Array.isArray(opts) ? ((opts as readonly DecideOptions[])[i] ?? {}) : (opts as DecideOptions));
    if (Array.isArray(opts) && opts.length !== texts.length) throw new InputError(`decide: ${opts.length} option sets for ${texts.length} texts`, { field: 'opts' });
    const out: SettledDecision[] = new Array<SettledDecision>(texts.length);
    // one policy per distinct option set (a sampling policy's draws go on in text order)
    const policies = new Map<string, RouterPolicy | Error>();
    const policyOf = (o: DecideOptions): RouterPolicy | Error => {
      const key = JSON.stringify([o.allowed ?? null, o.lambda ?? 0, Boolean(o.sample), o.seed ?? 0]);
      let p = policies.get(key);
      if (!p) {
        try {
          p = new RouterPolicy({
            workers: this.workers,
            ...(o.allowed && { allowed: o.allowed }),
            mode: o.sample ? 'sample' : 'argmax',
            lambda: o.lambda ?? 0,
            prices: this.prices,
            seed: o.seed ?? 0,
          });
        } catch (e) {
          p = e as Error;
        }
        policies.set(key, p);
      }
      return p;
    };
    const rows: number[] = [];
    const tokens: Int32Array[] = [];
    texts.forEach((text, i) => {
      const p = policyOf(optsOf(i));
      if (p instanceof Error) out[i] = { ok: false, error: p };
      else if (typeof text !== 'string') out[i] = { ok: false, error: new InputError(`text ${i} is not a string (${typeof text})`, { field: 'text' }) };
      else {
        const ids = this.model.encoder.tokenize(text);
        if (ids.length === 0) out[i] = { ok: false, error: new InputError('text is empty: it has no tokens to route on', { field: 'text' }) };
        else {
          rows.push(i);
          tokens.push(ids);
        }
      }
    });
    if (rows.length === 0) return out;
    const feats = await this.model.encoder.encodeTokens(tokens);
    const D = this.model.encoder.dims.pooled;
    const x = new Float32Array(rows.length * D);
    feats.forEach((f, r) => x.set(f, r * D));
    const K = this.workers.length;
    const logits = (await this.model.headFor(K).logits(x, this.checkpoint.theta)).data;
    rows.forEach((i, r) => {
      const d: Decision = (policyOf(optsOf(i)) as RouterPolicy).decide(logits.subarray(r * K, (r + 1) * K));
      out[i] = {
        ok: true,
        decision: { worker: d.worker, index: d.index, workers: this.workers, probs: Array.from(d.probs), scores: Array.from(d.scores), checkpointId: this.checkpoint.id },
      };
    });
    return out;
  }
}

/** A stored checkpoint by id; an InputError naming it when there is none. */
export async function loadCheckpoint(db: Db, id: string): Promise<CheckpointRecord> {
  const ckpt = await getCheckpoint(db, id);
  if (!ckpt) throw new InputError(`no router checkpoint "${id}"`, { field: 'checkpoint' });
  return ckpt;
}
