// Test helpers (`@fugu/serving/testing`): anchor checkpoints (see @fugu/router-model/testing),
// and the same saved in Postgres.
import { saveCheckpoint, type CheckpointRecord, type Db } from '@fugu/db';
import { anchorCheckpoint, type AnchorCheckpointOptions } from '@fugu/router-model/testing';

export { anchorCheckpoint, type AnchorCheckpointOptions, type AnchorCheckpointRecord } from '@fugu/router-model/testing';

/** anchorCheckpoint, saved in Postgres (router_checkpoints); returns the record. */
export async function saveAnchorCheckpoint(db: Db, opts: AnchorCheckpointOptions): Promise<CheckpointRecord> {
  const ckpt = await anchorCheckpoint(opts);
  await saveCheckpoint(db, ckpt);
  return ckpt;
}
