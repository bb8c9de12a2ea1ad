// Graceful shutdown: on SIGTERM/SIGINT run the closers in order, each bounded by the time left,
// then exit. A second signal exits at once.
export type Closer = { name: string; close: (deadline: number) => Promise<void> };

export function installShutdown(closers: Closer[], opts: { timeoutMs: number; log?: (msg: string, extra?: Record<string, unknown>) => void; exit?: (code: number) => void }): () => Promise<void> {
  let closing: Promise<void> | undefined;
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  const run = (signal: string): Promise<void> => {
    if (closing) {
      opts.log?.('second signal: exiting now', { signal });
      exit(130);
      return closing;
    }
    const deadline = Date.now() + opts.timeoutMs;
    opts.log?.('shutting down', { signal, timeoutMs: opts.timeoutMs });
    closing = (async () => {
      let code = 0;
      for (const c of closers) {
        const left = Math.max(0, deadline - Date.now());
        const timedOut = await Promise.race([
          c.close(deadline).then(() => false, (e: unknown) => { opts.log?.(`closing ${c.name} failed`, { err: (e as Error).message }); code = 1; return false; }),
          new Promise<boolean>((r) => setTimeout(() => r(true), left).unref()),
        ]);
        if (timedOut) { opts.log?.(`closing ${c.name} timed out`); code = 1; }
      }
      exit(code);
    })();
    return closing;
  };
  const onTerm = () => void run('SIGTERM');
  const onInt = () => void run('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  return () => run('manual');
}

/**
 * Closes BullMQ workers: gracefully (the jobs in hand finish) until `deadline`, then by force.
 * BullMQ's close() waits for its blocking command and for QUIT on every connection; on a Redis
 * Cluster whose master died while a worker blocked on it (a failover), those never answer, and a
 * close(true) after a close() in progress only returns that close. Past the deadline the
 * workers' connections are disconnected instead (their unfinished jobs' locks expire and other
 * workers take them). Resolves true when every worker closed gracefully.
 */
export async function closeWorkers(workers: ReadonlyArray<{ close(force?: boolean): Promise<void>; disconnect(): Promise<void> }>, deadline: number): Promise<boolean> {
  const bounded = (p: Promise<unknown>, ms: number): Promise<boolean> =>
    Promise.race([p.then(() => true, () => true), new Promise<boolean>((r) => setTimeout(() => r(false), Math.max(0, ms)).unref())]);
  if (await bounded(Promise.all(workers.map((w) => w.close())), deadline - Date.now())) return true;
  await Promise.all(workers.map((w) => bounded(w.disconnect(), 2_000)));
  return false;
}
