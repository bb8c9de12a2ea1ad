// The `fugu` command tree (commander): every command's options are declared once, and both the
// parser and `--help` read them. Building it loads no configuration and touches no service.
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { configOnce, type Cli } from './cli.ts';
import { COMMAND_GROUPS } from './commands/index.ts';

export const VERSION: string = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** A commander error, with the command that raised it (for messages that name it). */
export type UsageError = Error & { code: string; exitCode: number; command?: Command };

export function buildProgram(cli: Cli = configOnce()): Command {
  const program = new Command('fugu')
    .description('fugu: learned LLM orchestration on a distributed batch platform')
    .version(VERSION, '-V, --version', 'the version of fugu')
    .helpCommand('help [command]', 'help for a command')
    .showSuggestionAfterError(true)
    // main prints every error itself, as one line, and picks the exit code
    .configureOutput({ outputError: () => {} })
    .addHelpText(
      'after',
      '\nEvery command takes --help. Configuration comes from the environment (and FUGU_CONFIG); see README.md.\n' +
        'Exit codes: 0 ok, 1 failure, 2 bad usage or input, 3 a run that ended not completed, 130 interrupted.',
    );
  for (const register of COMMAND_GROUPS) register(program, cli);
  for (const c of allCommands(program)) {
    c.exitOverride((e) => {
      throw Object.assign(e, { command: c });
    });
  }
  return program;
}

/** The command and all its subcommands, depth first. */
export function allCommands(c: Command): Command[] {
  return [c, ...c.commands.flatMap(allCommands)];
}

/** `fugu router eval` for the router eval command. */
export function commandPath(c: Command): string {
  const names: string[] = [];
  for (let x: Command | null = c; x; x = x.parent) names.unshift(x.name());
  return names.join(' ');
}
