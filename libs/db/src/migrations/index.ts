// Versioned migrations, in order. Add a file `NNNN_name.ts` and list it here; never edit one
// that has shipped.
import type { Migration } from 'kysely/migration';
import * as m0001 from './0001_evaluation.ts';
import * as m0002 from './0002_router.ts';

export const migrations: Record<string, Migration> = {
  '0001_evaluation': m0001,
  '0002_router': m0002,
};
