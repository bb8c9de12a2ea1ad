// Router, routingText and RouterThreadPool on the real USE-lite backbone, with anchor checkpoints
// (testing.ts): each text goes to the worker of its nearest anchor.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError } from '@fugu/core';
import { loadRouterModel, type RouterModel } from '@fugu/router-model';
import { Router, routingText } from './router.ts';
import { RouterThreadPool } from './thread-pool.ts';
import { anchorCheckpoint } from './testing.ts';
import { RouterUnavailableError } from './errors.ts';
import type { CheckpointRecord } from '@fugu/db';

const ANCHORS = {
  alpha: ['What is the integral of x squared?', 'Solve the equation 3x + 5 = 20.'],
  beta: ['Who was the first president of the United States?', 'What is the capital of Australia?'],
  gamma: ['Write a Python function that reverses a string.', 'Fix the bug in this JavaScript loop.'],
};
const TEXTS = [
  'Compute the derivative of sin(x) times x',
  'Which king ruled France in 1700?',
  'Implement quicksort in JavaScript',
  'What is 17 times 23?',
  'Name the longest river in Africa.',
  'Write a SQL query that counts rows per day.',
];
const EXPECTED = ['alpha', 'beta', 'gamma', 'alpha', 'beta', 'gamma'];

let home: string;
let model: RouterModel;
let ckpt: CheckpointRecord;
let soft: CheckpointRecord;

beforeAll(async () => {
  home = await mkdtemp(path.join(tmpdir(), 'fugu-serving-'));
  model = await loadRouterModel(home, 3);
  ckpt = await anchorCheckpoint({ model, anchors: ANCHORS, id: 'anchors-sharp' });
  // a soft one (probabilities away from 0 and 1) for comparing probabilities
  soft = await anchorCheckpoint({ model, anchors: ANCHORS, id: 'anchors-soft', scale: 4 });
}, 120_000);
afterAll(async () => {
  await model?.release();
  await rm(home, { recursive: true, force: true });
});

describe('routingText', () => {
  it('is the user text alone for one user message, with or without a system message', () => {
    expect(routingText([{ role: 'user', content: 'What is 2 + 2?' }])).toBe('What is 2 + 2?');
    expect(routingText([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'What is 2 + 2?' }] }])).toBe('What is 2 + 2?');
  });

  it('is the whole transcript, newest turn first, for a conversation', () => {
    const text = routingText([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'What is the weather in Paris?' },
      { role: 'assistant', content: [{ type: 'tool-call', id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' }] },
      { role: 'tool', content: [{ type: 'tool-result', toolCallId: 'c1', content: '18C, sunny' }] },
      { role: 'user', content: 'And write a poem about it.' },
    ]);
    expect(text).toBe(['user: And write a poem about it.', 'tool: 18C, sunny', 'assistant: get_weather({"city":"Paris"})', 'user: What is the weather in Paris?', 'system: Be brief.'].join('\n'));
  });

  it('names messages when there is nothing to route on', () => {
    expect(() => routingText([])).toThrow(/messages/);
    expect(() => routingText([{ role: 'user', content: '   ' }])).toThrow(InputError);
  });
});

