// Several hosts on one machine: Linux network namespaces joined by veth links to a bridge that
// lives in a namespace of its own (the switch). Each host sees only its eth0 (and lo); the
// switch port of a host can be taken down and up again, which cuts the host off the network as
// a pulled cable does (its sockets stay open, packets go nowhere). The test process itself is
// attached to the switch as the "observer" (10.x.y.1), to check results over the same network.
// Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN) and iproute2; CI runs as root.
import { execFileSync, spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';

export type Host = { name: string; ns: string; ip: string; switchPort: string };

/** PATH with the system folders (`ip`, `runuser` live in /usr/sbin, which a CI's PATH may lack). */
export const SYSTEM_PATH = [...new Set([...(process.env.PATH ?? '').split(':').filter(Boolean), '/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin'])].join(':');

const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PATH: SYSTEM_PATH } });

/** Why this machine cannot build the virtual network, or undefined when it can. */
export function netnsUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'test:cluster builds network namespaces and needs root (CI runs as root)';
  try {
    ip('-V');
  } catch {
    return 'test:cluster needs iproute2 (`ip`; apt-get install iproute2)';
  }
  const probe = `fgprobe${randomBytes(3).toString('hex')}`;
  try {
    ip('netns', 'add', probe);
    ip('-n', probe, 'link', 'add', 'br0', 'type', 'bridge');
  } catch (e) {
    return `cannot create a network namespace with a bridge here: ${(e as { stderr?: string }).stderr?.trim() || (e as Error).message}`;
  } finally {
    try {
      ip('netns', 'del', probe);
    } catch {
      // not created
    }
  }
  return undefined;
}

export class VirtualNetwork {
  readonly tag: string;
  readonly subnet: string;
  readonly observerIp: string;
  private readonly sw: string;
  private readonly observerLink: string;
  private readonly hosts = new Map<string, Host>();
  private readonly children = new Set<ChildProcess>();

  private constructor(tag: string, third: number) {
    this.tag = tag;
    this.subnet = `10.213.${third}`;
    this.observerIp = `${this.subnet}.1`;
    this.sw = `fg${tag}-switch`;
    this.observerLink = `fg${tag}obs`;
  }

  /**
   * Removes the namespaces of earlier runs that were killed before they could clean up (a test
   * process ended by SIGKILL): those of a tag none of whose hosts runs a process any more, made
   * over ten minutes ago (a run being built right now has no processes yet either).
   */
  static sweepStale(): void {
    const old = (ns: string): boolean => {
      try {
        return statSync(`/run/netns/${ns}`).mtimeMs < Date.now() - 10 * 60_000;
      } catch {
        return false;
      }
    };
    const byTag = new Map<string, string[]>();
    for (const line of ip('netns', 'list').split('\n')) {
      const ns = /^(fg([0-9a-f]{4})-[a-z0-9]+)\b/.exec(line);
      if (ns) byTag.set(ns[2]!, [...(byTag.get(ns[2]!) ?? []), ns[1]!]);
    }
    for (const namespaces of byTag.values()) {
      if (!namespaces.every(old) || namespaces.some((ns) => ip('netns', 'pids', ns).trim() !== '')) continue;
      for (const ns of namespaces) {
        try {
          ip('netns', 'del', ns);
        } catch {
          // gone meanwhile
        }
      }
    }
  }

  /** The switch and one namespace per host name, addressed 10.213.y.10, .11, ... in order. */
  static create(hostNames: string[]): VirtualNetwork {
    VirtualNetwork.sweepStale();
    const tag = randomBytes(2).toString('hex');
    const net = new VirtualNetwork(tag, 1 + (parseInt(tag, 16) % 250));
    live.add(net);
    try {
      ip('netns', 'add', net.sw);
      ip('-n', net.sw, 'link', 'set', 'lo', 'up');
      ip('-n', net.sw, 'link', 'add', 'br0', 'type', 'bridge');
      ip('-n', net.sw, 'link', 'set', 'br0', 'up');
      // the observer: this process's namespace gets a port on the switch
      ip('link', 'add', net.observerLink, 'type', 'veth', 'peer', 'name', 'obs', 'netns', net.sw);
      ip('addr', 'add', `${net.observerIp}/24`, 'dev', net.observerLink);
      ip('link', 'set', net.observerLink, 'up');
      ip('-n', net.sw, 'link', 'set', 'obs', 'master', 'br0');
      ip('-n', net.sw, 'link', 'set', 'obs', 'up');
      hostNames.forEach((name, i) => {
        const host: Host = { name, ns: `fg${tag}-${name}`, ip: `${net.subnet}.${10 + i}`, switchPort: `p-${name}` };
        ip('netns', 'add', host.ns);
        ip('-n', host.ns, 'link', 'set', 'lo', 'up');
        ip('-n', net.sw, 'link', 'add', host.switchPort, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', host.ns);
        ip('-n', net.sw, 'link', 'set', host.switchPort, 'master', 'br0');
        ip('-n', net.sw, 'link', 'set', host.switchPort, 'up');
        ip('-n', host.ns, 'addr', 'add', `${host.ip}/24`, 'dev', 'eth0');
        ip('-n', host.ns, 'link', 'set', 'eth0', 'up');
        net.hosts.set(name, host);
      });
    } catch (e) {
      net.destroy();
      throw new Error(`building the virtual network failed: ${(e as { stderr?: string }).stderr?.trim() || (e as Error).message}`, { cause: e });
    }
    return net;
  }

  host(name: string): Host {
    const h = this.hosts.get(name);
    if (!h) throw new Error(`no host ${name} in this network`);
    return h;
  }

  /** Pulls the host's cable: its switch port goes down; nothing reaches it or leaves it. */
  linkDown(name: string): void {
    ip('-n', this.sw, 'link', 'set', this.host(name).switchPort, 'down');
  }

  linkUp(name: string): void {
    ip('-n', this.sw, 'link', 'set', this.host(name).switchPort, 'up');
  }

  /** Runs a command inside the host's namespace (`ip netns exec` execs it: the pid is the command's). */
  spawn(name: string, command: string, args: string[], opts: { env: NodeJS.ProcessEnv; stdio?: StdioOptions }): ChildProcess {
    // `ip netns exec` finds the command on the PATH of opts.env
    const env = { ...opts.env, PATH: opts.env.PATH ?? SYSTEM_PATH };
    const child = spawn('ip', ['netns', 'exec', this.host(name).ns, command, ...args], { env, stdio: opts.stdio ?? ['ignore', 'pipe', 'pipe'] });
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
    return child;
  }

  /** Kills everything still running in the hosts and removes the namespaces and links. Idempotent. */
  destroy(): void {
    for (const c of this.children) c.kill('SIGKILL');
    for (const h of this.hosts.values()) {
      try {
        for (const pid of ip('netns', 'pids', h.ns).split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        // namespace gone or process gone
      }
    }
    for (const ns of [...[...this.hosts.values()].map((h) => h.ns), this.sw]) {
      try {
        ip('netns', 'del', ns);
      } catch {
        // never created
      }
    }
    try {
      ip('link', 'del', this.observerLink);
    } catch {
      // gone with the switch's end
    }
    this.hosts.clear();
    live.delete(this);
  }
}

// Last resort: namespaces must not outlive the test process.
const live = new Set<VirtualNetwork>();
process.once('exit', () => {
  for (const net of live) net.destroy();
});
