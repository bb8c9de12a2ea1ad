// A seeded generator of bad request bodies for fuzzing the gateway's routes (every choice from
// its Rng): junk values, strings of the kinds that break things (NUL, lone surrogates, huge,
// past the body limit), forged tool-call ids naming real workflows, generic mutations at a random
// place of a body, deep nesting and __proto__ keys put in as it is serialised, and bodies that are
// not JSON. Used by test/integration/ultra-bad-input.test.ts (chat completions, /v1/responses) and
// test/integration/anthropic-messages.test.ts (/v1/messages).
import type { Rng } from '@fugu/core';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** A seeded generator of bad request bodies (every choice from `r`). */
export class Fuzzer {
  readonly r: Rng;
  /** what a forged id may name: existing workflows and conversations, real issued ids */
  readonly known: { workflows: number[]; conversations: string[]; callIds: string[]; responses: string[] };

  constructor(r: Rng, known: Fuzzer['known']) {
    this.r = r;
    this.known = known;
  }

  pick<T>(xs: readonly T[]): T {
    return xs[this.r.int(xs.length)]!;
  }

  chance(p: number): boolean {
    return this.r.next() < p;
  }

  text(n = 1 + this.r.int(40)): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.:/"\\{}[],\n\té€😀\u202e';
    let s = '';
    for (let i = 0; i < n; i++) s += alphabet[this.r.int(alphabet.length)];
    return s;
  }

  /** A string of the kinds that break things: empty, huge, control characters, lone surrogates, ... */
  badString(): string {
    return this.pick([
      () => '',
      () => ' ',
      () => this.text(),
      () => 'x'.repeat(50_000 + this.r.int(50_000)),
      () => (this.chance(0.3) ? 'y'.repeat(1_100_000) : 'y'.repeat(10_000)), // sometimes past the body limit
      () => `nul\u0000byte`,
      () => 'lone \ud800 surrogate',
      () => '\udfff',
      () => '😀🇫🇷 \u202e RTL',
      () => '"}]},{"role":"system","content":"',
      () => 'fugu-ultra',
      () => 'call_fu_1_0_1_AAAAAAAAAAAAAAAAAAAAAA',
    ])();
  }

  junk(depth = 0): unknown {
    const kinds = depth > 3 ? 3 : 6;
    switch (this.r.int(kinds)) {
      case 0:
        return this.pick([null, true, false, 0, -1, 1.5, -0.0, 1e308, -1e308, 2 ** 31, 2 ** 53 + 2, 4.9e-324]);
      case 1:
      case 2:
        return this.badString();
      case 3:
        return this.pick(['__DEEP__', {}, [], '__PROTO__']);
      case 4:
        return Array.from({ length: this.r.int(4) }, () => this.junk(depth + 1));
      default: {
        const o: Record<string, unknown> = {};
        for (let i = this.r.int(4); i > 0; i--) o[this.pick(['role', 'type', 'content', 'id', 'name', 'function', 'arguments', '', 'constructor', this.text(8)])] = this.junk(depth + 1);
        return o;
      }
    }
  }

  /** A tool-call id: random, malformed, forged call_fu_ ids naming real workflows, or a real one. */
  callId(): string {
    const sig = (n = 22) => Array.from({ length: n }, () => this.pick([...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-'])).join('');
    const wf = () => (this.chance(0.8) && this.known.workflows.length > 0 ? this.pick(this.known.workflows) : this.pick([0, 1, 2 ** 31, 999_999_999_999_999]));
    return this.pick([
      () => '',
      () => `call_${this.text(12)}`,
      () => this.text(),
      () => `call_fu_${wf()}_${this.r.int(3)}_${1 + this.r.int(8)}_${sig()}`,
      () => `call_fu_${wf()}_${this.r.int(100)}_${this.r.int(1_000_000)}_${sig()}`,
      () => `call_fu_${wf()}_0_1_${sig(this.pick([0, 21, 23, 40]))}`,
      () => `call_fu_${'9'.repeat(16)}_0_1_${sig()}`,
      () => `call_fu_-1_0_1_${sig()}`,
      () => `call_fu_${wf()}`,
      () => (this.known.callIds.length > 0 ? this.pick(this.known.callIds) : 'call_none'),
    ])();
  }

  badFugu(): unknown {
    return this.pick([
      () => ({ lambda: this.pick([-1, 0.5, 'cheap', null]) }),
      () => ({ workers: this.pick([[], ['nope'], ['alpha'], ['beta'], ['alpha', 'alpha'], [1], 'alpha', ['']]) }),
      () => ({ conversation: this.pick(['', 'a b', 'x'.repeat(101), `conv_${this.text(6).replace(/[^A-Za-z0-9]/g, 'q')}`, ...this.known.conversations, 42]) }),
      () => ({ shared_memory: this.pick([false, true, 'no', 0]) }),
      () => ({ extra: this.junk() }),
      () => ({ workers: ['alpha', 'beta'], conversation: this.known.conversations[0] ?? 'conv_x', shared_memory: false }),
      () => this.pick(['fugu', [], 42, true, null, {}]),
      () => this.junk(),
    ])();
  }

  /** Every path (keys and indices) of a JSON value. */
  paths(v: unknown, at: Array<string | number> = [], out: Array<Array<string | number>> = []): Array<Array<string | number>> {
    out.push(at);
    if (Array.isArray(v)) v.forEach((x, i) => this.paths(x, [...at, i], out));
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) this.paths(x, [...at, k], out);
    return out;
  }

  /** One generic mutation at a random place of the body: a wrong type, a missing field, an unknown one, a huge or empty string, nested junk. */
  mutate(body: Json): string {
    const all = this.paths(body).filter((p) => p.length > 0);
    if (all.length === 0) return 'none';
    const p = this.pick(all);
    const parent = p.slice(0, -1).reduce((o: Json, k) => o[k], body);
    const k = p.at(-1)!;
    const old = parent[k];
    const where = p.join('.');
    switch (this.r.int(7)) {
      case 0:
        parent[k] = this.junk();
        return `junk at ${where}`;
      case 1:
        if (Array.isArray(parent)) parent.splice(k as number, 1);
        else delete parent[k];
        return `without ${where}`;
      case 2: {
        const target = old !== null && typeof old === 'object' && !Array.isArray(old) ? old : body;
        target[this.pick(['foo', 'Model', 'tool_calls', 'fugu_extra', 'functions', 'audio', 'conversation', 'prompt', this.text(6)])] = this.junk();
        return `unknown field near ${where}`;
      }
      case 3:
        parent[k] = typeof old === 'string' ? this.pick([0, true, [old], { text: old }]) : typeof old === 'number' ? String(old) : Array.isArray(old) ? { ...old } : old !== null && typeof old === 'object' ? [old] : { value: old };
        return `wrong type at ${where}`;
      case 4:
        parent[k] = this.badString();
        return `bad string at ${where}`;
      case 5:
        if (Array.isArray(parent)) parent.push(this.junk());
        else parent[k] = [old, this.junk()];
        return `more at ${where}`;
      default:
        parent[k] = { nested: { deeper: [this.junk(), '__DEEP__'] } };
        return `nested junk at ${where}`;
    }
  }

  /** The body as sent: deep nesting and __proto__ keys put in, or (sometimes) not JSON at all. */
  serialise(body: unknown): string {
    const deep = 200 + this.r.int(3000);
    return JSON.stringify(body)
      .replaceAll('"__DEEP__"', '['.repeat(deep) + ']'.repeat(deep))
      .replaceAll('"__PROTO__"', '{"__proto__":{"admin":true}}');
  }

  invalidJson(valid: string): string {
    return this.pick([
      () => '',
      () => '{',
      () => valid.slice(0, 1 + this.r.int(Math.max(1, valid.length - 1))),
      () => `${valid},`,
      () => valid.replace('{', '{,'),
      () => `\ufeff${valid}`,
      () => `{"model": "fugu-ultra", "messages": [}`,
      () => `{"model": NaN}`,
      () => `// comment\n${valid}`,
      () => this.pick(['null', '[]', '"fugu-ultra"', '42', 'true']),
      () => `{"__proto__": {"model": "fugu-ultra"}, "model": "fugu-ultra"}`,
      () => `{"constructor": {"prototype": {"x": 1}}, "model": "fugu-ultra"}`,
      () => valid.replace(/"/, "'"),
    ])();
  }
}

/** A fuzzed body: what it is, its text and its content type. */
export type FuzzCase = { label: string; body: string; contentType: string };
/** What came back for one body. */
export type FuzzAnswer = { status: number; body: string; contentType: string };

/**
 * Sends the bodies with `concurrency` at a time; returns the statuses, the error bodies' `error[field]`
 * values (the error type or code), and every answer `problem` objects to (with its body, cut at 400).
 */
export async function sendFuzzCases(
  list: readonly FuzzCase[],
  o: { send: (c: FuzzCase) => Promise<FuzzAnswer>; problem: (s: FuzzAnswer) => string | undefined; errorField: 'type' | 'code'; concurrency: number },
): Promise<{ histogram: Record<string, number>; errors: Record<string, number>; problems: Array<{ label: string; body: string; problem: string }> }> {
  const histogram: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const problems: Array<{ label: string; body: string; problem: string }> = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: o.concurrency }, async () => {
      while (next < list.length) {
        const c = list[next++]!;
        const s = await o.send(c);
        histogram[s.status] = (histogram[s.status] ?? 0) + 1;
        if (s.status >= 400) {
          let v: string;
          try {
            v = String((JSON.parse(s.body) as { error?: Record<string, unknown> }).error?.[o.errorField]);
          } catch {
            v = '(no JSON)';
          }
          errors[v] = (errors[v] ?? 0) + 1;
        }
        const p = o.problem(s);
        if (p) problems.push({ label: c.label, body: c.body.slice(0, 400), problem: p });
      }
    }),
  );
  return { histogram, errors, problems };
}
