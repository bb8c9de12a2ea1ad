// A recording proxy between a harness and the gateway: every request is forwarded as it is (a
// stream's bytes as they come), and kept with its answer, so a test can count the harness's turns
// itself and read the tool calls it was given and the results it sent back, in each wire format.
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ROUTE, type Wire } from './harnesses.ts';

/** One request and its answer: the request's headers (the harness's session id) and body, the answer's headers (x-request-id, x-fugu-worker) and text. */
export type Exchange = {
  method: string;
  path: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  responseHeaders: Record<string, string | string[] | undefined>;
  response: string;
};

export type Recorder = { url: string; exchanges: Exchange[]; close(): Promise<void> };

export async function startRecorder(target: string): Promise<Recorder> {
  const exchanges: Exchange[] = [];
  const to = new URL(target);
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const up = httpRequest(
        { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...req.headers, host: to.host } },
        (r) => {
          res.writeHead(r.statusCode ?? 502, r.headers);
          const out: Buffer[] = [];
          r.on('data', (c: Buffer) => {
            out.push(c);
            res.write(c);
          });
          r.on('end', () => {
            let body: unknown;
            try {
              body = raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined;
            } catch {
              body = raw.toString('utf8');
            }
            exchanges.push({
              method: req.method ?? '', path: (req.url ?? '').split('?')[0]!, status: r.statusCode ?? 0, headers: { ...req.headers }, body,
              responseHeaders: { ...r.headers }, response: Buffer.concat(out).toString('utf8'),
            });
            res.end();
          });
        },
      );
      up.on('error', (e) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`recorder: ${e.message}`);
      });
      up.end(raw);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** The `data:` payloads of an SSE body (or the one JSON body of an answer that is not streamed). */
function events(text: string): Json[] {
  if (!text.includes('data:')) {
    try {
      return [JSON.parse(text)];
    } catch {
      return [];
    }
  }
  return text
    .split('\n')
    .filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .flatMap((l) => {
      try {
        return [JSON.parse(l.slice(6))];
      } catch {
        return [];
      }
    });
}

export type SeenCall = { id: string; name: string; arguments: string };

/** The tool calls an answer gave the harness (as the harness reads them: their ids, names, arguments or input). */
export function callsIn(wire: Wire, e: Exchange): SeenCall[] {
  const ev = events(e.response);
  switch (wire) {
    case 'responses':
      return ev
        .flatMap((x) => (x.type === 'response.output_item.done' ? [x.item] : x.object === 'response' ? x.output : []))
        .filter((it: Json) => it.type === 'function_call' || it.type === 'custom_tool_call')
        .map((it: Json) => ({ id: it.call_id, name: it.namespace ? `${it.namespace}__${it.name}` : it.name, arguments: it.type === 'function_call' ? it.arguments : JSON.stringify({ input: it.input }) }));
    case 'chat': {
      const byIndex = new Map<number, SeenCall>();
      for (const x of ev) {
        for (const d of x.choices?.[0]?.delta?.tool_calls ?? x.choices?.[0]?.message?.tool_calls ?? []) {
          const i = d.index ?? byIndex.size;
          const c = byIndex.get(i) ?? { id: '', name: '', arguments: '' };
          if (d.id) c.id = d.id;
          if (d.function?.name) c.name = d.function.name;
          if (d.function?.arguments) c.arguments += d.function.arguments;
          byIndex.set(i, c);
        }
      }
      return [...byIndex.values()];
    }
    case 'messages': {
      const blocks = new Map<number, SeenCall>();
      for (const x of ev) {
        if (x.type === 'content_block_start' && x.content_block?.type === 'tool_use') blocks.set(x.index, { id: x.content_block.id, name: x.content_block.name, arguments: '' });
        if (x.type === 'content_block_delta' && x.delta?.type === 'input_json_delta' && blocks.has(x.index)) blocks.get(x.index)!.arguments += x.delta.partial_json;
        if (x.type === 'message' && Array.isArray(x.content)) {
          for (const b of x.content) if (b.type === 'tool_use') blocks.set(blocks.size, { id: b.id, name: b.name, arguments: JSON.stringify(b.input) });
        }
      }
      return [...blocks.values()];
    }
  }
}

/** The tool results a request carries (its whole conversation), by call id, as text. */
export function resultsIn(wire: Wire, e: Exchange): Map<string, string> {
  const out = new Map<string, string>();
  const body = e.body as Json;
  const text = (c: Json): string => (typeof c === 'string' ? c : Array.isArray(c) ? c.map((p: Json) => p.text ?? '').join('') : '');
  switch (wire) {
    case 'responses':
      for (const it of Array.isArray(body?.input) ? body.input : []) {
        if (it.type === 'function_call_output' || it.type === 'custom_tool_call_output') out.set(it.call_id, text(it.output));
      }
      break;
    case 'chat':
      for (const m of body?.messages ?? []) if (m.role === 'tool') out.set(m.tool_call_id, text(m.content));
      break;
    case 'messages':
      for (const m of body?.messages ?? []) {
        if (!Array.isArray(m.content)) continue;
        for (const b of m.content) if (b.type === 'tool_result') out.set(b.tool_use_id, text(b.content));
      }
      break;
  }
  return out;
}

/** The exchanges that are model turns of this wire (what the gateway gives a `requests` row). */
export const turnsOf = (wire: Wire, exchanges: readonly Exchange[]): Exchange[] => exchanges.filter((e) => e.method === 'POST' && e.path === ROUTE[wire]);
