// The growth benches' table (bench:batch, bench:eval's BENCH_GROWTH): a figure of each process
// while a run was at 10%, 50% and 100% of its work, for a run and one ten times larger, and the
// largest ratio of the large run's figure at 100% to the small one's.

/** A process's largest figure (MiB) while the run was at most 10%, 50% and 100% done. */
export type Windows = { name: string; at10: number; at50: number; at100: number };

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
