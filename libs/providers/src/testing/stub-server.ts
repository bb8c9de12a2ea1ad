// A local HTTP server that plays a provider API for tests: the real SDK is pointed at it through
// its base URL. The provider-specific wire format lives in a Dialect (stub-openai.ts,
// stub-anthropic.ts, stub-google.ts); this module has what they share: request recording,
// scripted replies, API-key checks, a rate limit, hanging requests and shutdown.

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type StubUsage = { input: number; output: number };

export type StubToolCall = {
  /** omitted: the stub makes one up (Google: sends none, as Gemini may) */
  id?: string;
  name: string;
  /** JSON text of the arguments */
  arguments: string;
  /** Google only: a thought signature attached to the function-call part */
  thoughtSignature?: string;
};

/** What the stub answers to one request, in provider-neutral terms. */
export type StubReply =
  | { type: 'text'; text: string; usage?: StubUsage; model?: string; /** provider-native finish reason */ finish?: string }
  | { type: 'tool-calls'; calls: StubToolCall[]; text?: string; usage?: StubUsage; model?: string }
  /** an error in the dialect's format (retry-after headers also feed Google's RetryInfo) */
  | { type: 'error'; status: number; message?: string; headers?: Record<string, string> }
  /** any JSON body, as is (e.g. an answer shaped unlike the dialect's) */
  | { type: 'raw'; status: number; body: unknown; headers?: Record<string, string> }
  /** accept the request and never answer (until close()) */
  | { type: 'hang' }
  /** Stream only: send the first part of the answer, then stop writing (connection stays open) */
  | { type: 'stall-mid-stream'; text: string };

export type RecordedRequest = {
  method: string;
  /** path without the query string */
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
  /** parsed JSON body (undefined when empty or not JSON) */
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  rawBody: string;
  /** arrival time on the stub's clock (options.now, default Date.now): the time its rate limit counts */
  at: number;
};

export type StubServerOptions = {
  /** answer 429 (with retry-after) above this many requests per second, sliding 1 s window */
  rateLimit?: { requestsPerSecond: number };
  /** the only API key accepted; requests with another or none get 401 */
  apiKey?: string;
  /** reply when no scripted reply is queued (default: a short text answer) */
  /** the reply when none is queued; a function may answer later (a promise: the request waits for it) */
  defaultReply?: StubReply | ((req: RecordedRequest) => StubReply | Promise<StubReply>);
  /** characters per streamed text/argument fragment (default 4) */
  chunkSize?: number;
  /** wait before answering each request, ms (for concurrency tests; default 0) */
  latencyMs?: number;
  /** the clock of the rate limit (tests pass a fake one) */
  now?: () => number;
};

/** Where a request goes, as the dialect reads it. */
export type Route = { kind: 'generate' | 'stream'; model: string };

export type ReplyContext = {
  req: RecordedRequest;
  route: Route;
  chunkSize: number;
  /** sequence number of this request (1-based), for ids */
  seq: number;
};

export interface Dialect {
  readonly name: string;
  /** the base URL to give the SDK, from the server's origin (e.g. origin + '/v1' for OpenAI) */
  baseURL(origin: string): string;
  route(req: RecordedRequest): Route | undefined;
  apiKeyOf(req: RecordedRequest): string | undefined;
  /** write a complete non-streaming answer */
  writeGenerate(res: ServerResponse, reply: Extract<StubReply, { type: 'text' | 'tool-calls' }>, ctx: ReplyContext): void;
  /** write the whole stream for the reply; `stallAfterFirst` stops after the first text event */
  writeStream(res: ServerResponse, reply: Extract<StubReply, { type: 'text' | 'tool-calls' }>, ctx: ReplyContext, stallAfterFirst?: boolean): void;
  writeError(res: ServerResponse, status: number, message: string, headers: Record<string, string>, retryAfterMs?: number): void;
}

export class StubServer {
  /** origin, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  /** the base URL to give the provider's SDK */
  readonly baseURL: string;
  /** every request received, in order (including rejected ones) */
  readonly requests: RecordedRequest[] = [];
  /** requests answered with the rate limit's 429 */
  rateLimited = 0;
  readonly #server: Server;
  readonly #queue: StubReply[] = [];
  readonly #opts: StubServerOptions;
  readonly #dialect: Dialect;
  // accept times of the requests let through the rate limit within the last second
  #window: number[] = [];
  #seq = 0;

  private constructor(server: Server, dialect: Dialect, opts: StubServerOptions) {
    this.#server = server;
    this.#dialect = dialect;
    this.#opts = opts;
    const { port } = server.address() as AddressInfo;
    this.url = `http://127.0.0.1:${port}`;
    this.baseURL = dialect.baseURL(this.url);
  }

