// The growth benches (bench:batch, bench:eval's BENCH_GROWTH): a figure of each process (its RSS,
// its live heap) while a run was at 10%, 50% and 100% of its work, for a run and one ten times
// larger, and the largest ratio of the large run's figure at 100% to the small one's.
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';

/** A process's largest figure (MiB) while the run was at most 10%, 50% and 100% done. */
export type Windows = { name: string; at10: number; at50: number; at100: number };

export const windows = (name: string): Windows => ({ name, at10: 0, at50: 0, at100: 0 });

/** Notes a figure taken with the run `frac` done. */
export function note(w: Windows, frac: number, mib: number): void {
  if (frac <= 0.1) w.at10 = Math.max(w.at10, mib);
  if (frac <= 0.5) w.at50 = Math.max(w.at50, mib);
  w.at100 = Math.max(w.at100, mib);
}

/** Current resident memory (VmRSS) of a live process, in MiB (0 when it is gone). */
export function rssMiB(pid: number | undefined): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

export function growthTable(title: string, small: { n: number; windows: Windows[] }, large: { n: number; windows: Windows[] }): { text: string; worst: number } {
  // 0: nothing was read in that window (no full collection yet, for the live heap)
  const fmt = (x: number) => (x > 0 ? `${x.toFixed(0)} MiB` : '-').padStart(9);
  let text = `${title.padEnd(31)} at 10%     at 50%    at 100%\n`;
  let worst = 0;
  for (const [i, p] of large.windows.entries()) {
    const q = small.windows[i]!;
    for (const [n, w] of [[small.n, q], [large.n, p]] as const) text += `${String(n).padEnd(10)} ${w.name.padEnd(18)} ${fmt(w.at10)} ${fmt(w.at50)} ${fmt(w.at100)}\n`;
    if (p.at100 > 0 && q.at100 > 0) worst = Math.max(worst, p.at100 / q.at100);
  }
  return { text, worst };
}

/**
 * Reads a process's `--trace-gc` output (its stdout) and calls `live` with the heap left after
 * each full (mark-compact) collection, in MiB: what the process still holds, where RSS keeps what
 * V8 once grew its heap to.
 */
export function onLiveHeap(stdout: Readable | null | undefined, live: (mib: number) => void): void {
  let rest = '';
  stdout?.on('data', (d: Buffer) => {
    const lines = (rest + d.toString()).split('\n');
    rest = lines.pop()!;
    for (const l of lines) {
      // "Mark-Compact 251.3 (280.1) -> 190.2 (281.0) MB, ..." (heap before -> after, MB)
      const m = /Mark-Compact.*?[\d.]+ \([\d.]+\) -> ([\d.]+) \(/.exec(l);
      if (m) live(Number(m[1]));
    }
  });
}
