// The router model with the embedded default backbone: USE-lite (frozen, features cached) and
// a RouterHead whose SVF layer is the backbone's final 512x512 tanh layer. The SVD is computed
// once per backbone and stored with the model in FUGU_HOME/models/<backbone id>/.
//
// Options (serving passes them; training and evaluation keep the defaults): the ONNX Runtime
// execution provider ('cpu' | 'cuda' | 'auto', see execution.ts), threads per session, and
// spinning (off for serving: idle threads sleep instead of burning a core).
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { loadUseLite, UseLiteEncoder, type UseLiteBackbone } from '../backbones/use-lite/index.ts';
import { RouterHead, svfLayerFromDense, checkSvfLayer, type SvfLayer } from '../head/index.ts';
import type { SessionOptions } from '../onnx/index.ts';
import { resolveExecutionProvider, type ExecutionProviderSetting, type ResolvedExecution } from './execution.ts';

export const USE_LITE_BACKBONE = { kind: 'use-lite', adapted: ['tanh_layer_0'] } as const;

export type RouterModel = {
  backboneId: string;
  encoder: UseLiteEncoder;
  /** the head for the `workers` given to loadRouterModel */
  head: RouterHead;
  /** a head for K workers (same SVF layer and session options; created once per K) */
  headFor(workers: number): RouterHead;
  /** the execution provider in use and why */
  execution: ResolvedExecution;
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
export async function useLiteSvfLayer(home: string, backbone: UseLiteBackbone): Promise<SvfLayer> {
  const file = path.join(home, 'models', backbone.backboneId, 'svf-tanh_layer_0.bin');
  try {
    return decodeLayer(await readFile(file));
  } catch {
    const layer = svfLayerFromDense(backbone.params.tanhKernel, backbone.params.tanhBias);
    await mkdir(path.dirname(file), { recursive: true });
    // write then rename: a concurrent reader (another process or thread) never sees half a file
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, encodeLayer(layer));
    await rename(tmp, file);
    return layer;
  }
}

export type RouterModelOptions = {
  /** default 'cpu' (the CLI's training and evaluation); serving passes its configuration */
  executionProvider?: ExecutionProviderSetting | ResolvedExecution;
  /** ONNX Runtime threads inside one op, per session; default: one per core */
  intraOpNumThreads?: number;
  /** default: ONNX Runtime's (on); serving turns it off */
  allowSpinning?: boolean;
  /** an already loaded backbone / SVF layer (skip reading them again) */
  backbone?: UseLiteBackbone;
  svfLayer?: SvfLayer;
};

export async function loadRouterModel(home: string, workers: number, opts: RouterModelOptions = {}): Promise<RouterModel> {
  const execution = typeof opts.executionProvider === 'object' ? opts.executionProvider : resolveExecutionProvider(opts.executionProvider ?? 'cpu');
  const session: Omit<SessionOptions, 'label'> = {
    executionProviders: execution.executionProviders,
    ...(opts.intraOpNumThreads !== undefined && { intraOpNumThreads: opts.intraOpNumThreads }),
    ...(opts.allowSpinning !== undefined && { allowSpinning: opts.allowSpinning }),
  };
  const backbone = opts.backbone ?? (await loadUseLite());
  const encoder = await UseLiteEncoder.create({
    backbone,
    session,
    ...(opts.intraOpNumThreads !== undefined && { intraOpNumThreads: opts.intraOpNumThreads }),
  });
  const layer = opts.svfLayer ?? (await useLiteSvfLayer(home, backbone));
  const heads = new Map<number, RouterHead>();
  const headFor = (k: number): RouterHead => {
    let h = heads.get(k);
    if (!h) {
      h = new RouterHead(layer, k, { session });
      heads.set(k, h);
    }
    return h;
  };
  return {
    backboneId: encoder.backboneId,
    encoder,
    head: headFor(workers),
    headFor,
    execution,
    async release() {
      await Promise.all([...heads.values()].map((h) => h.release()));
      await encoder.release();
    },
  };
}
