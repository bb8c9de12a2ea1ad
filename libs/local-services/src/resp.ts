// A minimal Redis client for the checks of this package (no ioredis here: @fugu/local-services
// depends on core and config only): one connection, AUTH when asked, one command, one reply.
import net from 'node:net';
import tls from 'node:tls';

export type RespReply = string | number | null | RespError | RespReply[];

export class RespError extends Error {}

export interface RespTarget {
  host: string;
  port: number;
  tls?: boolean;
  username?: string;
  password?: string;
}

const encode = (args: string[]): string => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;

/** Parses one reply at `at`; undefined when the buffer does not hold all of it yet. */
function parse(buf: Buffer, at: number): { value: RespReply; end: number } | undefined {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return undefined;
  const type = String.fromCharCode(buf[at]!);
  const line = buf.toString('utf8', at + 1, eol);
  switch (type) {
    case '+':
      return { value: line, end: eol + 2 };
    case '-':
      return { value: new RespError(line), end: eol + 2 };
    case ':':
      return { value: Number(line), end: eol + 2 };
    case '$': {
      const n = Number(line);
      if (n < 0) return { value: null, end: eol + 2 };
      if (buf.length < eol + 2 + n + 2) return undefined;
      return { value: buf.toString('utf8', eol + 2, eol + 2 + n), end: eol + 2 + n + 2 };
    }
    case '*': {
      const n = Number(line);
      if (n < 0) return { value: null, end: eol + 2 };
      const items: RespReply[] = [];
      let end = eol + 2;
      for (let i = 0; i < n; i++) {
        const item = parse(buf, end);
        if (!item) return undefined;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      return { value: new RespError(`unexpected reply type ${JSON.stringify(type)}`), end: buf.length };
  }
}

/**
 * Sends one command (after AUTH when the target has a password) and resolves with its reply; an
 * error reply resolves as a RespError. Rejects when the server cannot be reached in time.
 */
export function redisCall(target: RespTarget, args: string[], timeoutMs = 2_000): Promise<RespReply> {
  const commands: string[][] = [];
  if (target.password) commands.push(target.username ? ['AUTH', target.username, target.password] : ['AUTH', target.password]);
  commands.push(args);
  return new Promise((resolve, reject) => {
    const host = target.host.replace(/^\[|\]$/g, '');
    const sock = target.tls ? tls.connect({ host, port: target.port, servername: net.isIP(host) ? undefined : host }) : net.connect({ host, port: target.port });
    let buf = Buffer.alloc(0);
    let done = false;
    const finish = (err: Error | undefined, value?: RespReply): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(() => finish(new Error(`no answer from ${host}:${target.port} within ${timeoutMs} ms`)), timeoutMs);
    sock.once(target.tls ? 'secureConnect' : 'connect', () => sock.write(commands.map(encode).join('')));
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      let at = 0;
      const replies: RespReply[] = [];
      for (;;) {
        const r = parse(buf, at);
        if (!r) break;
        replies.push(r.value);
        at = r.end;
      }
      if (replies.length >= commands.length) {
        const auth = commands.length > 1 ? replies[0] : undefined;
        if (auth instanceof RespError) finish(undefined, auth);
        else finish(undefined, replies[commands.length - 1]);
      }
    });
    sock.on('error', (e) => finish(e));
    sock.on('close', () => finish(new Error(`${host}:${target.port} closed the connection`)));
  });
}

/** The fields of CLUSTER INFO (cluster_state, cluster_known_nodes, ...), or undefined when the node does not answer it. */
export async function clusterInfo(target: RespTarget, timeoutMs = 2_000): Promise<Record<string, string> | undefined> {
  const reply = await redisCall(target, ['CLUSTER', 'INFO'], timeoutMs).catch(() => undefined);
  if (typeof reply !== 'string') return undefined;
  return Object.fromEntries(reply.split(/\r?\n/).filter((l) => l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
}

/** True when PING at a redis:// or rediss:// URL gets PONG (after AUTH when the URL carries credentials). */
export function redisPing(u: URL, timeoutMs: number): Promise<boolean> {
  const host = u.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(u.port || 6379);
  const user = decodeURIComponent(u.username);
  const pass = decodeURIComponent(u.password);
  const commands: string[][] = [];
  if (pass) commands.push(user ? ['AUTH', user, pass] : ['AUTH', pass]);
  commands.push(['PING']);
  const secure = u.protocol === 'rediss:';
  return new Promise((resolve) => {
    const sock = secure ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host }) : net.connect({ host, port });
    let buf = '';
    let done = false;
    const finish = (ok: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.once(secure ? 'secureConnect' : 'connect', () => sock.write(commands.map(encode).join('')));
    sock.on('data', (chunk: Buffer) => {
      buf += chunk.toString('utf8');
      // Every reply here is a single line (+OK, +PONG, -ERR ..., -LOADING ...).
      const lines = buf.split('\r\n').slice(0, -1);
      if (lines.length >= commands.length) finish(lines[commands.length - 1] === '+PONG');
    });
    sock.on('error', () => finish(false));
    sock.on('close', () => finish(false));
  });
}
