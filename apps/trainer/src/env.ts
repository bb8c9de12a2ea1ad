// Settings of the trainer processes that are not in @fugu/config (ES-only, read here).
import { ConfigError } from '@fugu/core';

export function envInt(env: Record<string, string | undefined>, name: string, dflt: number, min = 0): number {
  const v = env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new ConfigError(`${name}=${v}: must be a whole number >= ${min}`, name);
  return n;
}
