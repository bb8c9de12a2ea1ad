// Router deployments: the checkpoint a deployment (default `fugu`) serves.
import { InputError } from '@fugu/core';
import type { Db } from './connection.ts';

export type RouterDeployment = { name: string; checkpointId: string; publishedAt: Date | null };

/** Points a deployment at a stored checkpoint (created or replaced); an unknown checkpoint is an InputError. */
export async function publishDeployment(db: Db, name: string, checkpointId: string): Promise<RouterDeployment> {
  const exists = await db.selectFrom('router_checkpoints').select('id').where('id', '=', checkpointId).executeTakeFirst();
  if (!exists) throw new InputError(`no router checkpoint "${checkpointId}"`, { field: 'checkpoint' });
  const row = await db
    .insertInto('router_deployments')
    .values({ name, checkpoint_id: checkpointId, published_at: new Date() })
    .onConflict((oc) => oc.column('name').doUpdateSet((eb) => ({ checkpoint_id: eb.ref('excluded.checkpoint_id'), published_at: eb.ref('excluded.published_at') })))
    .returningAll()
    .executeTakeFirstOrThrow();
  return { name: row.name, checkpointId: row.checkpoint_id, publishedAt: row.published_at };
}

export async function getDeployment(db: Db, name: string): Promise<RouterDeployment | undefined> {
  const row = await db.selectFrom('router_deployments').selectAll().where('name', '=', name).executeTakeFirst();
  return row && { name: row.name, checkpointId: row.checkpoint_id, publishedAt: row.published_at };
}
