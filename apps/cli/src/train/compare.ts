// `fugu train compare`: the held-out end-to-end table of the ES stage. Router checkpoints (the SFT
// one, ES results) beside the best single worker, random and the oracle, every method on the same
// episodes and random streams of each seed (compareOnEpisodes in @fugu/training).
import { writeFile } from 'node:fs/promises';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { compareOnEpisodes, ES_DEFAULTS, formatComparison } from '@fugu/training';
import { int, parse } from '../args.ts';
import { openContext } from '@fugu/evaluation';

const OPTIONS = {
  checkpoints: { type: 'string' },
  split: { type: 'string' },
  episodes: { type: 'string' },
  questions: { type: 'string' },
  'turn-budget': { type: 'string' },
  seeds: { type: 'string' },
  argmax: { type: 'boolean' },
  out: { type: 'string' },
} as const;

export async function cmdTrainCompare(config: FuguConfig, args: string[]): Promise<number> {
  const { flags, positionals } = parse(args, OPTIONS);
  if (positionals.length) throw new InputError(`unexpected argument "${positionals[0]}"`, { field: 'arguments' });
  const checkpoints = typeof flags.checkpoints === 'string' ? flags.checkpoints.split(',').map((s) => s.trim()).filter(Boolean) : [];
  if (checkpoints.length === 0) throw new InputError('give the router checkpoints to compare: --checkpoints SFT,ES,...', { field: '--checkpoints' });
  const split = (flags.split as string | undefined) ?? 'test';
  if (split !== 'test' && split !== 'val' && split !== 'train') throw new InputError(`must be test, val or train, got "${split}"`, { field: '--split' });
  const seeds = typeof flags.seeds === 'string' ? flags.seeds.split(',').map((s, i) => int(s.trim(), `--seeds[${i}]`, 0)) : [0, 1, 2];
  const d = ES_DEFAULTS.episodes;
  const ctx = await openContext({ redis: false, config });
  try {
    const cmp = await compareOnEpisodes({
      db: ctx.db,
      home: config.home,
      checkpoints,
      split,
      seeds,
      episodes: int(flags.episodes, '--episodes', 500),
      questions: int(flags.questions, '--questions', d.questions),
      turnBudget: int(flags['turn-budget'], '--turn-budget', d.turnBudget),
      modes: flags.argmax ? ['sample', 'argmax'] : ['sample'],
    });
    const table = formatComparison(cmp);
    process.stdout.write(table);
    if (typeof flags.out === 'string') {
      await writeFile(flags.out, table);
      process.stderr.write(`wrote ${flags.out}\n`);
    }
  } finally {
    await ctx.close();
  }
  return 0;
}
