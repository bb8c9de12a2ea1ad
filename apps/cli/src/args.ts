// Command-line argument helpers shared by the fugu commands: errors name the flag.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import path from 'node:path';
import { formatUsd, InputError, parseUsd } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';

export type Flags = Record<string, string | boolean | undefined>;

export function parse(args: string[], options: ParseArgsConfig['options']): { flags: Flags; positionals: string[] } {
  try {
    const r = parseArgs({ args, options, allowPositionals: true, strict: true });
    return { flags: r.values as Flags, positionals: r.positionals };
  } catch (e) {
    throw new InputError((e as Error).message.replace(/^TypeError( \[[A-Z_]+\])?: /, ''), { field: 'arguments' });
  }
}

export function int(v: unknown, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n)) throw new InputError(`must be a whole number, got "${String(v)}"`, { field: name });
  return n;
}

export function num(v: unknown, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new InputError(`must be a number, got "${String(v)}"`, { field: name });
  return n;
}

export function money(v: unknown, name: string): string | null {
  if (v === undefined) return null;
  try {
    return formatUsd(parseUsd(String(v)));
  } catch {
    throw new InputError(`must be an amount of USD like 12.50, got "${String(v)}"`, { field: name });
  }
}

/** Where a command writes its output by default: FUGU_HOME/<kind>/<name>. */
export const defaultOut = (config: FuguConfig, kind: string, name: string): string => path.join(config.home, kind, name);
