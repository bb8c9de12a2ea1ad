// CPU time of this machine's processes, from /proc: a process's own, and the machine's Redis and
// Postgres servers' (the benches' CPU tables).
import { readdirSync, readFileSync } from 'node:fs';

const TICK_S = 0.01; // USER_HZ 100 on Linux
/** CPU seconds of a live process (user + system; with `children`, its reaped children's too). */
export function cpuS(pid: number | undefined, children = false): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    // fields 14-17 of stat (utime stime cutime cstime) are 12-15 after the comm field
    const t = Number(f[11]) + Number(f[12]) + (children ? Number(f[13]) + Number(f[14]) : 0);
    return t * TICK_S;
  } catch {
    return 0;
  }
}

/** CPU seconds of the machine's redis-server and postgres processes so far (Postgres: the postmaster's reaped backends too). */
export function serviceCpu(): { redis: number; postgres: number } {
  let redis = 0;
  let postgres = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let comm: string;
    try {
      comm = readFileSync(`/proc/${d}/comm`, 'utf8').trim();
    } catch {
      continue;
    }
    // with its reaped children: the backends that ended, in the postmaster's count
    if (comm === 'redis-server') redis += cpuS(Number(d));
    else if (comm === 'postgres') postgres += cpuS(Number(d), true);
  }
  return { redis, postgres };
}
