// Dumps what docs/analysis/router-ceiling/ceiling.py needs: the USE-lite embedding of every
// LLMRouter question, its task, its recorded scores and its split under split seeds 0..4
// (the splits `fugu router study` uses).
//   source infra/node-env.sh && node docs/analysis/router-ceiling/dump-features.ts [out dir] [llmrouter dir]
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadLlmRouter, splitByPrompt } from '../../../libs/datasets/src/index.ts';
import { UseLiteEncoder } from '../../../libs/router-model/src/index.ts';

const out = process.argv[2] ?? '/tmp/router-ceiling';
const ds = await loadLlmRouter(process.argv[3] ?? path.resolve(import.meta.dirname, '../../../data/llmrouter'));
const splits = [0, 1, 2, 3, 4].map((seed) => splitByPrompt(ds.items, { seed }));
const encoder = await UseLiteEncoder.create();
const emb = await encoder.encode(ds.items.map((r) => r.prompt), { output: 'embedding' });
await encoder.release();
const flat = new Float32Array(emb.length * 512);
emb.forEach((e, i) => flat.set(e, i * 512));
mkdirSync(out, { recursive: true });
writeFileSync(path.join(out, 'emb.f32'), flat);
const rows = ds.items.map((r) => ({ task: r.task, scores: ds.workers.map((w) => r.recorded![w]!.score), splits: splits.map((s) => s.get(r.id)) }));
writeFileSync(path.join(out, 'meta.json'), JSON.stringify({ workers: ds.workers, rows }));
console.log(`wrote ${ds.items.length} embeddings to ${out}`);
