// Streaming enqueue: jobs come from an (async) iterable and go to Redis with addBulk in chunks,
// so memory stays flat however large the batch. A chunk whose write fails on a connection error
// is retried (job ids make a retried add harmless).
import type { JobsOptions, Queue } from 'bullmq';

export type BulkJob<T> = { queue: string; name: string; data: T; opts?: JobsOptions };

export async function enqueueStream<T>(
  queues: (name: string) => Queue,
  jobs: AsyncIterable<BulkJob<T>> | Iterable<BulkJob<T>>,
  opts: { chunkSize?: number; onChunk?: (added: number) => void | Promise<void>; signal?: AbortSignal; retries?: number } = {},
): Promise<number> {
  const chunkSize = opts.chunkSize ?? 1000;
  let total = 0;
  let chunk: BulkJob<T>[] = [];
  const flush = async (): Promise<void> => {
    const byQueue = new Map<string, BulkJob<T>[]>();
    for (const j of chunk) {
      const list = byQueue.get(j.queue);
      if (list) list.push(j);
      else byQueue.set(j.queue, [j]);
    }
    for (const [name, list] of byQueue) {
      const payload = list.map((j) => ({ name: j.name, data: j.data, ...(j.opts && { opts: j.opts }) }));
      for (let attempt = 0; ; attempt++) {
        try {
          await queues(name).addBulk(payload);
          break;
        } catch (e) {
          if (attempt >= (opts.retries ?? 30) || opts.signal?.aborted) throw e;
          await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** attempt, 5_000)));
        }
      }
    }
    total += chunk.length;
    await opts.onChunk?.(chunk.length);
    chunk = [];
  };
  for await (const j of jobs) {
    if (opts.signal?.aborted) break;
    chunk.push(j);
    if (chunk.length >= chunkSize) await flush();
  }
  if (chunk.length > 0 && !opts.signal?.aborted) await flush();
  return total;
}
