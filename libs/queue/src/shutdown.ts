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
