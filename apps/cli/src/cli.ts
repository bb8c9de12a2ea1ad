// What every command module shares: the option kinds (parsed where they are declared, so `--help`
// and the parser read one definition; a bad value is an InputError naming the flag), the lazily
// loaded configuration, the exit code an action sets, `--json` output and Ctrl-C handling.
import path from 'node:path';
import { Option, type Command } from 'commander';
import { formatUsd, InputError, parseUsd } from '@fugu/core';
import { loadConfig, type FuguConfig } from '@fugu/config';

/** Exit codes: 0 ok, 1 failure, 2 bad usage or input, 3 a run that ended not completed, 130 interrupted. */
export const EXIT = { ok: 0, failure: 1, usage: 2, incomplete: 3, interrupted: 130 } as const;

/** What a command module gets from main: the configuration (read on first use, not for --help). */
export type Cli = { config(): FuguConfig };

/** A command group registers its commands on the program (one module per group, see commands/index.ts). */
export type CommandGroup = (program: Command, cli: Cli) => void;

let exitCode: number = EXIT.ok;
export const getExitCode = (): number => exitCode;

/** The action of a command: resolves to its exit code (void = 0). */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<number | void>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    exitCode = (await fn(...args)) ?? EXIT.ok;
  };
}

// ---------------------------------------------------------------------------------------------
// Values: errors name the flag

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

export const list = (v: string): string[] => v.split(',').map((s) => s.trim()).filter(Boolean);

// ---------------------------------------------------------------------------------------------
// Option kinds

export const named = (flags: string, description: string, parse: (v: string, flag: string) => unknown, dflt?: unknown): Option => {
  const o = new Option(flags, description);
  const flag = o.long ?? flags;
  o.argParser((v: string) => parse(v, flag));
  if (dflt !== undefined) o.default(dflt);
  return o;
};

/** `--flag <n>`: a whole number. */
export const intOption = (flags: string, description: string, dflt?: number): Option => named(flags, description, (v, f) => int(v, f, 0), dflt);
/** `--flag <x>`: a finite number. */
export const numOption = (flags: string, description: string, dflt?: number): Option => named(flags, description, (v, f) => num(v, f, 0), dflt);
/** `--flag <usd>`: an amount of USD, normalised ("12.5" -> "12.500000000000"). */
export const usdOption = (flags: string, description: string): Option => named(flags, description, (v, f) => money(v, f));
/** `--flag <a,b>`: a comma list. */
export const listOption = (flags: string, description: string): Option => named(flags, description, (v) => list(v));
/** `--flag <n|auto>`: a count of local processes, or auto (some when none is connected). */
export const countOption = (flags: string, description: string): Option =>
  named(flags, description, (v, f) => {
    if (v === 'auto') return 'auto';
    const n = int(v, f, 0);
    if (n < 0) throw new InputError('must be >= 0 or auto', { field: f });
    return n;
  }, 'auto');
/** `--flag <v>`: one of the choices (listed by --help). */
export const choiceOption = (flags: string, description: string, choices: readonly string[], dflt?: string): Option => {
  const o = new Option(flags, description).choices(choices);
  const flag = o.long ?? flags;
  const allowed = `${choices.slice(0, -1).join(', ')} or ${choices.at(-1)}`;
  o.argParser((v: string) => {
    if (!choices.includes(v)) throw new InputError(`must be ${allowed}, got "${v}"`, { field: flag });
    return v;
  });
  return dflt === undefined ? o : o.default(dflt);
};
/** `--json`: one JSON document on stdout, nothing else there. */
export const jsonOption = (): Option => new Option('--json', 'print one JSON document on stdout (nothing else goes there)');

// ---------------------------------------------------------------------------------------------
// Output

/** One JSON document on stdout (bigints as decimal strings, typed arrays as arrays). */
export function printJson(value: unknown): void {
  process.stdout.write(
    `${JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : ArrayBuffer.isView(v) && !(v instanceof DataView) ? Array.from(v as Float32Array) : v), 2)}\n`,
  );
}

/**
 * Rows as text columns, each as wide as its widest cell (the header's included), two spaces
 * apart; `right` names the columns aligned right (numbers). One line per row, no trailing blanks.
 */
export function columns(rows: readonly (readonly string[])[], right: readonly number[] = [], indent = ''): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) => `${indent}${r.map((c, i) => (right.includes(i) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd()}\n`).join('');
}

/** Where a command writes its output by default: FUGU_HOME/<kind>/<name>. */
export const defaultOut = (config: FuguConfig, kind: string, name: string): string => path.join(config.home, kind, name);

/** Ctrl-C once: abort (a run pauses and stays resumable); twice: exit now. */
export function interruptSignal(what = 'pausing the run'): AbortSignal {
  const ac = new AbortController();
  process.on('SIGINT', () => {
    if (ac.signal.aborted) process.exit(EXIT.interrupted);
    process.stderr.write(`\ninterrupted: ${what} (Ctrl-C again to exit at once)\n`);
    ac.abort();
  });
  return ac.signal;
}

export const configOnce = (): Cli => {
  let config: FuguConfig | undefined;
  return { config: () => (config ??= loadConfig()) };
};
