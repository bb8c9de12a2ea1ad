// Router checkpoints and the backbone feature cache. Float vectors are stored as float32
// little-endian bytes (bytea).
import { endianness } from 'node:os';
import type { Db } from './connection.ts';
import type { CheckpointStage } from './schema.ts';

if (endianness() !== 'LE') throw new Error('fugu stores float32 vectors little-endian and expects a little-endian host');

export function floatsToBytes(a: Float32Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

export function bytesToFloats(b: Uint8Array): Float32Array {
  // copy: a Buffer from pg need not be 4-byte aligned
  const out = new Float32Array(b.byteLength / 4);
  new Uint8Array(out.buffer).set(b);
  return out;
}

export type ThetaBlock = { name: string; offset: number; shape: number[] };

export type CheckpointRecord = {
  id: string;
  stage: CheckpointStage;
  backboneId: string;
  backbone: Record<string, unknown>;
  workers: Array<{ name: string; inputPerMTok: string; outputPerMTok: string }>;
  theta: Float32Array;
  thetaLayout: ThetaBlock[];
  tau: number | null;
  training: Record<string, unknown>;
  metrics: Record<string, unknown>;
  parentId: string | null;
  createdAt?: Date;
};

export async function saveCheckpoint(db: Db, c: CheckpointRecord): Promise<void> {
  await db
    .insertInto('router_checkpoints')
    .values({
      id: c.id, stage: c.stage, backbone_id: c.backboneId, backbone: JSON.stringify(c.backbone), workers: JSON.stringify(c.workers),
      theta: floatsToBytes(c.theta), theta_layout: JSON.stringify(c.thetaLayout), tau: c.tau, training: JSON.stringify(c.training),
      metrics: JSON.stringify(c.metrics), parent_id: c.parentId,
    })
    .execute();
}

export async function getCheckpoint(db: Db, id: string): Promise<CheckpointRecord | undefined> {
  const r = await db.selectFrom('router_checkpoints').selectAll().where('id', '=', id).executeTakeFirst();
  if (!r) return undefined;
  return {
    id: r.id, stage: r.stage, backboneId: r.backbone_id, backbone: r.backbone, workers: r.workers, theta: bytesToFloats(r.theta),
    thetaLayout: r.theta_layout, tau: r.tau, training: r.training, metrics: r.metrics, parentId: r.parent_id, createdAt: r.created_at,
  };
}

export async function listCheckpoints(db: Db, limit = 50): Promise<Array<Pick<CheckpointRecord, 'id' | 'stage' | 'backboneId' | 'parentId' | 'metrics' | 'createdAt'> & { workers: string[] }>> {
  const rows = await db
    .selectFrom('router_checkpoints')
    .select(['id', 'stage', 'backbone_id', 'parent_id', 'metrics', 'created_at', 'workers'])
    .orderBy('created_at', 'desc')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ id: r.id, stage: r.stage, backboneId: r.backbone_id, parentId: r.parent_id, metrics: r.metrics, createdAt: r.created_at, workers: r.workers.map((w) => w.name) }));
}

/** Cached features of the given texts (by hash); missing ones are absent from the map. */
export async function getFeatures(db: Db, backboneId: string, textHashes: readonly string[]): Promise<Map<string, Float32Array>> {
  const out = new Map<string, Float32Array>();
  for (let i = 0; i < textHashes.length; i += 5_000) {
    const rows = await db
      .selectFrom('router_features')
      .select(['text_hash', 'data'])
      .where('backbone_id', '=', backboneId)
      .where('text_hash', 'in', textHashes.slice(i, i + 5_000) as string[])
      .execute();
    for (const r of rows) out.set(r.text_hash, bytesToFloats(r.data));
  }
  return out;
}

export async function putFeatures(db: Db, backboneId: string, entries: ReadonlyArray<{ textHash: string; data: Float32Array }>): Promise<void> {
  for (let i = 0; i < entries.length; i += 1_000) {
    const chunk = entries.slice(i, i + 1_000);
    await db
      .insertInto('router_features')
      .values(chunk.map((e) => ({ backbone_id: backboneId, text_hash: e.textHash, dim: e.data.length, data: floatsToBytes(e.data) })))
      .onConflict((oc) => oc.columns(['backbone_id', 'text_hash']).doNothing())
      .execute();
  }
}
