// `fugu router export/import`: a checkpoint as one JSON file (theta as base64 float32 LE), so a
// trained router moves between databases and machines. Import checks the file before storing.
import { writeFile } from 'node:fs/promises';
import { z } from 'zod';
import { InputError } from '@fugu/core';
import { readJsonFile } from '@fugu/datasets';
import { bytesToFloats, floatsToBytes, getCheckpoint, saveCheckpoint, type Db } from '@fugu/db';

const FORMAT = 'fugu-router-checkpoint/1';

const fileSchema = z.object({
  format: z.literal(FORMAT),
  id: z.string().min(1),
  stage: z.enum(['init', 'sft', 'es', 'import']),
  backboneId: z.string().min(1),
  backbone: z.record(z.string(), z.unknown()),
  workers: z.array(z.object({ name: z.string().min(1), inputPerMTok: z.string(), outputPerMTok: z.string() })).min(1),
  theta: z.string().min(1),
  thetaLayout: z.array(z.object({ name: z.string(), offset: z.number().int().nonnegative(), shape: z.array(z.number().int().positive()) })),
  tau: z.number().nullable(),
  training: z.record(z.string(), z.unknown()),
  metrics: z.record(z.string(), z.unknown()),
  parentId: z.string().nullable(),
});

export async function exportCheckpoint(db: Db, id: string, out: string): Promise<void> {
  const c = await getCheckpoint(db, id);
  if (!c) throw new InputError(`no router checkpoint "${id}"`, { field: 'checkpoint' });
  const { createdAt: _createdAt, theta, ...rest } = c;
  await writeFile(out, `${JSON.stringify({ format: FORMAT, ...rest, theta: floatsToBytes(theta).toString('base64') }, null, 1)}\n`);
}

/** Stores the file's checkpoint (under a new id when `id` is taken) and returns its id. */
export async function importCheckpoint(db: Db, file: string): Promise<string> {
  const f = await readJsonFile(file, fileSchema);
  const theta = bytesToFloats(Buffer.from(f.theta, 'base64'));
  const size = f.thetaLayout.reduce((s, b) => Math.max(s, b.offset + b.shape.reduce((a, x) => a * x, 1)), 0);
  if (theta.length !== size) throw new InputError(`theta has ${theta.length} values, its layout needs ${size}`, { file, field: 'theta' });
  const parent = f.parentId && (await getCheckpoint(db, f.parentId)) ? f.parentId : null;
  const id = (await getCheckpoint(db, f.id)) ? `${f.id}_import_${Date.now().toString(36)}` : f.id;
  await saveCheckpoint(db, { ...f, id, theta, parentId: parent, training: { ...f.training, importedFrom: file, originalParent: f.parentId } });
  return id;
}