  static async start(dialect: Dialect, opts: StubServerOptions = {}): Promise<StubServer> {
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const stub = new StubServer(server, dialect, opts);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      stub.#handle(req, res).catch((e: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`stub failure: ${String(e)}`);
      });
    });
    return stub;
  }

  /** Number of requests received so far. */
  get requestCount(): number {
    return this.requests.length;
  }

  get lastRequest(): RecordedRequest | undefined {
    return this.requests.at(-1);
  }

  /**
   * What arrived of one request-body field (a top-level name, or a dotted path such as
   * `generationConfig.seed`), request by request (undefined where a request did not send it).
   */
  received(field: string): unknown[] {
    return this.requests.map((r) => field.split('.').reduce<unknown>((v, k) => (v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), r.body));
  }

  /** Queue replies for the next requests, in order (before the default reply applies). */
  enqueue(...replies: StubReply[]): this {
    this.#queue.push(...replies);
    return this;
  }

  /** Forget recorded requests, queued replies and the rate-limit window. */
  reset(): void {
    this.requests.length = 0;
    this.#queue.length = 0;
    this.#window = [];
    this.rateLimited = 0;
  }

  /** Stop listening and cut every open connection (hanging requests included). */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rawBody = await readBody(req);
    const u = new URL(req.url ?? '/', this.url);
    let body: unknown;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      body = undefined;
    }
    const at = (this.#opts.now ?? Date.now)();
    const rec: RecordedRequest = { method: req.method ?? 'GET', path: u.pathname, query: u.searchParams, headers: req.headers, body, rawBody, at };
    this.requests.push(rec);
    const seq = ++this.#seq;
    const d = this.#dialect;

    const route = d.route(rec);
    if (!route) return d.writeError(res, 404, `stub ${d.name}: no route for ${rec.method} ${rec.path}`, {});
    if (this.#opts.apiKey !== undefined && d.apiKeyOf(rec) !== this.#opts.apiKey) {
      // echo the key back as some providers do, so tests can check it is redacted
      return d.writeError(res, 401, `Incorrect API key provided: ${d.apiKeyOf(rec) ?? '(none)'}`, {});
    }
    const limited = this.#rateLimit(at);
    if (limited !== undefined) {
      this.rateLimited++;
      const headers = { 'retry-after': String(Math.ceil(limited / 1000)), 'retry-after-ms': String(limited) };
      return d.writeError(res, 429, `stub ${d.name}: rate limit of ${this.#opts.rateLimit!.requestsPerSecond} requests per second reached`, headers, limited);
    }
    if (this.#opts.latencyMs) await new Promise((r) => setTimeout(r, this.#opts.latencyMs));

    const reply = this.#queue.shift() ?? (await this.#default(rec));
    const ctx: ReplyContext = { req: rec, route, chunkSize: this.#opts.chunkSize ?? 4, seq };
    switch (reply.type) {
      case 'hang':
        return; // the response stays open until close()
      case 'raw':
        res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
        res.end(JSON.stringify(reply.body));
        return;
      case 'error':
        return d.writeError(res, reply.status, reply.message ?? `stub ${d.name}: error ${reply.status}`, reply.headers ?? {}, retryAfterOf(reply.headers));
      case 'stall-mid-stream':
        return d.writeStream(res, { type: 'text', text: reply.text }, ctx, true);
      default:
        if (route.kind === 'stream') return d.writeStream(res, reply, ctx);
        return d.writeGenerate(res, reply, ctx);
    }
  }

  #default(rec: RecordedRequest): StubReply | Promise<StubReply> {
    const r = this.#opts.defaultReply;
    if (typeof r === 'function') return r(rec);
    return r ?? { type: 'text', text: 'stub answer' };
  }

  /** ms to wait when over the limit, else undefined (and the request counts in the window). */
  #rateLimit(now: number): number | undefined {
    const limit = this.#opts.rateLimit?.requestsPerSecond;
    if (limit === undefined) return undefined;
    this.#window = this.#window.filter((t) => t > now - 1000);
    if (this.#window.length >= limit) return Math.max(1, this.#window[0]! + 1000 - now);
    this.#window.push(now);
    return undefined;
  }
}

function retryAfterOf(headers: Record<string, string> | undefined): number | undefined {
  const entries = Object.entries(headers ?? {}).map(([k, v]) => [k.toLowerCase(), v] as const);
  const get = (name: string): string | undefined => entries.find(([k]) => k === name)?.[1];
  const ms = Number(get('retry-after-ms'));
  if (Number.isFinite(ms) && ms > 0) return ms;
  const s = Number(get('retry-after'));
  return Number.isFinite(s) && s > 0 ? s * 1000 : undefined;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

// ---------------------------------------------------------------------------------------------
// Helpers for the dialects

/** Split a text into pieces of `size` characters (at least one piece, possibly empty). */
export function pieces(text: string, size: number): string[] {
  if (text.length === 0) return [];
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** Rough usage for a request/answer when the script gives none (about 4 characters a token). */
export function stubUsage(req: RecordedRequest, outputText: string, given?: StubUsage): StubUsage {
  if (given) return given;
  return { input: Math.max(1, Math.ceil(req.rawBody.length / 16)), output: Math.max(1, Math.ceil(outputText.length / 4)) };
}

export function writeJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

export function startSse(res: ServerResponse, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...headers });
}

export function bearer(req: RecordedRequest): string | undefined {
  const h = req.headers['authorization'];
  const m = typeof h === 'string' ? /^Bearer\s+(.+)$/i.exec(h) : null;
  return m ? m[1] : undefined;
}
