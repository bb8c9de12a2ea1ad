// The router model with the embedded default backbone: USE-lite (frozen, features cached) and
// a RouterHead whose SVF layer is the backbone's final 512x512 tanh layer. The SVD is computed
// once per backbone and stored with the model in FUGU_HOME/models/<backbone id>/.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { checkSvfLayer, loadUseLite, RouterHead, svfLayerFromDense, UseLiteEncoder, type SvfLayer } from '@fugu/router-model';

export const USE_LITE_BACKBONE = { kind: 'use-lite', adapted: ['tanh_layer_0'] } as const;

export type RouterModel = {
  backboneId: string;
  encoder: UseLiteEncoder;
  head: RouterHead;
  release(): Promise<void>;
};

function encodeLayer(l: SvfLayer): Buffer {
  const header = Buffer.from(JSON.stringify({ inDim: l.inDim, outDim: l.outDim, rank: l.rank, eps: l.eps }));
  const len = Buffer.alloc(4);
  len.writeUInt32LE(header.length);
  const pad = Buffer.alloc((4 - ((4 + header.length) % 4)) % 4);
  return Buffer.concat([len, header, pad, ...[l.U, l.S, l.Vt, l.b].map((a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength))]);
}

function decodeLayer(buf: Buffer): SvfLayer {
  const n = buf.readUInt32LE(0);
  const h = JSON.parse(buf.subarray(4, 4 + n).toString()) as { inDim: number; outDim: number; rank: number; eps: number };
  let off = 4 + n + ((4 - ((4 + n) % 4)) % 4);
  const take = (count: number): Float32Array => {
    const out = new Float32Array(count);
    new Uint8Array(out.buffer).set(buf.subarray(off, off + count * 4));
    off += count * 4;
    return out;
  };
  const layer = { ...h, U: take(h.inDim * h.rank), S: take(h.rank), Vt: take(h.rank * h.outDim), b: take(h.outDim) };
  checkSvfLayer(layer);
  return layer;
}

/** The SVF layer of the tanh layer: read from the model folder, or computed (SVD) and stored there. */
export async function useLiteSvfLayer(home: string, backbone: Awaited<ReturnType<typeof loadUseLite>>): Promise<SvfLayer> {
  const file = path.join(home, 'models', backbone.backboneId, 'svf-tanh_layer_0.bin');
  try {
    return decodeLayer(await readFile(file));
  } catch {
    const layer = svfLayerFromDense(backbone.params.tanhKernel, backbone.params.tanhBias);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, encodeLayer(layer));
    return layer;
  }
}

export async function loadRouterModel(home: string, workers: number): Promise<RouterModel> {
  const backbone = await loadUseLite();
  const encoder = await UseLiteEncoder.create({ backbone });
  const head = new RouterHead(await useLiteSvfLayer(home, backbone), workers);
  return {
    backboneId: encoder.backboneId,
    encoder,
    head,
    async release() {
      await head.release();
      encoder.release();
    },
  };
}
