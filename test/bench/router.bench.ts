// npm run bench:router — the router's speed on this machine, beside a floor measured in the
// same run: decision latency (text -> USE-lite features -> SVF + head -> worker) at batch 1,
// throughput at batch 64, the floor = the backbone's FLOPs / the GEMM rate ONNX Runtime reaches
// here, and the candidate-batched head: input-candidate evaluations per second for P = 32
// candidate parameter vectors over N = 4096 cached features.
import { availableParallelism } from 'node:os';
import { createSession, GraphBuilder, initTheta, loadUseLite, RouterHead, UseLiteEncoder } from '@fugu/router-model';
import { defaultLlmRouterDir, loadLlmRouter } from '@fugu/datasets';
import { useLiteSvfLayer } from '@fugu/serving';
import { pct } from './stats.ts';

const home = process.env.FUGU_HOME ?? `/tmp/fugu-bench-router`;
const K = 9;
const log = (s: string) => process.stderr.write(`bench:router: ${s}\n`);

// 1. GEMM rate of ONNX Runtime here: [M, 512] x [512, 512] products, as the backbone does
async function gemmRate(): Promise<number> {
  const g = new GraphBuilder('gemm');
  const M = 2048, D = 512;
  const x = g.input('x', 'float32', [M, D]);
  const w = g.constant('w', Float32Array.from({ length: D * D }, (_, i) => ((i * 7919) % 1000) / 1000 - 0.5), [D, D]);
  g.output(g.matmul(g.matmul(x, w), w), 'y', 'float32', [M, D]);
  const s = await createSession(g.toModel(), { intraOpNumThreads: availableParallelism() });
  const data = Float32Array.from({ length: M * D }, (_, i) => (i % 13) / 13);
  for (let i = 0; i < 3; i++) await s.run({ x: { data, dims: [M, D] } });
  const reps = 20;
  const t0 = performance.now();
  for (let i = 0; i < reps; i++) await s.run({ x: { data, dims: [M, D] } });
  const secs = (performance.now() - t0) / 1000;
  await s.release();
  return (reps * 2 * 2 * M * D * D) / secs; // FLOP/s
}

// FLOPs of the USE-lite forward for T tokens (multiply-adds x 2), from spec.md's shapes
function backboneFlops(T: number): number {
  const l0 = 2 * T * (256 * 768 + 256 * 512) + 2 * 2 * T * T * 256 + 2 * T * 256 * 512; // qkv, scores+values, output (256 -> 512), residual projection
  const ffn = 2 * T * (512 * 1536 * 2);
  const l1 = 2 * T * (512 * 1536 + 512 * 512) + 2 * 2 * T * T * 512;
  return l0 + l1 + 2 * ffn + 2 * 512 * 512; // two FFNs, the tanh layer
}

const dataset = await loadLlmRouter(defaultLlmRouterDir());
const texts = dataset.items.map((i) => i.prompt);
const backbone = await loadUseLite();
const encoder = await UseLiteEncoder.create({ backbone });
const head = new RouterHead(await useLiteSvfLayer(home, backbone), K);
const theta = initTheta(head.dims, 0);
const tokens = texts.slice(0, 2000).map((t) => encoder.tokenize(t).length);
const medianT = pct(tokens, 50);

async function decide(batch: string[]): Promise<void> {
  const feats = await encoder.encode(batch);
  const x = new Float32Array(batch.length * 512);
  feats.forEach((f, i) => x.set(f, i * 512));
  await head.logits(x, theta);
}

log('warming up');
for (let i = 0; i < 20; i++) await decide([texts[i]!]);
const lat: number[] = [];
for (let i = 0; i < 300; i++) {
  const t0 = performance.now();
  await decide([texts[(i * 37) % texts.length]!]);
  lat.push(performance.now() - t0);
}
const batches = 30;
const t0 = performance.now();
for (let b = 0; b < batches; b++) await decide(texts.slice(b * 64, b * 64 + 64));
const perS = (batches * 64) / ((performance.now() - t0) / 1000);

log('GEMM rate');
const rate = await gemmRate();
const floorMs = (backboneFlops(medianT) / rate) * 1000;

log('candidate-batched head, P = 32, N = 4096');
const P = 32, N = 4096, chunk = 1024;
const feats = await encoder.encode(texts.slice(0, N));
const thetas = Array.from({ length: P }, (_, p) => initTheta(head.dims, p, { headScale: 0.05 }));
const projected = [] as Awaited<ReturnType<typeof head.project>>[];
for (let s = 0; s < N; s += chunk) {
  const x = new Float32Array(chunk * 512);
  feats.slice(s, s + chunk).forEach((f, i) => x.set(f, i * 512));
  projected.push(await head.project(x));
}
await head.candidateLogits(projected[0]!, thetas); // warm-up
const t1 = performance.now();
for (const y of projected) await head.candidateLogits(y, thetas);
const candSecs = (performance.now() - t1) / 1000;
const evalsPerS = (P * N) / candSecs;
// floor of the candidate head: its GEMM FLOPs (P x N x R x D for V^T, plus the head) at the GEMM rate
const candFloorS = (2 * P * N * 512 * 512 + 2 * P * N * 512 * K) / rate;

const rows: string[][] = [
  ['measure', 'fugu', 'floor (same run)', 'ratio'],
  [`decision latency p50, batch 1 (median prompt ${medianT} tokens)`, `${pct(lat, 50).toFixed(2)} ms`, `${floorMs.toFixed(2)} ms`, (pct(lat, 50) / floorMs).toFixed(1)],
  ['decision latency p99, batch 1', `${pct(lat, 99).toFixed(2)} ms`, '', ''],
  ['throughput, batch 64', `${perS.toFixed(0)} decisions/s`, `${(1000 / floorMs).toFixed(0)} /s`, ((1000 / floorMs) / perS).toFixed(1)],
  [`candidate head P=${P}, N=${N} (cached features)`, `${(evalsPerS / 1e3).toFixed(0)}k evaluations/s`, `${((P * N) / candFloorS / 1e3).toFixed(0)}k /s`, (((P * N) / candFloorS) / evalsPerS).toFixed(1)],
];
const w = rows[0]!.map((_, j) => Math.max(...rows.map((r) => r[j]!.length)));
process.stdout.write(`\nONNX Runtime GEMM rate here: ${(rate / 1e9).toFixed(1)} GFLOP/s (${availableParallelism()} threads); backbone ${(backboneFlops(medianT) / 1e6).toFixed(1)} MFLOP at ${medianT} tokens\n\n`);
for (const r of rows) process.stdout.write(`${r.map((c, j) => (j === 0 ? c.padEnd(w[j]!) : c.padStart(w[j]!))).join('  ')}\n`);
await head.release();
encoder.release();
