// Placeholder: `fugu ultra policy ...` (the embedded Conductor policy) is written on another branch.
import type { Command } from 'commander';
import type { Cli } from '../cli.ts';

export function registerUltraPolicy(_u: Command, _c: Cli): void {}
