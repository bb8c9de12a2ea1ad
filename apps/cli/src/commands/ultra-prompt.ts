// `fugu ultra prompt`: the `llm:` Conductor's prompt as an RL engine's policy prompt, one JSON
// line per question of a dataset's split (or one question given as an argument), for POST
// /v1/rewards (docs/rewards.md). The logic is @fugu/ultra-training's (src/rewards/prompts.ts).
import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import type { SplitScheme } from '@fugu/datasets';
import { ULTRA_SPLITS } from '@fugu/ultra';
import { promptPool, rewardPromptLine, rewardPrompts, type RewardPromptLine } from '@fugu/ultra-training';
import { resolveWorkerPool } from '@fugu/evaluation';
import { action, choiceOption, EXIT, intOption, listOption, type Cli } from '../cli.ts';
import { splitByOption } from '../split-by.ts';

type PromptFlags = {
  pool?: string; dataset?: string; split: (typeof ULTRA_SPLITS)[number]; splitSeed: number; splitBy?: SplitScheme; sample?: number; seed: number; maxSteps: number; workers?: string[]; out?: string;
};

export function registerUltraPrompt(ultra: Command, cli: Cli): void {
  ultra
    .command('prompt')
    .description("the llm: Conductor's prompt for an RL engine (POST /v1/rewards): JSONL, one question a line ({prompt: messages, label: question id, ...}), or the messages of one question")
    .argument('[question]', 'one question: print its prompt messages as JSON (instead of --dataset)')
    .option('--pool <P>', "llmrouter | <pool.yaml> (default: the gateway's pool, FUGU_GATEWAY_POOL): the workers the prompt lists")
    .option('--dataset <D>', 'llmrouter | llmrouter:<dir> | <file.jsonl>: a line per question of the split')
    .addOption(choiceOption('--split <s>', "the questions: the router's split by unique prompt", ULTRA_SPLITS, 'train'))
    .addOption(intOption('--split-seed <n>', "seed of the split (the router's default: 0)", 0))
    .addOption(splitByOption())
    .addOption(intOption('--sample <n>', 'a seeded sample of n questions of the split (default: all)'))
    .addOption(intOption('--seed <n>', 'seed of the sample', 0))
    .addOption(intOption('--max-steps <n>', 'the most steps the prompt allows (the request\'s max_steps, default 5)', 5))
    .addOption(listOption('--workers <a,b>', "only these of the pool's workers (what a key restricted to them is scored on)"))
    .option('--out <file>', 'write the JSONL here (default: stdout)')
    .action(action(async (question: string | undefined, f: PromptFlags) => cmdUltraPrompt(cli.config(), question, f)));
}

async function cmdUltraPrompt(config: FuguConfig, question: string | undefined, f: PromptFlags): Promise<number> {
  const pool = f.pool ?? config.gateway.pool;
  if (question !== undefined) {
    if (f.dataset !== undefined) throw new InputError('give a question or --dataset, not both', { field: '--dataset' });
    if (question.trim() === '') throw new InputError('the question must not be empty', { field: 'question' });
    const p = await resolveWorkerPool(pool, config.llmrouterDir);
    const line = rewardPromptLine({ id: 'question', prompt: question }, promptPool(p.workers, f.workers), f.maxSteps);
    process.stdout.write(`${JSON.stringify(line.prompt, null, 2)}\n`);
    return EXIT.ok;
  }
  if (f.dataset === undefined) throw new InputError('give --dataset <D> (a line per question), or one question', { field: '--dataset' });
  const lines: RewardPromptLine[] = await rewardPrompts(
    { pool, dataset: f.dataset, split: f.split, splitSeed: f.splitSeed, ...(f.splitBy !== undefined && { splitBy: f.splitBy }), sample: f.sample ?? null, seed: f.seed, maxSteps: f.maxSteps, ...(f.workers && { workers: f.workers }) },
    config.llmrouterDir,
  );
  const text = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
  if (f.out !== undefined) {
    await writeFile(f.out, text);
    process.stderr.write(`${lines.length} prompts written to ${f.out}\n`);
  } else process.stdout.write(text);
  return EXIT.ok;
}
