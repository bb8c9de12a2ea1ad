// `--split-by prompt | dataset`: the one split scheme every command that splits items takes
// (@fugu/datasets assignSplit). No parser default where the scheme comes from what the command
// reads (a router checkpoint, a policy's run): there a scheme given that differs is refused.
import type { Option } from 'commander';
import { SPLIT_SCHEMES } from '@fugu/datasets';
import { choiceOption } from './cli.ts';

const HELP = "the train/val/test split: prompt (by unique prompt, seeded 80/10/10) or dataset (the dataset's own split field: its test items, its val items or a seeded 1/9 of its train part)";

/** The flag; `dflt`: the scheme when the command reads nothing that has one (shown in the help). */
export const splitByOption = (what = 'default prompt'): Option => choiceOption('--split-by <scheme>', `${HELP} (${what})`, SPLIT_SCHEMES);
