// `fugu batch submit FILE`, `fugu batch status [ID]`, `fugu batch cancel ID`, `fugu batch results ID`:
// the Batch API from the command line, through a running gateway with the real `openai` client
// (FUGU_GATEWAY_URL, default http://127.0.0.1:<gateway.port>/v1; FUGU_API_KEY), as any OpenAI
// client would; the gateway drives the batch. `--wait` follows it with a progress bar.
import { createReadStream } from 'node:fs';
import { stat, writeFile } from 'node:fs/promises';
import OpenAI, { APIConnectionError, APIError } from 'openai';
import { ConfigError, InputError } from '@fugu/core';
import type { FuguConfig } from '@fugu/config';
import { action, EXIT, jsonOption, printJson, type CommandGroup } from '../cli.ts';
import { createProgress } from '../progress.ts';

type Conn = { url?: string; apiKey?: string };
const ENDED = ['completed', 'failed', 'cancelled', 'expired'];

export const batchCommands: CommandGroup = (program, cli) => {
  const batch = program
    .command('batch')
    .description('the OpenAI Batch API through the gateway: submit a JSONL file of requests, follow it, cancel it, fetch its results');
  const conn = (c: ReturnType<typeof batch.command>) =>
    c.option('--url <url>', 'the gateway (default FUGU_GATEWAY_URL, else http://127.0.0.1:<FUGU_GATEWAY_PORT>/v1)').option('--api-key <key>', 'a fugu API key (default FUGU_API_KEY)');

  conn(batch.command('submit'))
    .description('uploads FILE (one request a line: {"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}) and starts a batch')
    .argument('<file>', 'the JSONL file')
    .option('--endpoint <path>', "the batch's endpoint, every line's url: /v1/chat/completions or /v1/responses", '/v1/chat/completions')
    .option('--metadata <k=v...>', 'metadata pairs of the batch')
    .option('--wait', 'follow the batch until it ends (a progress bar), then print its counts')
    .addOption(jsonOption())
    .action(action(async (file: string, f: Conn & { endpoint: string; metadata?: string[]; wait?: boolean; json?: boolean }) => submit(cli.config(), file, f)));

  conn(batch.command('status'))
    .description('a batch (its counts, files, times), or the recent batches')
    .argument('[id]', 'the batch id')
    .option('--wait', 'follow the batch until it ends')
    .addOption(jsonOption())
    .action(action(async (id: string | undefined, f: Conn & { wait?: boolean; json?: boolean }) => status(cli.config(), id, f)));

  conn(batch.command('cancel'))
    .description('cancels a batch: no new calls; the lines answered stay in its output')
    .argument('<id>', 'the batch id')
    .addOption(jsonOption())
    .action(action(async (id: string, f: Conn & { json?: boolean }) => {
      const b = await api(() => client(cli.config(), f).batches.cancel(id));
      if (f.json) printJson(b);
      else process.stdout.write(`${line(b)}\n`);
    }));

  conn(batch.command('results'))
    .description("writes a batch's output (and with --errors its error file) as JSONL")
    .argument('<id>', 'the batch id')
    .option('--out <file>', 'the output file (default: stdout)')
    .option('--errors <file>', 'also write the error file here')
    .action(action(async (id: string, f: Conn & { out?: string; errors?: string }) => results(cli.config(), id, f)));
};

function client(config: FuguConfig, c: Conn): OpenAI {
  const baseURL = c.url ?? process.env.FUGU_GATEWAY_URL?.trim() ?? `http://127.0.0.1:${config.gateway.port}/v1`;
  // no key: a gateway with auth none takes it; one with keys answers 401 (said below)
  const apiKey = c.apiKey ?? (process.env.FUGU_API_KEY?.trim() || 'none');
  return new OpenAI({ baseURL, apiKey, maxRetries: 2, timeout: 600_000 });
}

/** The gateway's refusals as the CLI's: a 4xx is the user's input (exit 2), the message as the gateway wrote it. */
async function api<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    if (e instanceof APIError && e.status !== undefined && e.status >= 400 && e.status < 500) {
      const hint = e.status === 401 ? ' (set FUGU_API_KEY or pass --api-key)' : '';
      throw new InputError(`${e.status} ${(e.error as { message?: string } | undefined)?.message ?? e.message}${hint}`, {});
    }
    if (e instanceof APIConnectionError) throw new ConfigError(`cannot reach the gateway: ${e.message} (start it with \`fugu gateway\`, or set FUGU_GATEWAY_URL or --url)`, 'FUGU_GATEWAY_URL');
    throw e;
  }
}

/** The gateway's `fugu` extension of a batch object: whether its lines wait for a provider worker, and the gateway's own workers that run them. */
type WorkerStatus = { waiting_for_worker: boolean; local_workers: { count: number; providers: string[] } | null; message: string };
const workerStatus = (b: OpenAI.Batches.Batch): WorkerStatus | undefined => (b as { fugu?: WorkerStatus }).fugu;
/** What the batch's workers are doing, when there is something to say (lines waiting, or the gateway's own workers running them). */
const workersText = (b: OpenAI.Batches.Batch): string | undefined => {
  const w = workerStatus(b);
  return w && (w.waiting_for_worker || w.local_workers) ? w.message : undefined;
};

