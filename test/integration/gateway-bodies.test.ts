// Request bodies the gateway refuses, as a client sees them (issue 27, 4d and 4f): the real `openai`
// npm client against the gateway (buildGateway on a free port), real Postgres (API keys, the
// Batch API's files) and a stub OpenAI-compatible worker.
//
// A body over the limit is answered 413 in OpenAI's error format, and the client reads that answer
// (an APIError with status 413), not a reset connection: the gateway reads and drops the rest of
// the body before it answers, up to a bound (several times the limit, a few seconds), past which
// it closes the connection. The clients reach the gateway through a relay that delays the answers
// by 20 ms, as a network does: on loopback a client reads an early answer before the reset that
// follows it arrives, across a network the reset comes first ("Connection error.").
//
// A JSON body that is not valid UTF-8 is a 400 naming the byte offset and the field, never
// decoded to U+FFFD.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { createServer, connect, type Server } from 'node:net';
import OpenAI, { APIError, toFile } from 'openai';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type FuguConfig } from '@fugu/config';
import { createApiKey } from '@fugu/db';
import { createTestDatabase, type TestDatabase } from '@fugu/db/testing';
import { startOpenAIStub, type OpenAIStub } from '@fugu/providers/testing';
import { createLogger } from '@fugu/telemetry';
import { buildGateway } from '../../apps/gateway/src/server.ts';
import { noRouter, stubWorker } from '../support/ultra-gateway.ts';
import { testRedisUrl } from '../support/eval-env.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const LIMIT = 1024 * 1024;
const FILES_LIMIT = 1024 * 1024;
const BIG = 5 * 1024 * 1024;

let database: TestDatabase;
let home: string;
let config: FuguConfig;
let stub: OpenAIStub;
let app: FastifyInstance;
let baseURL: string;
let relay: Server;
let relayURL: string;
let key: string;

const client = (apiKey = key, url = relayURL) => new OpenAI({ apiKey, baseURL: url, maxRetries: 0, timeout: 60_000 });

