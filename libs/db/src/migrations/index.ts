// Versioned migrations, in order. Add a file `NNNN_name.ts` and list it here; never edit one
// that has shipped.
import type { Migration } from 'kysely/migration';
import * as m0001 from './0001_evaluation.ts';
import * as m0002 from './0002_router.ts';
import * as m0003 from './0003_serving.ts';
import * as m0004 from './0004_api_keys.ts';
import * as m0005 from './0005_es.ts';
import * as m0006 from './0006_chat_calls.ts';
import * as m0007 from './0007_requests.ts';
import * as m0008 from './0008_conductor.ts';
import * as m0009 from './0009_worker_descriptions.ts';
import * as m0010 from './0010_grpo.ts';
import * as m0011 from './0011_ultra_serving.ts';
import * as m0012 from './0012_responses.ts';
import * as m0013 from './0013_batches.ts';
import * as m0014 from './0014_batch_local_lines.ts';
import * as m0015u from './0015_ultra_durable.ts';
import * as m0016 from './0016_ultra_conversation_keys.ts';
import * as m0017 from './0017_scripted_workers.ts';
import * as m0018 from './0018_batch_worker_note.ts';
import * as m0019 from './0019_requests_end_user.ts';
import * as m0020 from './0020_requests_hints.ts';
import * as m0021 from './0021_requests_session.ts';

export const migrations: Record<string, Migration> = {
  '0001_evaluation': m0001,
  '0002_router': m0002,
  '0003_serving': m0003,
  '0004_api_keys': m0004,
  '0005_es': m0005,
  '0006_chat_calls': m0006,
  '0007_requests': m0007,
  '0008_conductor': m0008,
  '0009_worker_descriptions': m0009,
  '0010_grpo': m0010,
  '0011_ultra_serving': m0011,
  '0012_responses': m0012,
  '0013_batches': m0013,
  '0014_batch_local_lines': m0014,
  '0015_ultra_durable': m0015u,
  '0016_ultra_conversation_keys': m0016,
  '0017_scripted_workers': m0017,
  '0018_batch_worker_note': m0018,
  '0019_requests_end_user': m0019,
  '0020_requests_hints': m0020,
  '0021_requests_session': m0021,
};
