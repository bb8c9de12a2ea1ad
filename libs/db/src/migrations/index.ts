// Versioned migrations, in order. Add a file `NNNN_name.ts` and list it here; never edit one
// that has shipped.
import type { Migration } from 'kysely/migration';
import * as m0001 from './0001_evaluation.ts';

export const migrations: Record<string, Migration> = {
  '0001_evaluation': m0001,
};
