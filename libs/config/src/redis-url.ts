// FUGU_REDIS_URL: one Redis, or a Redis Cluster by its seed nodes.
//
//   redis://[user:password@]host[:port][/db]      one Redis (rediss:// with TLS)
//   redis+cluster://[user:password@]host[:port][,host[:port]...]
//                                                 a Redis Cluster (rediss+cluster:// with TLS):
//                                                 one or more seed nodes, comma-separated; the
//                                                 client learns the other nodes from them
//
// A cluster has no databases: a path other than nothing, `/` or `/0` is refused. Port 6379 when
// none is given. IPv6 hosts go in brackets: redis+cluster://[::1]:7000,[::1]:7001.
import { ConfigError } from '@fugu/core';

export type RedisTarget =
  | { kind: 'single'; url: string }
  | { kind: 'cluster'; nodes: Array<{ host: string; port: number }>; username?: string; password?: string; tls: boolean };

const CLUSTER_SCHEMES = ['redis+cluster:', 'rediss+cluster:'];

/** A malformed FUGU_REDIS_URL: `detail` says what is wrong and how to write it. */
export class RedisUrlError extends ConfigError {
  readonly detail: string;
  constructor(url: string, why: string, variable: string) {
    const detail = `${why} (got ${redactRedisUrl(url)}; one Redis: redis://host:port, a cluster: redis+cluster://host1:port1,host2:port2,...)`;
    super(`invalid configuration: ${variable}: ${detail}`, variable);
    this.detail = detail;
  }
}

const bad = (url: string, why: string, variable: string): RedisUrlError => new RedisUrlError(url, why, variable);

/** Whether the URL names a Redis Cluster (redis+cluster:// or rediss+cluster://). */
export const isClusterUrl = (url: string): boolean => CLUSTER_SCHEMES.some((s) => url.toLowerCase().startsWith(`${s}//`));

/** The URL with any password replaced, for messages (works on the cluster form too). */
export function redactRedisUrl(url: string): string {
  return url.replace(/^([a-z+]+:\/\/)([^@/]*)@/i, (_m, scheme: string, auth: string) => {
    const colon = auth.indexOf(':');
    return colon < 0 ? `${scheme}${auth}@` : `${scheme}${auth.slice(0, colon)}:***@`;
  });
}

/** Parses FUGU_REDIS_URL; throws a ConfigError naming `variable` and what is wrong. */
export function parseRedisUrl(url: string, variable = 'FUGU_REDIS_URL'): RedisTarget {
  const m = /^([a-z+]+):\/\/(.*)$/i.exec(url.trim());
  if (!m) throw bad(url, 'not a URL', variable);
  const scheme = `${m[1]!.toLowerCase()}:`;
  let rest = m[2]!;
  if (scheme === 'redis:' || scheme === 'rediss:') {
    const authority = rest.split(/[/?#]/, 1)[0]!;
    const hosts = authority.slice(authority.lastIndexOf('@') + 1);
    if (hosts.includes(',')) throw bad(url, 'several hosts in a redis:// URL; a Redis Cluster is written redis+cluster://host1:port1,host2:port2', variable);
    try {
      new URL(url);
    } catch {
      throw bad(url, 'not a valid redis:// URL', variable);
    }
    if (!hosts) throw bad(url, 'no host', variable);
    return { kind: 'single', url };
  }
  if (!CLUSTER_SCHEMES.includes(scheme)) throw bad(url, `unsupported scheme ${scheme}//`, variable);
  if (/[?#]/.test(rest)) throw bad(url, 'a cluster URL takes no query or fragment', variable);
  let username: string | undefined;
  let password: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    const auth = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = auth.indexOf(':');
    const user = decodeURIComponent(colon < 0 ? auth : auth.slice(0, colon));
    const pass = colon < 0 ? '' : decodeURIComponent(auth.slice(colon + 1));
    // redis://:password@ (no user) as ioredis reads it: the default user with that password
    if (colon < 0) password = user || undefined;
    else {
      if (user) username = user;
      if (pass) password = pass;
    }
  }
  const slash = rest.indexOf('/');
  const hostList = slash < 0 ? rest : rest.slice(0, slash);
  const db = slash < 0 ? '' : rest.slice(slash + 1);
  if (db !== '' && db !== '0') throw bad(url, `a Redis Cluster has only database 0, not /${db}`, variable);
  if (!hostList) throw bad(url, 'no seed node', variable);
  const nodes = hostList.split(',').map((h, i) => {
    const node = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+))(?::(\d+))?$/.exec(h.trim());
    if (!node) throw bad(url, `seed node ${i + 1} ("${h}") is not host[:port]`, variable);
    const port = node[3] === undefined ? 6379 : Number(node[3]);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw bad(url, `seed node ${i + 1} ("${h}") has no valid port (1-65535)`, variable);
    return { host: (node[1] ?? node[2])!, port };
  });
  return { kind: 'cluster', nodes, ...(username !== undefined && { username }), ...(password !== undefined && { password }), tls: scheme === 'rediss+cluster:' };
}

/** A cluster URL for these seed nodes (what `fugu up --redis-cluster` prints). */
export const clusterUrlFor = (nodes: ReadonlyArray<{ host: string; port: number }>): string =>
  `redis+cluster://${nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(',')}`;
