// What the checkpoint command groups (`fugu router`, `fugu ultra policy`) share: a Postgres-only
// context per command, and the pair of commands that move a checkpoint to one JSON file and back.
import type { Command } from 'commander';
import type { FuguConfig } from '@fugu/config';
import type { Db } from '@fugu/db';
import { openContext } from '@fugu/evaluation';
import { action, type Cli } from './cli.ts';

/** Runs fn with the database (no Redis), closed afterwards. */
export async function withDb<T>(config: FuguConfig, fn: (db: Db) => Promise<T>): Promise<T> {
  const ctx = await openContext({ redis: false, config });
  try {
    return await fn(ctx.db);
  } finally {
    await ctx.close();
  }
}

export type CheckpointFile = {
  /** what a checkpoint is called in the descriptions: 'a checkpoint', 'a policy checkpoint' */
  noun: string;
  /** the description of the <checkpoint> argument */
  checkpointArg: string;
  /** the command that writes the files import reads ('router export') */
  exportCommand: string;
  /** writes checkpoint `id` to the file `out` */
  exportTo: (db: Db, id: string, out: string) => Promise<void>;
  /** stores the file's checkpoint and returns its id */
  importFrom: (db: Db, file: string) => Promise<string>;
};

/**
 * `<group> export <checkpoint> [--out <file>]` (default `<checkpoint>.json`; prints what it wrote)
 * and `<group> import <file>` (prints the stored id).
 */
export function checkpointFileCommands(group: Command, cli: Cli, c: CheckpointFile): void {
  group
    .command('export')
    .description(`${c.noun} to one JSON file`)
    .argument('<checkpoint>', c.checkpointArg)
    .option('--out <file>', 'default: <checkpoint>.json')
    .action(action(async (id: string, f: { out?: string }) => withDb(cli.config(), async (db) => {
      const out = f.out ?? `${id}.json`;
      await c.exportTo(db, id, out);
      process.stdout.write(`wrote ${id} to ${out}\n`);
    })));

  group
    .command('import')
    .description(`${c.noun} from a file written by ${c.exportCommand} (prints its id)`)
    .argument('<file>', 'the JSON file')
    .action(action(async (file: string) => withDb(cli.config(), async (db) => void process.stdout.write(`${await c.importFrom(db, file)}\n`))));
}