const line = (b: OpenAI.Batches.Batch): string => {
  const c = b.request_counts ?? { total: 0, completed: 0, failed: 0 };
  const workers = workersText(b);
  return (
    `${b.id}  ${b.status.padEnd(10)}  ${c.completed + c.failed}/${c.total} lines (failed ${c.failed})  output ${b.output_file_id ?? '-'}  errors ${b.error_file_id ?? '-'}  ${new Date(b.created_at * 1000).toISOString()}` +
    (workers ? `\n  workers: ${workers}` : '')
  );
};

async function submit(config: FuguConfig, file: string, f: Conn & { endpoint: string; metadata?: string[]; wait?: boolean; json?: boolean }): Promise<number> {
  const s = await stat(file).catch(() => undefined);
  if (!s?.isFile()) throw new InputError(`no such file: ${file}`, { field: 'file' });
  const metadata: Record<string, string> = {};
  for (const kv of f.metadata ?? []) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new InputError(`--metadata: "${kv}" is not key=value`, { field: '--metadata' });
    metadata[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const c = client(config, f);
  const uploaded = await api(() => c.files.create({ file: createReadStream(file), purpose: 'batch' }));
  // (an endpoint the gateway does not take is its 400 naming `endpoint`)
  const endpoint = f.endpoint as OpenAI.Batches.BatchCreateParams['endpoint'];
  const b = await api(() => c.batches.create({ input_file_id: uploaded.id, endpoint, completion_window: '24h', ...(Object.keys(metadata).length > 0 && { metadata }) }));
  if (!f.json) process.stderr.write(`uploaded ${file} as ${uploaded.id} (${uploaded.bytes} bytes); batch ${b.id}: ${b.request_counts?.total ?? '?'} lines\n`);
  if (!f.wait) {
    if (f.json) printJson(b);
    else process.stdout.write(`${b.id}\n`);
    return EXIT.ok;
  }
  return follow(c, b.id, f.json === true);
}

async function follow(c: OpenAI, id: string, json: boolean): Promise<number> {
  let b = await api(() => c.batches.retrieve(id));
  const progress = createProgress({ total: b.request_counts?.total ?? 0, label: id, unit: 'lines' });
  // what the gateway says about the batch's workers, each time it changes (lines waiting for one, its own started)
  let said: string | undefined;
  while (!ENDED.includes(b.status)) {
    const workers = workersText(b);
    if (workers !== undefined && workers !== said) process.stderr.write(`\n${id}: ${workers}\n`);
    said = workers ?? said;
    const waiting = workerStatus(b)?.waiting_for_worker === true;
    progress.update((b.request_counts?.completed ?? 0) + (b.request_counts?.failed ?? 0), b.request_counts?.failed ?? 0, waiting ? `${b.status}, waiting for a provider worker` : b.status);
    await new Promise((r) => setTimeout(r, 1000));
    b = await api(() => c.batches.retrieve(id));
  }
  progress.update((b.request_counts?.completed ?? 0) + (b.request_counts?.failed ?? 0), b.request_counts?.failed ?? 0, b.status);
  progress.stop();
  if (json) printJson(b);
  else process.stdout.write(`${line(b)}\n`);
  return b.status === 'completed' ? EXIT.ok : EXIT.incomplete;
}

async function status(config: FuguConfig, id: string | undefined, f: Conn & { wait?: boolean; json?: boolean }): Promise<number> {
  const c = client(config, f);
  if (id && f.wait) return follow(c, id, f.json === true);
  if (id) {
    const b = await api(() => c.batches.retrieve(id));
    if (f.json) printJson(b);
    else process.stdout.write(`${line(b)}\n`);
    return EXIT.ok;
  }
  const page = await api(() => c.batches.list({ limit: 20 }));
  if (f.json) printJson(page.data);
  else if (page.data.length === 0) process.stdout.write('no batches yet (fugu batch submit FILE starts one)\n');
  else for (const b of page.data) process.stdout.write(`${line(b)}\n`);
  return EXIT.ok;
}

async function results(config: FuguConfig, id: string, f: Conn & { out?: string; errors?: string }): Promise<number> {
  const c = client(config, f);
  const b = await api(() => c.batches.retrieve(id));
  if (!ENDED.includes(b.status)) throw new InputError(`batch ${id} is ${b.status}: its results are written when it ends (fugu batch status ${id} --wait)`, { field: 'id' });
  const text = b.output_file_id ? await (await api(() => c.files.content(b.output_file_id!))).text() : '';
  if (f.out) await writeFile(f.out, text);
  else process.stdout.write(text);
  if (f.errors) await writeFile(f.errors, b.error_file_id ? await (await api(() => c.files.content(b.error_file_id!))).text() : '');
  if (f.out || f.errors) process.stderr.write(`batch ${id}: ${b.request_counts?.completed ?? 0} answered${f.out ? ` -> ${f.out}` : ''}, ${b.request_counts?.failed ?? 0} failed${f.errors ? ` -> ${f.errors}` : ''}\n`);
  return EXIT.ok;
}
