// A question on the replay pool as a user types it (issue 28): the gateway process on the
// LLMRouter replay pool (`FUGU_GATEWAY_POOL=llmrouter`, the router deployed, `fixed:moa:2`
// published as fugu-ultra; real Redis and Postgres), called with the real `openai` client. A
// question that differs from the dataset's only in case, spacing and trailing punctuation is that
// question, for `fugu` and for fugu-ultra's replay steps alike; a question that is not in the
// dataset is a 400 that quotes the user's own message (never an agent's internal prompt), names
// it (`messages[i].content`) and says how to try any prompt (the scripted pool) or live workers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { APIError } from 'openai';
import { sql } from 'kysely';
import { batchEnded, batchLine, fileLines, jsonl, startBatchStack, uploadBatchFile, type BatchStack } from '../support/batch-stack.ts';
import { publishUltraAndTell } from '../support/ultra-publish.ts';

let stack: BatchStack;
let client: OpenAI;

/** As a user types it; the dataset has `who won the most gold metals in olympics` (test-000171). */
const CAPITALISED = 'Who won the most gold metals in Olympics?';
const NEW_QUESTION = 'Write a limerick about a gateway that routes prompts.';

beforeAll(async () => {
  stack = await startBatchStack();
  await publishUltraAndTell(stack.env.config, stack.env.database.db, { name: 'fugu-ultra', conductor: 'fixed:moa:2', pool: 'llmrouter', options: {} });
  const { url } = await stack.startGateway();
  client = new OpenAI({ apiKey: stack.full.key, baseURL: url, maxRetries: 0, timeout: 60_000 });
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

/** The 400 of a question not in the dataset: the user's message quoted, the field named, the advice. */
async function expectNotInDataset(p: Promise<unknown>, param: string): Promise<APIError> {
  const e = await p.catch((x: unknown) => x);
  expect(e).toBeInstanceOf(OpenAI.BadRequestError);
  const err = e as APIError;
  expect(err.message).toContain(`your message "${NEW_QUESTION}" is not one of them`);
  expect(err.message).toMatch(/only answers questions of its dataset/);
  expect(err.message).toContain('fugu gateway --pool scripted');
  expect(err.message).toMatch(/pool file whose workers have their API keys in the environment \(fugu gateway --pool pool\.yaml\)/);
  // never an agent's prompt nor a workflow's internals
  expect(err.message).not.toMatch(/You are one agent|workflow \d+|step \d/);
  expect(err.param).toBe(param);
  expect(err.code).toBe('provider_bad_request');
  return err;
}

describe('replay pool: a question as a user types it', () => {
  it('fugu answers the capitalised question with a trailing "?" from the dataset\'s item', { timeout: 60_000 }, async () => {
    const { data, response } = await client.chat.completions.create({ model: 'fugu', messages: [{ role: 'user', content: CAPITALISED }] }).withResponse();
    const worker = response.headers.get('x-fugu-worker')!;
    expect(stack.workers).toContain(worker);
    expect(data.choices[0]!.message.content).toMatch(new RegExp(`^\\[replay:${worker}\\] recorded score `));
  });

  it('fugu-ultra answers it too: its replay steps find the same item', { timeout: 60_000 }, async () => {
    const c = await client.chat.completions.create({ model: 'fugu-ultra', messages: [{ role: 'user', content: `  ${CAPITALISED.toUpperCase()}  ` }] });
    expect(c.choices[0]!.finish_reason).toBe('stop');
    expect(c.choices[0]!.message.content).not.toBe('');
  });

  it('a question not in the dataset, to fugu: a 400 quoting the user\'s message, with what to do', { timeout: 60_000 }, async () => {
    await expectNotInDataset(
      client.chat.completions.create({ model: 'fugu', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: NEW_QUESTION }] }),
      'messages[1].content',
    );
  });

  it('to a replay worker by name: the same 400, naming that worker', { timeout: 60_000 }, async () => {
    const worker = stack.workers[2]!;
    const e = await expectNotInDataset(client.chat.completions.create({ model: worker, messages: [{ role: 'user', content: NEW_QUESTION }] }), 'messages[0].content');
    expect(e.message).toContain(`the replay worker "${worker}"`);
  });

  it('to fugu-ultra: refused before any call or workflow, quoting the user\'s message (not an agent\'s prompt)', { timeout: 60_000 }, async () => {
    const db = stack.env.database.db;
    const messages = [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: CAPITALISED },
      { role: 'assistant' as const, content: 'Some earlier answer.' },
      { role: 'user' as const, content: NEW_QUESTION },
    ];
    await expectNotInDataset(client.chat.completions.create({ model: 'fugu-ultra', messages }), 'messages[3].content');
    // the Responses API names its own field
    const r = await expectNotInDataset(client.responses.create({ model: 'fugu-ultra', instructions: 'Be brief.', input: [{ role: 'user', content: NEW_QUESTION }] }), 'input[0].content');
    expect(r.status).toBe(400);
    const written = (await sql<{ n: number }>`select count(*)::int as n from workflows where question = ${NEW_QUESTION}`.execute(db)).rows[0]!.n;
    expect(written).toBe(0);
    // no agent's call was made (one that failed would have its row, written behind the answer)
    await new Promise((r) => setTimeout(r, 500));
    const failed = (await sql<{ n: number }>`select count(*)::int as n from chat_calls where key like 'wf%' and status <> 'ok'`.execute(db)).rows[0]!.n;
    expect(failed).toBe(0);
  });

  it('a Batch API line asks it as typed: found the same way (fugu through a provider worker, fugu-ultra\'s replay steps)', { timeout: 120_000 }, async () => {
    const worker = await stack.startWorker();
    try {
      const file = await uploadBatchFile(client, jsonl([
        batchLine('router', { model: 'fugu', messages: [{ role: 'user', content: CAPITALISED }] }),
        batchLine('ultra', { model: 'fugu-ultra', messages: [{ role: 'user', content: ` ${CAPITALISED.toLowerCase()} ` }] }),
      ]));
      const b = await batchEnded(client, (await client.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
      const out = await fileLines(client, b.output_file_id);
      expect({ completed: b.request_counts?.completed, failed: b.request_counts?.failed, errors: await fileLines(client, b.error_file_id) }).toEqual({ completed: 2, failed: 0, errors: [] });
      const byId = new Map(out.map((l) => [l.custom_id, l.response.body]));
      expect(byId.get('router').choices[0].message.content).toMatch(/^\[replay:[^\]]+\] recorded score /);
      expect(byId.get('ultra').choices[0].finish_reason).toBe('stop');
    } finally {
      await worker.term();
    }
  });
});
