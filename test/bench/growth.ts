// The growth benches (bench:batch, bench:eval's BENCH_GROWTH): a figure of each process (its RSS,
// its live heap) while a run was at 10%, 50% and 100% of its work, for a run and one ten times
// larger, and the largest ratio of the large run's figure at 100% to the small one's.
import { readFileSync } from 'node:fs';

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
  const fmt = (x: number) => `${x.toFixed(0)} MiB`.padStart(9);
  let text = `${title.padEnd(31)} at 10%     at 50%    at 100%\n`;
  let worst = 0;
  for (const [i, p] of large.windows.entries()) {
    const q = small.windows[i]!;
    for (const [n, w] of [[small.n, q], [large.n, p]] as const) text += `${String(n).padEnd(10)} ${w.name.padEnd(18)} ${fmt(w.at10)} ${fmt(w.at50)} ${fmt(w.at100)}\n`;
    worst = Math.max(worst, p.at100 / Math.max(1, q.at100));
  }
  return { text, worst };
}
