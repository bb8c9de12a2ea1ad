// The embedded Conductor policy's checkpoints (`conductor_checkpoints`, migration 0008): theta as
// float32 little-endian bytes, as router checkpoints. The config is kept as given (@fugu/conductor
// checks it when it loads a policy).
import type { Db } from './connection.ts';
import { bytesToFloats, floatsToBytes, type ThetaBlock } from './router-repositories.ts';

export type ConductorCheckpointRecord = {
  id: string;
  /** pool worker names in ordinal-id order */
  workers: string[];
  backboneId: string;
  featureDim: number;
  config: Record<string, unknown>;
  theta: Float32Array;
  thetaLayout: ThetaBlock[];
  training: Record<string, unknown>;
  metrics: Record<string, unknown>;
  parentId: string | null;
  createdAt?: Date;
};

export type ConductorCheckpointSummary = Pick<ConductorCheckpointRecord, 'id' | 'workers' | 'backboneId' | 'featureDim' | 'config' | 'metrics' | 'parentId' | 'createdAt'>;

export async function saveConductorCheckpoint(db: Db, c: ConductorCheckpointRecord): Promise<void> {
  await db
    .insertInto('conductor_checkpoints')
    .values({
      id: c.id, workers: JSON.stringify(c.workers), backbone_id: c.backboneId, feature_dim: c.featureDim, config: JSON.stringify(c.config),
      theta: floatsToBytes(c.theta), theta_layout: JSON.stringify(c.thetaLayout), training: JSON.stringify(c.training), metrics: JSON.stringify(c.metrics),
      parent_id: c.parentId,
    })
    .execute();
}

export async function getConductorCheckpoint(db: Db, id: string): Promise<ConductorCheckpointRecord | undefined> {
  const r = await db.selectFrom('conductor_checkpoints').selectAll().where('id', '=', id).executeTakeFirst();
  if (!r) return undefined;
  return {
    id: r.id, workers: r.workers, backboneId: r.backbone_id, featureDim: r.feature_dim, config: r.config, theta: bytesToFloats(r.theta),
    thetaLayout: r.theta_layout, training: r.training, metrics: r.metrics, parentId: r.parent_id, createdAt: r.created_at,
  };
}

/** The newest first (without theta). */
export async function listConductorCheckpoints(db: Db, limit = 50): Promise<ConductorCheckpointSummary[]> {
  const rows = await db
    .selectFrom('conductor_checkpoints')
    .select(['id', 'workers', 'backbone_id', 'feature_dim', 'config', 'metrics', 'parent_id', 'created_at'])
    .orderBy('created_at', 'desc')
    .orderBy('id', 'asc')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ id: r.id, workers: r.workers, backboneId: r.backbone_id, featureDim: r.feature_dim, config: r.config, metrics: r.metrics, parentId: r.parent_id, createdAt: r.created_at }));
}
