import { cp, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InputError } from '@fugu/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadUseLite } from './load.ts';
import { USE_LITE_CONSTANTS, USE_LITE_DIMS, USE_LITE_WEIGHT_NAMES, useLiteParams } from './params.ts';
import {
  backboneIdOf,
  decodeWeightsManifest,
  loadUseLiteWeights,
  resolveUseLiteDir,
  type TfjsWeightGroup,
  type UseLiteFiles,
  type WeightMap,
} from './weights.ts';

let files: UseLiteFiles;
let tmp: string;

beforeAll(async () => {
  files = await loadUseLiteWeights();
  tmp = await mkdtemp(join(tmpdir(), 'use-lite-weights-'));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** Copy the installed model directory into a fresh temp folder. */
async function copyModelDir(name: string): Promise<string> {
  const dir = join(tmp, name);
  await cp(resolveUseLiteDir(), dir, { recursive: true });
  return dir;
}

describe('loadUseLiteWeights on the installed package', () => {
  it('finds the package directory with model.json, the shards and vocab.json', () => {
    expect(files.dir).toMatch(/@energetic-ai[/\\]model-embeddings-en[/\\]dist$/);
    expect(files.modelJson.modelTopology.node).toHaveLength(317);
  });

  it('decodes all 61 weights, one per Const node of the graph, none quantized', () => {
    expect(files.weights.size).toBe(61);
    const consts = files.modelJson.modelTopology.node.filter((n) => n.op === 'Const').map((n) => n.name);
    expect(new Set(consts)).toEqual(new Set(files.weights.keys()));
    const specs = files.modelJson.weightsManifest.flatMap((g) => g.weights);
    expect(specs.filter((w) => w.quantization)).toEqual([]);
    for (const w of specs) {
      const t = files.weights.get(w.name)!;
      expect(t.shape).toEqual(w.shape);
      expect(t.data.length).toBe(w.shape.reduce((a, b) => a * b, 1));
      expect(t.data).toBeInstanceOf(w.dtype === 'float32' ? Float32Array : Int32Array);
    }
  });

  it('has the documented shapes and constants (useLiteParams checks them all)', () => {
    const p = useLiteParams(files.weights);
    expect([p.embeddings.rows, p.embeddings.cols]).toEqual([8002, 256]);
    expect(p.layers.map((l) => [l.inDim, l.headDim, l.attentionScale])).toEqual([
      [256, 64, 0.125],
      [512, 128, Math.fround(1 / Math.sqrt(128))],
    ]);
    expect([p.layers[0].qkvKernel.rows, p.layers[0].qkvKernel.cols]).toEqual([256, 768]);
    expect([p.layers[0].outKernel.rows, p.layers[0].outKernel.cols]).toEqual([256, 512]);
    expect([p.layers[0].residualKernel!.rows, p.layers[0].residualKernel!.cols]).toEqual([256, 512]);
    expect(p.layers[1].residualKernel).toBeUndefined();
    expect([p.layers[1].qkvKernel.rows, p.layers[1].qkvKernel.cols]).toEqual([512, 1536]);
    expect([p.tanhKernel.rows, p.tanhKernel.cols]).toEqual([512, 512]);
    const scalar = (name: string) => files.weights.get(name)!.data[0];
    expect(scalar(USE_LITE_WEIGHT_NAMES.layerNormEpsilon)).toBe(USE_LITE_CONSTANTS.layerNormEpsilon);
    expect(scalar(USE_LITE_WEIGHT_NAMES.l2Epsilon)).toBe(USE_LITE_CONSTANTS.l2Epsilon);
    expect(scalar(USE_LITE_WEIGHT_NAMES.maxSeqLen)).toBe(USE_LITE_DIMS.maxSeqLen);
  });

  it('stores the timing-signal inverse timescales exp(-i ln(1e4)/127) as float32', () => {
    const inv = useLiteParams(files.weights).invTimescales;
    expect(inv.length).toBe(128);
    for (let i = 0; i < 128; i++) expect(Math.abs(inv[i]! - Math.exp((-i * Math.log(1e4)) / 127))).toBeLessThan(1e-7);
  });

  it('has the graph the spec describes (op histogram of the 317 nodes)', () => {
    const ops: Record<string, number> = {};
    for (const n of files.modelJson.modelTopology.node) ops[n.op] = (ops[n.op] ?? 0) + 1;
    expect(ops).toEqual({
      Add: 17, BatchMatMul: 4, BiasAdd: 10, Cast: 6, ConcatV2: 12, Const: 61, Conv2D: 4, Cos: 1, ExpandDims: 12,
      GatherNd: 4, GatherV2: 11, Greater: 1, Less: 2, LogicalNot: 1, MatMul: 6, Max: 1, Maximum: 3, Mean: 8, Mul: 14,
      Pack: 12, Placeholder: 2, Prod: 8, Range: 1, RealDiv: 1, Relu: 2, Reshape: 21, Rsqrt: 5, ScatterNd: 5, Shape: 21,
      Sin: 1, Slice: 2, Softmax: 2, SparseToDense: 1, SplitV: 2, Square: 5, Squeeze: 6, StridedSlice: 24, Sub: 4, Sum: 3,
      Tanh: 1, Transpose: 8, Where: 2,
    });
  });
});

describe('backbone id', () => {
  it('is 16 hex digits, stable across loads and across a copy of the directory', async () => {
    expect(files.backboneId).toMatch(/^[0-9a-f]{16}$/);
    expect((await loadUseLiteWeights()).backboneId).toBe(files.backboneId);
    const dir = await copyModelDir('copy');
    const copy = await loadUseLite(dir);
    expect(copy.dir).toBe(dir);
    expect(copy.backboneId).toBe(files.backboneId);
  });

  it('changes when the vocabulary changes (and with it the tokenizer)', async () => {
    const dir = await copyModelDir('vocab-changed');
    const vocab = JSON.parse(await readFile(join(dir, 'vocab.json'), 'utf8')) as Array<[string, number]>;
    vocab[100]![1] = -1;
    await writeFile(join(dir, 'vocab.json'), JSON.stringify(vocab));
    expect((await loadUseLiteWeights(dir)).backboneId).not.toBe(files.backboneId);
  });

  it('frames each file by its length, so moving bytes between files changes it', () => {
    const a = new Uint8Array([1, 2, 3]);
    expect(backboneIdOf([a, new Uint8Array([4])])).not.toBe(backboneIdOf([new Uint8Array([1, 2]), new Uint8Array([3, 4])]));
    expect(backboneIdOf([a])).toBe(backboneIdOf([new Uint8Array([1, 2, 3])]));
  });
});

describe('weight decoding', () => {
  const f32 = (xs: number[]) => new Uint8Array(new Float32Array(xs).buffer);
  const concat = (...parts: Uint8Array[]) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let o = 0;
    for (const p of parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  };

  it('dequantizes uint8, uint16 (q * scale + min) and float16 weights as TF.js does', () => {
    const manifest: TfjsWeightGroup[] = [
      {
        paths: ['g'],
        weights: [
          { name: 'plain', shape: [2], dtype: 'float32' },
          { name: 'u8', shape: [3], dtype: 'float32', quantization: { dtype: 'uint8', scale: 0.5, min: -1 } },
          { name: 'u16', shape: [2], dtype: 'float32', quantization: { dtype: 'uint16', scale: 0.25, min: 2 } },
          { name: 'i8', shape: [2], dtype: 'int32', quantization: { dtype: 'uint8', scale: 1.5, min: 0 } },
          { name: 'f16', shape: [4], dtype: 'float32', quantization: { dtype: 'float16' } },
        ],
      },
    ];
    const bytes = concat(
      f32([1.5, -2]),
      new Uint8Array([0, 1, 255]),
      new Uint8Array(new Uint16Array([0, 1000]).buffer),
      new Uint8Array([1, 3]),
      // 1.0, -2.0, 0.5, 65504 (max half)
      new Uint8Array(new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7bff]).buffer),
    );
    const w: WeightMap = decodeWeightsManifest(manifest, [bytes], 'm.json');
    expect(Array.from(w.get('plain')!.data)).toEqual([1.5, -2]);
    expect(Array.from(w.get('u8')!.data)).toEqual([-1, -0.5, 126.5]);
    expect(Array.from(w.get('u16')!.data)).toEqual([2, 252]);
    expect(w.get('i8')!.data).toEqual(new Int32Array([2, 5])); // round(1.5), round(4.5)
    expect(Array.from(w.get('f16')!.data)).toEqual([1, -2, 0.5, 65504]);
  });

  it('rejects unsupported dtypes and missing quantization parameters, naming the weight', () => {
    const one = (spec: TfjsWeightGroup['weights'][number], bytes: Uint8Array) =>
      decodeWeightsManifest([{ paths: ['g'], weights: [spec] }], [bytes], 'm.json');
    expect(() => one({ name: 's', shape: [1], dtype: 'string' }, new Uint8Array(4))).toThrow(/m\.json, field weight s/);
    expect(() => one({ name: 'q', shape: [1], dtype: 'float32', quantization: { dtype: 'uint8' } }, new Uint8Array(1))).toThrow(
      /uint8 quantization needs scale and min/,
    );
    expect(() => one({ name: 'h', shape: [1], dtype: 'int32', quantization: { dtype: 'float16' } }, new Uint8Array(2))).toThrow(
      /unsupported quantization float16 of a int32 weight/,
    );
  });

  it('reports shards that are too short or too long for the manifest', () => {
    const group: TfjsWeightGroup[] = [{ paths: ['a', 'b'], weights: [{ name: 'w', shape: [2, 2], dtype: 'float32' }] }];
    expect(() => decodeWeightsManifest(group, [new Uint8Array(12)], 'm.json')).toThrow(/weight w needs bytes 0\.\.16.*\(a, b\) hold 12/);
    expect(() => decodeWeightsManifest(group, [new Uint8Array(20)], 'm.json')).toThrow(/hold 20 bytes but its weights use 16/);
  });

  it('names the file when a shard is truncated or model.json is broken', async () => {
    const dir = await copyModelDir('broken');
    await truncate(join(dir, 'group1-shard7of7'), 1000);
    await expect(loadUseLiteWeights(dir)).rejects.toThrow(InputError);
    await expect(loadUseLiteWeights(dir)).rejects.toThrow(/model\.json, field weightsManifest\[0\]/);
    await writeFile(join(dir, 'model.json'), '{"modelTopology": {}}');
    await expect(loadUseLiteWeights(dir)).rejects.toThrow(/model\.json, field modelTopology: not a TF\.js graph model/);
    await expect(loadUseLiteWeights(join(tmp, 'missing'))).rejects.toThrow(/missing\/model\.json: cannot read/);
  });

  it('useLiteParams names a missing or misshapen weight', () => {
    const copy: WeightMap = new Map(files.weights);
    copy.delete(USE_LITE_WEIGHT_NAMES.tanhBias);
    expect(() => useLiteParams(copy)).toThrow(/weight missing: module\/Encoder_en\/hidden_layers\/tanh_layer_0\/bias/);
    copy.set(USE_LITE_WEIGHT_NAMES.tanhBias, { data: new Float32Array(3), shape: [3] });
    expect(() => useLiteParams(copy)).toThrow(/has shape \[3\], expected \[512\]/);
  });
});