/** A TCP relay to `port` that delays what the server sends by `ms` (its end or reset too). */
async function startRelay(port: number, ms: number): Promise<{ server: Server; port: number }> {
  const server = createServer((c) => {
    const s = connect(port, '127.0.0.1');
    const later = (f: () => void) => setTimeout(f, ms);
    c.on('data', (d) => s.write(d));
    c.on('end', () => s.end());
    c.on('error', () => s.destroy());
    s.on('data', (d) => later(() => c.write(d)));
    s.on('end', () => later(() => c.end()));
    // the server reset the connection: so does the relay, once the bytes before it are through
    s.on('error', () => later(() => c.destroy()));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

beforeAll(async () => {
  database = await createTestDatabase();
  home = await mkdtemp(path.join(tmpdir(), 'fugu-bodies-'));
  config = loadConfig({
    FUGU_REDIS_URL: testRedisUrl(), FUGU_DATABASE_URL: database.url, FUGU_QUEUE_PREFIX: `fugubody${randomBytes(4).toString('hex')}`, FUGU_HOME: home, FUGU_LOG_LEVEL: 'silent',
    FUGU_GATEWAY_BODY_LIMIT_BYTES: String(LIMIT), FUGU_FILES_MAX_BYTES: String(FILES_LIMIT),
    // the Batch API's routes without a driver (no batch runs here)
    FUGU_BATCH_DRIVERS: '0',
  });
  stub = await startOpenAIStub({ defaultReply: { type: 'text', text: 'hello from alpha' } });
  const log = createLogger({ name: 'gateway-bodies-test', level: 'silent' });
  app = await buildGateway({
    config, pool: { name: 'bodies', workers: [stubWorker('alpha', stub)] }, routeClient: noRouter, db: database.db, env: {}, log,
    batches: { queue: () => { throw new Error('no batch runs in this test'); }, workers: [] },
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as { port: number };
  baseURL = `http://127.0.0.1:${port}/v1`;
  const r = await startRelay(port, 20);
  relay = r.server;
  relayURL = `http://127.0.0.1:${r.port}/v1`;
  key = (await createApiKey(database.db, { name: 'bodies' })).key;
});

afterAll(async () => {
  relay?.close();
  await app?.close().catch(() => {});
  await stub?.close();
  await database?.drop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** The API error a request ends with (an answer, or a connection error, fails the test with what it was). */
async function refused(p: Promise<unknown>): Promise<APIError & { param?: string | null }> {
  const r = await p.then(() => undefined, (e: unknown) => e);
  if (!(r instanceof APIError) || r.status === undefined) throw new Error(`expected an API error with a status, got ${r === undefined ? 'an answer' : `${(r as Error).constructor.name}: ${String(r)} (cause: ${String((r as Error).cause)})`}`);
  return r as APIError & { param?: string | null };
}

const expectTooLarge = (e: APIError & { param?: string | null }, code: string, message: RegExp) => {
  expect({ status: e.status, code: e.code, type: (e.error as Json)?.type }).toEqual({ status: 413, code, type: 'invalid_request_error' });
  expect((e.error as Json)?.message).toMatch(message);
};

describe('a body over the limit', () => {
  it('chat completions, 5 MB: the client reads a 413 in the OpenAI format (was "Connection error.": the socket closed before the body was read)', async () => {
    const c = client();
    const e = await refused(c.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'x'.repeat(BIG) }] }));
    expectTooLarge(e, 'request_too_large', new RegExp(`^the request body is larger than the gateway's limit of ${LIMIT} bytes \\(FUGU_GATEWAY_BODY_LIMIT_BYTES\\)`));
    // the client goes on: the next request is answered
    const ok = await c.chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.choices[0]!.message.content).toBe('hello from alpha');
  });

  it('/v1/responses, 5 MB: a 413 too', async () => {
    const e = await refused(client().responses.create({ model: 'alpha', input: 'x'.repeat(BIG) }));
    expectTooLarge(e, 'request_too_large', /larger than the gateway's limit/);
  });

  it('the other JSON routes (/v1/route, /v1/batches) and an unknown URL: 413 / 404, never a reset', async () => {
    const body = { messages: [{ role: 'user', content: 'x'.repeat(BIG) }] };
    expectTooLarge(await refused(client().post('/route', { body })), 'request_too_large', /larger than the gateway's limit/);
    expectTooLarge(await refused(client().post('/batches', { body })), 'request_too_large', /larger than the gateway's limit/);
    const nowhere = await refused(client().post('/nowhere', { body }));
    expect([nowhere.status, nowhere.code]).toEqual([413, 'request_too_large']);
  });

  it('a file upload past FUGU_FILES_MAX_BYTES (multipart): a 413 naming the file; a wrong key with a big file: a 401', async () => {
    const big = await toFile(Buffer.alloc(BIG, 'x'), 'batch.jsonl');
    expectTooLarge(await refused(client().files.create({ file: big, purpose: 'batch' })), 'file_too_large', /larger than \d+ bytes/);
    const e = await refused(client('sk-fugu-not-a-key').files.create({ file: await toFile(Buffer.alloc(BIG, 'x'), 'batch.jsonl'), purpose: 'batch' }));
    expect(e.status).toBe(401);
  });

  it('is drained only so far: a body that never ends is cut off (the connection closed) once past the bound', async () => {
    const { port } = app.server.address() as { port: number };
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const sent = await new Promise<{ bytes: number; how: string }>((resolve) => {
      let bytes = 0;
      let done = false;
      const finish = (how: string) => {
        if (done) return;
        done = true;
        clearInterval(timer);
        resolve({ bytes, how });
      };
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } });
      req.on('response', (res) => {
        res.resume();
        res.on('close', () => finish(`answered ${res.statusCode}`));
      });
      req.on('error', (err) => finish(`error ${(err as NodeJS.ErrnoException).code}`));
      req.write('{"model":"alpha","messages":[{"role":"user","content":"');
      // as fast as the server reads (at most 1 MiB waiting here), for at most 30 s
      const timer = setInterval(() => {
        while (!done && req.writableLength < LIMIT) {
          req.write(chunk);
          bytes += chunk.length;
        }
        if (bytes > 100 * LIMIT) finish('never cut off');
      }, 1);
      setTimeout(() => finish('never cut off (30 s)'), 30_000).unref();
    });
    expect(sent.how).not.toMatch(/never/);
    // the gateway read at most its bound (16 times the limit) and some buffers
    expect(sent.bytes).toBeLessThan(24 * LIMIT);
  });
});

describe('a JSON body that is not valid UTF-8', () => {
  const send = (route: string, body: Buffer) =>
    fetch(`${baseURL}${route}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body }).then(async (r) => ({ status: r.status, body: (await r.json()) as Json }));
  /** The JSON text with the bytes `bad` where `@` is. */
  const withBytes = (json: string, bad: number[]): { body: Buffer; offset: number } => {
    const at = Buffer.from(json.slice(0, json.indexOf('@'))).length;
    return { body: Buffer.concat([Buffer.from(json.slice(0, json.indexOf('@'))), Buffer.from(bad), Buffer.from(json.slice(json.indexOf('@') + 1))]), offset: at };
  };

  it('chat completions: a 400 naming the byte offset and the field (was decoded to U+FFFD and answered)', async () => {
    const { body, offset } = withBytes(JSON.stringify({ model: 'alpha', messages: [{ role: 'system', content: 'Be brief. é' }, { role: 'user', content: 'caf@ au lait' }] }), [0xe9]);
    const before = stub.requests.length;
    const r = await send('/chat/completions', body);
    expect(r).toEqual({
      status: 400,
      body: { error: { message: `messages[1].content: the request body is not valid UTF-8 at byte ${offset} (0xe9); send text as UTF-8`, type: 'invalid_request_error', param: 'messages[1].content', code: 'invalid_encoding' } },
    });
    expect(stub.requests.length).toBe(before);
  });

  it('/v1/responses: the same, for a key and for a truncated sequence at the end of a string', async () => {
    const inKey = withBytes(JSON.stringify({ model: 'alpha', input: 'hi', metadata: { 'k@': 'v' } }), [0xff]);
    const r1 = await send('/responses', inKey.body);
    expect([r1.status, r1.body.error.param, r1.body.error.code, r1.body.error.message]).toEqual([400, 'metadata', 'invalid_encoding', `metadata: the request body is not valid UTF-8 at byte ${inKey.offset} (0xff), in a key; send text as UTF-8`]);
    const cut = withBytes(JSON.stringify({ model: 'alpha', input: [{ role: 'user', content: 'ok @' }] }), [0xe2, 0x82]);
    const r2 = await send('/responses', cut.body);
    expect([r2.status, r2.body.error.param, r2.body.error.message]).toEqual([400, 'input[0].content', `input[0].content: the request body is not valid UTF-8 at byte ${cut.offset} (0xe2 0x82); send text as UTF-8`]);
  });

  it('outside any string: a 400 naming the offset (the body is not JSON either)', async () => {
    const { body, offset } = withBytes('{"model":"alpha",@"input":"hi"}', [0xc3]);
    const r = await send('/responses', body);
    expect([r.status, r.body.error.param, r.body.error.code, r.body.error.message]).toEqual([400, null, 'invalid_encoding', `the request body is not valid UTF-8 at byte ${offset} (0xc3); send text as UTF-8`]);
  });

  it('valid UTF-8 (and U+FFFD sent as such) is answered', async () => {
    const ok = await client().chat.completions.create({ model: 'alpha', messages: [{ role: 'user', content: 'café \uFFFD 😀' }] });
    expect(ok.choices[0]!.message.content).toBe('hello from alpha');
    expect(JSON.stringify(stub.requests.at(-1)!.body.messages)).toContain('café \uFFFD 😀');
  });
});
