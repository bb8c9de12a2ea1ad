#!/usr/bin/env node
// `fugu`: the command line of the platform. Run as `npx fugu <command>` (the bin wrapper),
// `node apps/cli/src/main.ts <command>` or `npm run fugu -- <command>`. Exit codes: 0 ok,
// 1 failure, 2 bad usage or input, 3 a run that ended not completed, 130 interrupted.
import { InputError } from '@fugu/core';
import { startTracing, type Tracing, type WarnLog } from '@fugu/telemetry';
import { EXIT, getExitCode } from './cli.ts';
import { buildProgram, commandPath, type UsageError } from './program.ts';

/** The exit code of a commander error (help and version are not errors), after saying why. */
function usageExit(e: UsageError): number {
  if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || (e.code === 'commander.help' && e.exitCode === 0)) return EXIT.ok;
  if (e.code === 'commander.help') return EXIT.usage; // a command group without its subcommand: help went to stderr
  const where = e.command ? commandPath(e.command) : 'fugu';
  const text = e.message.replace(/^error: /, '').replace(/\n+/g, ' ');
  if (e.code === 'commander.unknownCommand') {
    const name = /'([^']*)'/.exec(text)?.[1] ?? '';
    const group = where === 'fugu' ? '' : `${where.slice('fugu '.length)} `;
    process.stderr.write(`fugu: unknown ${group}command "${name}"${text.includes('Did you mean') ? ` (${text.replace(/^.*\((Did you mean[^)]*)\).*$/, '$1')})` : ''}; ${where} --help lists them\n`);
  } else {
    process.stderr.write(`fugu: ${text} (${where} --help shows the usage)\n`);
  }
  return EXIT.usage;
}

/** The SDK's warnings (a collector that cannot be reached) as lines on stderr: stdout may be --json. */
const stderrLog: WarnLog = { warn: (_fields, message) => void process.stderr.write(`fugu: ${message}\n`) };

/** Sends the spans still buffered, for at most 5 s (a collector that does not answer does not hold the exit). */
async function flushTracing(tracing: Tracing | undefined): Promise<void> {
  if (!tracing) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([tracing.shutdown().catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, 5_000)))]);
  clearTimeout(timer);
}

async function main(argv: string[]): Promise<number> {
  let tracing: Tracing | undefined;
  try {
    // OTEL_EXPORTER_OTLP_ENDPOINT set: the jobs a command adds carry its trace context (local workers it starts trace too)
    tracing = await startTracing('fugu-cli', process.env, stderrLog);
    await buildProgram().parseAsync(argv, { from: 'user' });
    return getExitCode();
  } catch (e) {
    if (e instanceof Error && typeof (e as UsageError).code === 'string' && (e as UsageError).code.startsWith('commander.')) return usageExit(e as UsageError);
    process.stderr.write(`fugu: ${(e as Error).message}\n`);
    if (process.env.FUGU_DEBUG && e instanceof Error) process.stderr.write(`${e.stack}\n`);
    return e instanceof InputError ? EXIT.usage : EXIT.failure;
  } finally {
    await flushTracing(tracing);
  }
}

// stdout to a pipe is written asynchronously: exit once what was written has been flushed (a bare
// process.exit cut `--json` output at 64 KiB)
main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
  process.stdout.write('', () => process.exit(code));
});
