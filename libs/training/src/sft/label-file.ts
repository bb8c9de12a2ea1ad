// Routing data from a label file (`fugu labels` output: one JSON line per item with its prompt,
// the workers, their mean rewards), checked line by line, and against the worker pool the
// router will choose from: the file's workers must be the pool's, in the pool's order.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import { estimateTokens, InputError, tokenCost, type WorkerPool } from '@fugu/core';
import type { RoutingData } from '../tasks/index.ts';

const lineSchema = z.object({
  item: z.string().min(1),
  task: z.string().min(1),
  split: z.string().nullable().optional(),
  prompt: z.string().min(1, 'prompt must not be empty'),
  workers: z.array(z.string().min(1)).min(1),
  rewards: z.array(z.number().min(0).max(1)),
}).passthrough();

export async function routingDataFromLabels(file: string, pool: WorkerPool): Promise<RoutingData> {
  const poolNames = pool.workers.map((w) => w.name);
  const data: RoutingData = { runId: `labels:${file}`, workers: pool.workers.map((w) => ({ name: w.name, inputPerMTok: w.prices.inputPerMTok, outputPerMTok: w.prices.outputPerMTok })), items: [], rewards: [], costs: [] };
  let lineNo = 0;
  try {
    for await (const text of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
      lineNo++;
      if (!text.trim()) continue;
      let raw: unknown;
      try {
        raw = JSON.parse(text);
      } catch (e) {
        throw new InputError(`not valid JSON (${(e as Error).message})`, { file, line: lineNo });
      }
      const r = lineSchema.safeParse(raw);
      if (!r.success) {
        const issue = r.error.issues[0]!;
        throw new InputError(issue.message, { file, line: lineNo, field: issue.path.join('.') });
      }
      const l = r.data;
      if (l.workers.length !== poolNames.length || l.workers.some((w, j) => w !== poolNames[j])) {
        throw new InputError(`the label file's workers [${l.workers.join(', ')}] differ from the pool's [${poolNames.join(', ')}]`, { file, line: lineNo, field: 'workers' });
      }
      if (l.rewards.length !== l.workers.length) throw new InputError(`${l.rewards.length} rewards for ${l.workers.length} workers`, { file, line: lineNo, field: 'rewards' });
      data.items.push({ id: l.item, task: l.task, prompt: l.prompt, ...(l.split && { sourceSplit: l.split }) });
      data.rewards.push(Float32Array.from(l.rewards));
      // no recorded cost in a label file: the replay estimate (prompt tokens in, 256 out)
      data.costs.push(Float32Array.from(pool.workers.map((w) => Number(tokenCost(estimateTokens(l.prompt), 256, w.prices)) / 1e12)));
    }
  } catch (e) {
    if (e instanceof InputError) throw e;
    throw new InputError(`cannot read the label file (${(e as Error).message})`, { file });
  }
  if (data.items.length === 0) throw new InputError('the label file has no items', { file });
  return data;
}