describe('Router', () => {
  it('sends each text to the worker of its nearest anchor, within the allowed pool and cost-aware', async () => {
    const router = new Router(model, ckpt);
    const ds = await router.decide(TEXTS);
    expect(ds.map((d) => d.worker)).toEqual(EXPECTED);
    expect(ds[0]!.workers).toEqual(['alpha', 'beta', 'gamma']);
    expect(ds[0]!.checkpointId).toBe('anchors-sharp');
    for (const d of ds) expect(d.probs.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
    const only = await router.decide(TEXTS.slice(0, 2), { allowed: ['gamma', 'beta'] });
    expect(['beta', 'gamma']).toContain(only[0]!.worker);
    expect(only[1]!.worker).toBe('beta');
    expect(only[0]!.probs[0]).toBe(0);
    // prices: alpha is the dearest; a large lambda picks the cheapest allowed worker
    const priced = await anchorCheckpoint({ model, anchors: ANCHORS, prices: { alpha: { input: '10', output: '30' }, beta: { input: '1', output: '2' }, gamma: { input: '0.5', output: '1' } } });
    const cheap = await new Router(model, priced).decide(TEXTS.slice(0, 2), { lambda: 100 });
    expect(cheap.map((d) => d.worker)).toEqual(['gamma', 'gamma']);
  });

  it('settles each request on its own: an empty text or an unknown worker fails that one only', async () => {
    const router = new Router(model, ckpt);
    const s = await router.decideSettled([TEXTS[0]!, '', TEXTS[1]!], [{}, {}, { allowed: ['nobody'] }]);
    expect(s[0]!.ok).toBe(true);
    expect(!s[1]!.ok && s[1]!.error).toBeInstanceOf(InputError);
    expect(!s[2]!.ok && s[2]!.error.message).toMatch(/unknown worker nobody/);
  });

  it('refuses a checkpoint trained on another backbone, naming it', () => {
    expect(() => new Router(model, { ...ckpt, id: 'other', backboneId: 'deadbeef' })).toThrow(/checkpoint other was trained on backbone deadbeef/);
  });
});

describe('RouterThreadPool', () => {
  it('decides as the Router does in the main thread (same worker, close probabilities)', async () => {
    const pool = await RouterThreadPool.create({ home, threads: 2, maxBatch: 4, maxWaitMs: 1, executionProvider: 'cpu', checkpoint: soft });
    try {
      const direct = await new Router(model, soft).decide(TEXTS);
      const texts = [...TEXTS, ...TEXTS, ...TEXTS];
      const viaPool = await Promise.all(texts.map((text) => pool.route({ text })));
      viaPool.forEach((d, i) => {
        const ref = direct[i % TEXTS.length]!;
        expect(d.worker).toBe(ref.worker);
        expect(d.checkpointId).toBe('anchors-soft');
        d.probs.forEach((p, j) => expect(p).toBeCloseTo(ref.probs[j]!, 4));
      });
      // they were soft: not all mass on one worker
      expect(Math.max(...viaPool[0]!.probs)).toBeLessThan(0.99);
      const s = pool.stats();
      expect(s.requests).toBe(texts.length);
      expect(s.maxBatchSeen).toBeLessThanOrEqual(4);
      // a bad request fails alone, with the InputError naming its field
      const [bad, good] = await Promise.allSettled([pool.route({ text: TEXTS[0]!, allowed: ['nobody'] }), pool.route({ text: TEXTS[1]! })]);
      expect(bad.status === 'rejected' && bad.reason).toBeInstanceOf(InputError);
      expect(good.status === 'fulfilled' && good.value.worker).toBe('beta');
    } finally {
      await pool.close();
    }
  });

  it('is not ready without a checkpoint, and refuses one from another backbone', async () => {
    const pool = await RouterThreadPool.create({ home, threads: 1, executionProvider: 'cpu' });
    try {
      expect(pool.ready).toBe(false);
      await expect(pool.route({ text: 'hello' })).rejects.toBeInstanceOf(RouterUnavailableError);
      await expect(pool.swap({ ...ckpt, backboneId: 'deadbeef' })).rejects.toThrow(/backbone deadbeef/);
      await pool.swap(ckpt);
      expect(pool.ready).toBe(true);
      expect((await pool.route({ text: TEXTS[2]! })).worker).toBe('gamma');
    } finally {
      await pool.close();
    }
  });

  it('swaps checkpoints under continuous load: every request resolves, later ones carry the new checkpoint', async () => {
    // the new checkpoint swaps alpha's and gamma's anchors: decisions change visibly
    const swapped = await anchorCheckpoint({ model, anchors: { alpha: ANCHORS.gamma, beta: ANCHORS.beta, gamma: ANCHORS.alpha }, id: 'anchors-swapped' });
    const pool = await RouterThreadPool.create({ home, threads: 2, maxBatch: 8, maxWaitMs: 1, executionProvider: 'cpu', checkpoint: ckpt });
    try {
      const results: Array<{ i: number; worker: string; checkpointId: string }> = [];
      let stop = false;
      let issued = 0;
      const client = async () => {
        while (!stop) {
          const i = issued++;
          const d = await pool.route({ text: TEXTS[i % TEXTS.length]! });
          results.push({ i, worker: d.worker, checkpointId: d.checkpointId });
        }
      };
      const clients = Array.from({ length: 12 }, client);
      while (results.length < 60) await new Promise((r) => setTimeout(r, 5));
      await pool.swap(swapped);
      const swappedAt = issued;
      const target = results.length + 60;
      while (results.length < target) await new Promise((r) => setTimeout(r, 5));
      stop = true;
      await Promise.all(clients);
      expect(results.length).toBe(issued);
      const ids = new Set(results.map((r) => r.checkpointId));
      expect(ids).toEqual(new Set(['anchors-sharp', 'anchors-swapped']));
      for (const r of results) {
        // requests issued after swap() resolved carry the new checkpoint
        if (r.i >= swappedAt) expect(r.checkpointId).toBe('anchors-swapped');
        const want = EXPECTED[r.i % TEXTS.length]!;
        const flip: Record<string, string> = { alpha: 'gamma', gamma: 'alpha', beta: 'beta' };
        expect(r.worker).toBe(r.checkpointId === 'anchors-sharp' ? want : flip[want]);
      }
    } finally {
      await pool.close();
    }
  });
});
