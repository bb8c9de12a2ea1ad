// Progress of long commands: a bar on a terminal (calls done, failed, rate, ETA), a plain line
// every few seconds elsewhere (CI logs).
import cliProgress from 'cli-progress';

export type Progress = { update(done: number, failed: number, note?: string): void; stop(): void };

/** 42s, 3m05s, 1h20m; ? when not finite */
export function fmtDuration(s: number): string {
  if (!Number.isFinite(s) || s < 0) return '?';
  if (s < 60) return `${Math.round(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

export function createProgress(opts: { total: number; label: string; unit?: string; stream?: NodeJS.WriteStream; intervalMs?: number }): Progress {
  const unit = opts.unit ?? 'calls';
  const stream = opts.stream ?? process.stderr;
  const started = Date.now();
  let firstDone: number | undefined;
  let last = { done: 0, failed: 0, at: started };
  const rate = (done: number): number => {
    const base = firstDone ?? 0;
    const secs = (Date.now() - started) / 1000;
    return secs > 0 ? (done - base) / secs : 0;
  };
  const payload = (done: number, failed: number, note = '') => {
    const r = rate(done);
    return { failed, rate: r.toFixed(0), remaining: fmtDuration(r > 0 ? (opts.total - done) / r : NaN), note };
  };
  if (stream.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format: `${opts.label} {bar} {percentage}% | {value}/{total} ${unit} | failed {failed} | {rate}/s | ETA {remaining} {note}`,
        stream,
        hideCursor: true,
        etaBuffer: 50,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(opts.total, 0, payload(0, 0));
    return {
      update(done, failed, note) {
        firstDone ??= done;
        bar.update(done, payload(done, failed, note));
      },
      stop: () => bar.stop(),
    };
  }
  const every = opts.intervalMs ?? 5_000;
  return {
    update(done, failed, note) {
      firstDone ??= done;
      const now = Date.now();
      if (now - last.at < every && done < opts.total) return;
      last = { done, failed, at: now };
      const p = payload(done, failed, note);
      stream.write(`${opts.label} ${done}/${opts.total} ${unit} (${((100 * done) / Math.max(1, opts.total)).toFixed(1)}%) | failed ${failed} | ${p.rate}/s | ETA ${p.remaining}${note ? ` | ${note}` : ''}\n`);
    },
    stop() {},
  };
}

/**
 * The clock of an iterative run (GRPO, ES): each iteration's whole time (rollouts, update and
 * commit: from the end of the one before), the time since the command started, and the
 * remaining iterations' time at this session's mean.
 */
export function iterationClock(totalIterations: number, now: () => number = () => performance.now()): (index: number) => string {
  const start = now();
  let last = start, done = 0;
  return (index) => {
    const t = now();
    const took = t - last;
    last = t;
    done++;
    const remaining = Math.max(0, totalIterations - (index + 1));
    return `${(took / 1000).toFixed(1)} s  elapsed ${fmtDuration((t - start) / 1000)}  ETA ${remaining === 0 ? 'done' : fmtDuration((remaining * (t - start)) / done / 1000)}`;
  };
}
